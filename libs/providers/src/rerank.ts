/** What the rerank upstreams (spec 4.12; `cohere/`, `jina/`) share: reading a ranked list back. */
import { isRecord } from './json';
import type { RerankResult } from './provider';
import type { SingleOperationOptions } from './single-operation';
import { invalidResponse } from './transport';

/**
 * Cohere: its root, `https://api.cohere.com` (a version segment at the end, as in the
 * simulator's `.../v1`, is dropped: the adapter calls `/v2/rerank`); Jina: `https://api.jina.ai/v1`.
 */
export type RerankOptions = SingleOperationOptions;

export function resultsOf(json: unknown): RerankResult['results'] {
  if (!isRecord(json) || !Array.isArray(json.results)) throw invalidResponse('rerank response without a results array', json);
  return json.results.map((r: unknown) => {
    if (!isRecord(r) || !Number.isSafeInteger(r.index) || typeof r.relevance_score !== 'number')
      throw invalidResponse('rerank result without index and relevance_score', json);
    return { index: r.index as number, relevance_score: r.relevance_score };
  });
}

export const count = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.ceil(value) : null);
