/**
 * What the rerank upstreams (spec 4.12; `cohere/`, `jina/`) share: transport, and reading a
 * ranked list back. They declare no other operation, so the catalog routes only rerank models
 * to them.
 */
import { isRecord } from './json';
import type { ChatProvider, RerankBody, RerankResult } from './provider';
import { ProviderError } from './provider-error';
import { DEFAULT_TIMEOUT_MS, invalidResponse } from './transport';

export interface RerankOptions {
  /**
   * Cohere: its root, `https://api.cohere.com` (a version segment at the end, as in the
   * simulator's `.../v1`, is dropped: the adapter calls `/v2/rerank`); Jina: `https://api.jina.ai/v1`.
   */
  baseUrl: string;
  apiKey: string;
  timeoutMs?: number;
}

export abstract class RerankAdapter implements ChatProvider {
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

export function resultsOf(json: unknown): RerankResult['results'] {
  if (!isRecord(json) || !Array.isArray(json.results)) throw invalidResponse('rerank response without a results array', json);
  return json.results.map((r: unknown) => {
    if (!isRecord(r) || !Number.isSafeInteger(r.index) || typeof r.relevance_score !== 'number') throw invalidResponse('rerank result without index and relevance_score', json);
    return { index: r.index as number, relevance_score: r.relevance_score };
  });
}

export const count = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.ceil(value) : null);

function unsupported(operation: string): ProviderError {
  return new ProviderError({ kind: 'http', status: 400, message: `a rerank provider does not serve ${operation}` });
}
