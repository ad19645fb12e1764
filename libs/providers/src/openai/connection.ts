/**
 * Any upstream that speaks the OpenAI wire format (OpenAI, OpenRouter, vLLM, Ollama, llama.cpp,
 * the simulator): where it is and how it is called. Each operation in this folder forwards a body
 * that the gateway has already validated and mapped to the upstream's model id, and turns every
 * failure into a ProviderError that says whether a retry or a fallback model makes sense.
 */
import type { ParameterConfig } from '../operations';
import { DEFAULT_TIMEOUT_MS, postJsonUpstream, postUpstream, type Deadline, type UpstreamBody } from '../transport';
import { OPENAI_PARAMETERS } from './parameters';

export interface OpenAiCompatibleOptions {
  /** Including the version prefix, e.g. `https://api.openai.com/v1`. */
  baseUrl: string;
  apiKey: string;
  /**
   * Non-streamed: the whole call. Streamed: the wait for the response headers, then for each
   * piece of the stream (an idle timeout, so a long generation is not cut). Default 120 s.
   */
  timeoutMs?: number;
  /** Sent with every request, e.g. OpenRouter's `HTTP-Referer` and `X-Title`. */
  headers?: Record<string, string>;
  /** Which chat fields the upstream takes: OpenAI's own, or a router's (see the catalog). */
  dialect?: 'openai' | 'router';
}

export interface OpenAiConnection {
  baseUrl: string;
  headers: Record<string, string>;
  timeoutMs: number;
  /** The chat fields of the upstream's dialect. */
  chatParams: ParameterConfig<'chat'>;
}

export function openAiConnection(options: OpenAiCompatibleOptions): OpenAiConnection {
  return {
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    headers: { ...options.headers, authorization: `Bearer ${options.apiKey}`, 'content-type': 'application/json' },
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    chatParams: OPENAI_PARAMETERS.chat[options.dialect ?? 'openai'],
  };
}

export function postJson(upstream: OpenAiConnection, path: string, payload: object, signal: AbortSignal | undefined) {
  return postJsonUpstream(upstream.baseUrl + path, upstream.headers, payload, upstream.timeoutMs, signal);
}

export function post(
  upstream: OpenAiConnection,
  path: string,
  payload: object,
  deadline: Deadline,
  accept: string,
): Promise<UpstreamBody & { contentType?: string }> {
  return postUpstream(upstream.baseUrl + path, { ...upstream.headers, accept }, payload, deadline);
}

/** The headers of a request whose body is not JSON. */
export function withoutJsonBody(upstream: OpenAiConnection): Record<string, string> {
  const { 'content-type': _json, ...headers } = upstream.headers;
  return headers;
}
