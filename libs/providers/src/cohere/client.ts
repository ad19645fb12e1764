import { isRecord } from '../json';
import type { RerankBody, RerankResult } from '../provider';
import { count, RerankAdapter, resultsOf } from '../rerank';
import { mapParameters, sameNames } from '../operations';
import { postJsonUpstream } from '../transport';

export const COHERE_RERANK_PARAMETERS = sameNames<'rerank'>(['model', 'query', 'documents', 'top_n']);

/** Cohere v2: `{model, query, documents, top_n}` -> `{id, results: [{index, relevance_score}], meta.billed_units.search_units}`. */
export class CohereRerankAdapter extends RerankAdapter {
  async rerank(body: RerankBody, signal?: AbortSignal): Promise<RerankResult> {
    const { json, latencyMs } = await postJsonUpstream(
      `${this.baseUrl.replace(/\/v\d+$/, '')}/v2/rerank`,
      this.headers,
      mapParameters(COHERE_RERANK_PARAMETERS, { ...body }),
      this.timeoutMs,
      signal,
    );
    const meta = isRecord(json) && isRecord(json.meta) ? json.meta : {};
    const billed = isRecord(meta.billed_units) ? meta.billed_units : {};
    return { results: resultsOf(json), searchUnits: count(billed.search_units), totalTokens: null, latencyMs };
  }
}
