/**
 * What the upstreams that serve one operation share (rerank in `cohere/` and `jina/`, search in
 * `searxng/` and `tavily/`, video in `videorouter/`): where and how they are called.
 */
import type { AdapterOptions } from './provider';
import { DEFAULT_TIMEOUT_MS } from './transport';

export type SingleOperationOptions = Pick<AdapterOptions, 'baseUrl' | 'apiKey' | 'timeoutMs'>;

export interface SingleOperationConnection {
  baseUrl: string;
  /**
   * The base URL without a version segment at its end (`.../v1`, as the simulator's URL has), for
   * upstreams whose paths carry their own version or none.
   */
  root: string;
  timeoutMs: number;
  headers: Record<string, string>;
}

/** `headers` default to a bearer key and a JSON body, what every one of them but SearXNG wants. */
export function singleOperationConnection(options: SingleOperationOptions, headers?: Record<string, string>): SingleOperationConnection {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  return {
    baseUrl,
    root: baseUrl.replace(/\/v\d+$/, ''),
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    headers: headers ?? { authorization: `Bearer ${options.apiKey}`, 'content-type': 'application/json' },
  };
}
