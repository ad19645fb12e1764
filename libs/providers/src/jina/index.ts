/** Jina's rerank API (`POST /v1/rerank`, billed in tokens): rerank only. */
import { declareProvider } from '../provider';
import { singleOperationConnection } from '../single-operation';
import { rerank } from './rerank';

export const jina = declareProvider(singleOperationConnection, {
  rerank,
});

export { JINA_RERANK_PARAMETERS } from './rerank';
