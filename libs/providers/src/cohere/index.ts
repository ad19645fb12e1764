/** Cohere's v2 rerank API (`POST /v2/rerank`, billed in search units): rerank only. */
import { declareProvider } from '../provider';
import { singleOperationConnection } from '../single-operation';
import { rerank } from './rerank';

export const cohere = declareProvider(singleOperationConnection, {
  rerank,
});

export { COHERE_RERANK_PARAMETERS } from './rerank';
