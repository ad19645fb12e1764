import { isRecord } from '../json';
import { mapParameters, sameNames } from '../operations';
import type { Operation, RerankBody, RerankResult } from '../provider';
import { count, resultsOf } from '../rerank';
import type { SingleOperationConnection } from '../single-operation';
import { postJsonUpstream } from '../transport';

export const COHERE_RERANK_PARAMETERS = sameNames<'rerank'>(['model', 'query', 'documents', 'top_n']);

/** Cohere v2: `{model, query, documents, top_n}` -> `{id, results: [{index, relevance_score}], meta.billed_units.search_units}`. */
async function ranked(upstream: SingleOperationConnection, body: RerankBody, signal?: AbortSignal): Promise<RerankResult> {
  const { json, latencyMs } = await postJsonUpstream(
    // The base is Cohere's root, `https://api.cohere.com`; a version segment at its end (the simulator's `/v1`) is dropped.
    `${upstream.root}/v2/rerank`,
    upstream.headers,
    mapParameters(COHERE_RERANK_PARAMETERS, { ...body }),
    upstream.timeoutMs,
    signal,
  );
  const meta = isRecord(json) && isRecord(json.meta) ? json.meta : {};
  const billed = isRecord(meta.billed_units) ? meta.billed_units : {};
  return { results: resultsOf(json), searchUnits: count(billed.search_units), totalTokens: null, latencyMs };
}

export const rerank: Operation<'rerank', SingleOperationConnection> = { parameters: COHERE_RERANK_PARAMETERS, calls: { rerank: ranked } };
