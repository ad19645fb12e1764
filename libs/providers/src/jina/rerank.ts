import { isRecord } from '../json';
import { mapParameters, sameNames } from '../operations';
import type { Operation, RerankBody, RerankResult } from '../provider';
import { count, resultsOf } from '../rerank';
import type { SingleOperationConnection } from '../single-operation';
import { postJsonUpstream } from '../transport';

/** `return_documents` is answered by the gateway itself: Jina is always asked for none. */
export const JINA_RERANK_PARAMETERS = sameNames<'rerank'>(['model', 'query', 'documents', 'top_n']);

/** Jina: the same request (plus `return_documents`, which the gateway answers itself) -> `{results, usage.total_tokens}`. */
async function ranked(upstream: SingleOperationConnection, body: RerankBody, signal?: AbortSignal): Promise<RerankResult> {
  const { json, latencyMs } = await postJsonUpstream(
    `${upstream.baseUrl}/rerank`,
    upstream.headers,
    { ...mapParameters(JINA_RERANK_PARAMETERS, { ...body }), return_documents: false },
    upstream.timeoutMs,
    signal,
  );
  const usage = isRecord(json) && isRecord(json.usage) ? json.usage : {};
  return { results: resultsOf(json), searchUnits: null, totalTokens: count(usage.total_tokens), latencyMs };
}

export const rerank: Operation<'rerank', SingleOperationConnection> = { parameters: JINA_RERANK_PARAMETERS, calls: { rerank: ranked } };
