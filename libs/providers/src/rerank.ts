/**
 * Rerank upstreams (spec 4.12): Cohere's v2 API (`POST /v2/rerank`, billed in search units) and
 * Jina's (`POST /v1/rerank`, billed in tokens). Each maps the gateway's request to its wire
 * format and its answer back; they declare no other operation, so the catalog routes only
 * rerank models to them.
 */
import { isRecord } from './json';
import { DEFAULT_TIMEOUT_MS, invalidResponse, postJsonUpstream, type ChatProvider, type RerankBody, type RerankResult } from './openai-compatible';
import { ProviderError } from './provider-error';

export interface RerankOptions {
  /**
   * Cohere: its root, `https://api.cohere.com` (a version segment at the end, as in the
   * simulator's `.../v1`, is dropped: the adapter calls `/v2/rerank`); Jina: `https://api.jina.ai/v1`.
   */
  baseUrl: string;
  apiKey: string;
  timeoutMs?: number;
}

abstract class RerankAdapter implements ChatProvider {
  protected readonly baseUrl: string;
  protected readonly headers: Record<string, string>;
  protected readonly timeoutMs: number;

  constructor(options: RerankOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.headers = { authorization: `Bearer ${options.apiKey}`, 'content-type': 'application/json' };
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  abstract rerank(body: RerankBody, signal?: AbortSignal): Promise<RerankResult>;

  // A rerank provider serves no other operation; the catalog never routes one here.
  chatCompletion(): never {
    throw unsupported('chat completions');
  }
  // eslint-disable-next-line require-yield
  async *streamChatCompletion(): AsyncGenerator<never> {
    throw unsupported('chat completions');
  }
  embeddings(): never {
    throw unsupported('embeddings');
  }
}

/** Cohere v2: `{model, query, documents, top_n}` -> `{id, results: [{index, relevance_score}], meta.billed_units.search_units}`. */
export class CohereRerankAdapter extends RerankAdapter {
  async rerank(body: RerankBody, signal?: AbortSignal): Promise<RerankResult> {
    const { json, latencyMs } = await postJsonUpstream(`${this.baseUrl.replace(/\/v\d+$/, '')}/v2/rerank`, this.headers, body, this.timeoutMs, signal);
    const meta = isRecord(json) && isRecord(json.meta) ? json.meta : {};
    const billed = isRecord(meta.billed_units) ? meta.billed_units : {};
    return { results: resultsOf(json), searchUnits: count(billed.search_units), totalTokens: null, latencyMs };
  }
}

/** Jina: the same request (plus `return_documents`, which the gateway answers itself) -> `{results, usage.total_tokens}`. */
export class JinaRerankAdapter extends RerankAdapter {
  async rerank(body: RerankBody, signal?: AbortSignal): Promise<RerankResult> {
    const { json, latencyMs } = await postJsonUpstream(`${this.baseUrl}/rerank`, this.headers, { ...body, return_documents: false }, this.timeoutMs, signal);
    const usage = isRecord(json) && isRecord(json.usage) ? json.usage : {};
    return { results: resultsOf(json), searchUnits: null, totalTokens: count(usage.total_tokens), latencyMs };
  }
}

function resultsOf(json: unknown): RerankResult['results'] {
  if (!isRecord(json) || !Array.isArray(json.results)) throw invalidResponse('rerank response without a results array', json);
  return json.results.map((r: unknown) => {
    if (!isRecord(r) || !Number.isSafeInteger(r.index) || typeof r.relevance_score !== 'number') throw invalidResponse('rerank result without index and relevance_score', json);
    return { index: r.index as number, relevance_score: r.relevance_score };
  });
}

const count = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.ceil(value) : null);

function unsupported(operation: string): ProviderError {
  return new ProviderError({ kind: 'http', status: 400, message: `a rerank provider does not serve ${operation}` });
}
