/** Jina's rerank API (`POST /v1/rerank`, billed in tokens): rerank only. */
import type { ProviderDeclaration } from '../provider';
import { JINA_RERANK_PARAMETERS, JinaRerankAdapter } from './client';

export const jina: ProviderDeclaration = {
  operations: { rerank: JINA_RERANK_PARAMETERS },
  client: (options) => new JinaRerankAdapter(options),
};

export { JINA_RERANK_PARAMETERS, JinaRerankAdapter } from './client';
