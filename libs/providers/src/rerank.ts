/** What the rerank upstreams (spec 4.12; `cohere/`, `jina/`) share: reading a ranked list back. */
import { isRecord } from './json';
import type { RerankResult } from './provider';
import { invalidResponse } from './transport';

export function resultsOf(json: unknown): RerankResult['results'] {
  if (!isRecord(json) || !Array.isArray(json.results)) throw invalidResponse('rerank response without a results array', json);
  return json.results.map((r: unknown) => {
    if (!isRecord(r) || !Number.isSafeInteger(r.index) || typeof r.relevance_score !== 'number')
      throw invalidResponse('rerank result without index and relevance_score', json);
    return { index: r.index as number, relevance_score: r.relevance_score };
  });
}

export const count = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.ceil(value) : null);
