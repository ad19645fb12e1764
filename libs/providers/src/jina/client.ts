import { isRecord } from '../json';
import type { RerankBody, RerankResult } from '../provider';
import { count, RerankAdapter, resultsOf } from '../rerank';
import { mapParameters, sameNames } from '../operations';
import { postJsonUpstream } from '../transport';

/** `return_documents` is answered by the gateway itself: Jina is always asked for none. */
export const JINA_RERANK_PARAMETERS = sameNames<'rerank'>(['model', 'query', 'documents', 'top_n']);

/** Jina: the same request (plus `return_documents`, which the gateway answers itself) -> `{results, usage.total_tokens}`. */
export class JinaRerankAdapter extends RerankAdapter {
  async rerank(body: RerankBody, signal?: AbortSignal): Promise<RerankResult> {
    const { json, latencyMs } = await postJsonUpstream(
      `${this.baseUrl}/rerank`,
      this.headers,
      { ...mapParameters(JINA_RERANK_PARAMETERS, { ...body }), return_documents: false },
      this.timeoutMs,
      signal,
    );
    const usage = isRecord(json) && isRecord(json.usage) ? json.usage : {};
    return { results: resultsOf(json), searchUnits: null, totalTokens: count(usage.total_tokens), latencyMs };
  }
}
