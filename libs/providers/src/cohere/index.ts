/** Cohere's v2 rerank API (`POST /v2/rerank`, billed in search units): rerank only. */
import type { ProviderDeclaration } from '../provider';
import { COHERE_RERANK_PARAMETERS, CohereRerankAdapter } from './client';

export const cohere: ProviderDeclaration = {
  operations: { rerank: COHERE_RERANK_PARAMETERS },
  client: (options) => new CohereRerankAdapter(options),
};

export { COHERE_RERANK_PARAMETERS, CohereRerankAdapter } from './client';
