/**
 * Adapter for any upstream that speaks the OpenAI wire format (OpenAI, OpenRouter, vLLM, Ollama,
 * llama.cpp, the simulator). It forwards a body that the gateway has already validated and mapped
 * to the upstream's model id, and turns every failure into a ProviderError that says whether a
 * retry or a fallback model makes sense.
 */
import { Agent, request, type Dispatcher, FormData } from 'undici';
import { isRecord } from './json';
import { ProviderError } from './provider-error';
import { readSse } from './sse';
import type { ChatChunk, ChatCompletion, EmbeddingsResponse } from './wire';

/** Request fields of the OpenAI chat API. `stream` and `stream_options` are set by the adapter. */
export const OPENAI_CHAT_PARAMS: readonly string[] = [
  'model', 'messages', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'stop',
  'seed', 'presence_penalty', 'frequency_penalty', 'logit_bias', 'logprobs', 'top_logprobs', 'n',
  'tools', 'tool_choice', 'parallel_tool_calls', 'response_format', 'reasoning_effort',
  'modalities', 'audio', 'prediction', 'user', 'safety_identifier', 'prompt_cache_key',
  'metadata', 'store', 'service_tier', 'verbosity', 'web_search_options',
];

/**
 * What routers (OpenRouter) and open-weight servers (vLLM, Ollama, llama.cpp) accept on top.
 * OpenAI itself answers 400 to these, hence a separate list chosen per upstream.
 */
export const ROUTER_CHAT_PARAMS: readonly string[] = [
  ...OPENAI_CHAT_PARAMS,
  'top_k', 'min_p', 'repetition_penalty', 'reasoning', 'include_reasoning', 'provider',
];

const EMBEDDING_PARAMS: ReadonlySet<string> = new Set(['model', 'input', 'dimensions', 'encoding_format', 'user']);

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
  /** Chat request fields forwarded upstream; the rest (gateway-only fields) is dropped. */
  chatParams?: readonly string[];
}

/**
 * `reasoning.exclude` or `include_reasoning: false` (spec 4.2): the model may think, but the
 * caller does not get the thinking. Upstreams that do not know these fields would return it.
 */
export function excludesReasoning(body: Record<string, unknown>): boolean {
  return (isRecord(body.reasoning) && body.reasoning.exclude === true) || body.include_reasoning === false;
}

/**
 * OpenAI's own API takes reasoning only as `reasoning_effort`; the gateway's `reasoning.effort`
 * (and the `:thinking` suffix, which sets it) becomes that field when the caller did not give
 * it. `reasoning.max_tokens` has no OpenAI equivalent and stays behind.
 */
function withReasoningEffort(body: Record<string, unknown>): Record<string, unknown> {
  const effort = isRecord(body.reasoning) ? body.reasoning.effort : undefined;
  return typeof effort === 'string' && body.reasoning_effort == null ? { ...body, reasoning_effort: effort } : body;
}

/** The answer without its thinking, for a caller who excluded it. */
function withoutReasoning<T extends { reasoning?: unknown; reasoning_details?: unknown }>(message: T | undefined): T | undefined {
  if (!message) return message;
  const { reasoning: _text, reasoning_details: _details, ...rest } = message;
  return rest as T;
}

export interface NormalizedUsage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  reasoningTokens: number;
}

export interface ChatCompletionResult {
  response: ChatCompletion;
  usage: NormalizedUsage;
  latencyMs: number;
}

export interface EmbeddingsResult {
  response: EmbeddingsResponse;
  usage: NormalizedUsage;
  latencyMs: number;
}

/**
 * What the gateway calls on an upstream, whatever its wire format: requests and answers are in
 * the OpenAI shape, and every failure is a ProviderError. Each adapter translates at its edge.
 */
export interface ChatProvider {
  chatCompletion(body: object, signal?: AbortSignal): Promise<ChatCompletionResult>;
  /** OpenAI chunks, the usage chunk last; a stream cut short throws a `network` ProviderError. */
  streamChatCompletion(body: object, signal?: AbortSignal): AsyncGenerator<ChatChunk>;
  embeddings(body: object, signal?: AbortSignal): Promise<EmbeddingsResult>;
  /** Spec 4.13; only adapters whose catalog entry serves moderation models have it. */
  moderations?(body: object, signal?: AbortSignal): Promise<JsonResult>;
  /** Spec 4.12; only rerank adapters have it. */
  rerank?(body: RerankBody, signal?: AbortSignal): Promise<RerankResult>;
  /** Spec 4.8-4.10; OpenAI-compatible adapters have them. */
  images?(body: object, signal?: AbortSignal): Promise<JsonResult>;
  speech?(body: object, signal?: AbortSignal): Promise<BinaryResult>;
  transcribe?(kind: 'transcriptions' | 'translations', form: AudioForm, signal?: AbortSignal): Promise<BinaryResult>;
}

/** A rerank request in the gateway's terms (Cohere's, which Jina's extends). */
export interface RerankBody {
  model: string;
  query: string;
  documents: string[];
  top_n?: number;
}

/** A rerank answer in the gateway's terms, whatever the upstream's shape. */
export interface RerankResult {
  /** Best first. */
  results: { index: number; relevance_score: number }[];
  /** What the provider billed: Cohere's search units, or Jina's tokens; null when it did not say. */
  searchUnits: number | null;
  totalTokens: number | null;
  latencyMs: number;
}

export const DEFAULT_TIMEOUT_MS = 120_000;

export class OpenAiCompatibleAdapter implements ChatProvider {
  private readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly chatParams: ReadonlySet<string>;

  constructor(options: OpenAiCompatibleOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.headers = {
      ...options.headers,
      authorization: `Bearer ${options.apiKey}`,
      'content-type': 'application/json',
    };
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.chatParams = new Set(options.chatParams ?? OPENAI_CHAT_PARAMS);
  }

  async chatCompletion(body: object, signal?: AbortSignal): Promise<ChatCompletionResult> {
    const { json, latencyMs } = await this.postJson('/chat/completions', this.payload(body), signal);
    if (!isRecord(json) || !Array.isArray(json.choices)) {
      throw invalidResponse('chat completion without a choices array', json);
    }
    const response = json as ChatCompletion;
    if (excludesReasoning(body as Record<string, unknown>)) {
      response.choices = response.choices.map((choice) => ({ ...choice, message: withoutReasoning(choice.message)! }));
    }
    return { response, usage: normalizeUsage(json.usage), latencyMs };
  }

  /**
   * Yields every chunk, the trailing usage chunk (empty `choices`) included: usage is always
   * requested, because billing needs it whether or not the client asked. Ends normally only
   * after `[DONE]`; a stream cut short throws a `network` ProviderError after the chunks that
   * did arrive, so callers can tell it from a clean finish.
   */
  async *streamChatCompletion(body: object, signal?: AbortSignal): AsyncGenerator<ChatChunk> {
    const requested = (body as { stream_options?: unknown }).stream_options;
    const payload = {
      ...this.payload(body),
      stream: true,
      stream_options: { ...(isRecord(requested) ? requested : {}), include_usage: true },
    };
    const exclude = excludesReasoning(body as Record<string, unknown>);
    const deadline = new Deadline(this.timeoutMs, signal);
    try {
      const stream = await this.post('/chat/completions', payload, deadline, 'text/event-stream');
      // Leaving this loop early (return, throw) ends the body's iterator, which destroys the body.
      for await (const event of readSse(deadline.whileReading(stream))) {
        if (event.data === '[DONE]') return;
        const chunk = parseJson(event.data);
        // OpenAI and OpenRouter report a failure after the headers as an error event.
        if (isRecord(chunk) && isRecord(chunk.error)) throw streamedError(chunk);
        if (exclude && isRecord(chunk) && Array.isArray(chunk.choices)) {
          const choices = (chunk as ChatChunk).choices.map((choice) => ({ ...choice, delta: withoutReasoning(choice.delta)! }));
          // A chunk that only carried thinking is nothing once the thinking is gone: not sent as
          // an empty `delta: {}` (issue 15.8). Its usage, if any, still counts.
          const empty = choices.length > 0 && choices.every((c) => c.finish_reason == null && Object.keys(c.delta ?? {}).length === 0);
          if (empty && !isRecord((chunk as ChatChunk).usage)) continue;
          (chunk as ChatChunk).choices = empty ? [] : choices;
        }
        yield chunk as ChatChunk;
      }
      throw new ProviderError({ kind: 'network', status: 502, message: 'upstream stream ended before [DONE]' });
    } catch (error) {
      throw deadline.failure(error);
    } finally {
      deadline.dispose();
    }
  }

  /** The request as this upstream takes it: its own fields only, reasoning in its own terms. */
  private payload(body: object): Record<string, unknown> {
    const forwarded = this.chatParams.has('reasoning') ? (body as Record<string, unknown>) : withReasoningEffort(body as Record<string, unknown>);
    return pick(forwarded, this.chatParams);
  }

  async embeddings(body: object, signal?: AbortSignal): Promise<EmbeddingsResult> {
    const { json, latencyMs } = await this.postJson('/embeddings', pick(body, EMBEDDING_PARAMS), signal);
    if (!isRecord(json) || !Array.isArray(json.data)) {
      throw invalidResponse('embeddings response without a data array', json);
    }
    return { response: json as EmbeddingsResponse, usage: normalizeUsage(json.usage), latencyMs };
  }

  /**
   * Spec 4.13: OpenAI's moderation answer as it is (`{id, model, results}`), or a
   * ProviderError. Free for the caller, but it goes through the pipeline like every call.
   */
  async moderations(body: object, signal?: AbortSignal): Promise<JsonResult> {
    const { json, latencyMs } = await this.postJson('/moderations', body, signal);
    if (!isRecord(json) || !Array.isArray(json.results)) throw invalidResponse('moderation response without a results array', json);
    return { json, latencyMs };
  }

  /** Spec 4.8: OpenAI's images answer as it is (`{created, data, usage?}`), or a ProviderError. */
  async images(body: object, signal?: AbortSignal): Promise<JsonResult> {
    const { json, latencyMs } = await this.postJson('/images/generations', body, signal);
    if (!isRecord(json) || !Array.isArray(json.data)) throw invalidResponse('images response without a data array', json);
    return { json, latencyMs };
  }

  /** Spec 4.9: the audio bytes as the provider sent them, with their content type. */
  async speech(body: object, signal?: AbortSignal): Promise<BinaryResult> {
    const started = performance.now();
    const deadline = new Deadline(this.timeoutMs, signal);
    try {
      const answer = await this.post('/audio/speech', body, deadline, 'application/octet-stream');
      const bytes = Buffer.from(await answer.arrayBuffer());
      return { bytes, contentType: answer.contentType ?? 'application/octet-stream', latencyMs: performance.now() - started };
    } catch (error) {
      throw deadline.failure(error);
    } finally {
      deadline.dispose();
    }
  }

  /**
   * Spec 4.10: one audio file and its fields as a multipart form to `/audio/transcriptions` or
   * `/audio/translations`; the answer's body and content type as they came (JSON or text).
   */
  async transcribe(kind: 'transcriptions' | 'translations', form: AudioForm, signal?: AbortSignal): Promise<BinaryResult> {
    const started = performance.now();
    const deadline = new Deadline(this.timeoutMs, signal);
    try {
      const data = new FormData();
      for (const [name, value] of [...Object.entries(form.fields), ...(form.lists ?? [])]) data.append(name, value);
      data.append('file', new Blob([form.file], { type: form.contentType }), form.filename);
      const { 'content-type': _json, ...headers } = this.headers;
      const answer = await postUpstream(`${this.baseUrl}/audio/${kind}`, { ...headers, accept: 'application/json, text/plain' }, data, deadline);
      const bytes = Buffer.from(await answer.arrayBuffer());
      return { bytes, contentType: answer.contentType ?? 'application/json', latencyMs: performance.now() - started };
    } catch (error) {
      throw deadline.failure(error);
    } finally {
      deadline.dispose();
    }
  }

  private postJson(path: string, payload: object, signal: AbortSignal | undefined) {
    return postJsonUpstream(this.baseUrl + path, this.headers, payload, this.timeoutMs, signal);
  }

  private post(path: string, payload: object, deadline: Deadline, accept: string): Promise<UpstreamBody & { contentType?: string }> {
    return postUpstream(this.baseUrl + path, { ...this.headers, accept }, payload, deadline);
  }
}

export interface JsonResult {
  json: Record<string, unknown>;
  latencyMs: number;
}

/** A body that is not JSON (audio, or a transcript as text), with the type the provider gave it. */
export interface BinaryResult {
  bytes: Buffer;
  contentType: string;
  latencyMs: number;
}

/** An audio file and the text fields that go with it in a multipart form. */
export interface AudioForm {
  file: Buffer;
  filename: string;
  contentType: string;
  fields: Record<string, string>;
  /** Fields given once per value (`timestamp_granularities[]`). */
  lists?: [string, string][];
}

/** POSTs JSON under a deadline of `timeoutMs` and parses the JSON answer; every failure is a ProviderError. */
export async function postJsonUpstream(url: string, headers: Record<string, string>, payload: object, timeoutMs: number, signal?: AbortSignal) {
  const started = performance.now();
  const deadline = new Deadline(timeoutMs, signal);
  try {
    const answer = await postUpstream(url, { ...headers, accept: 'application/json' }, payload, deadline);
    const json = parseJson(await answer.text());
    return { json, latencyMs: performance.now() - started };
  } catch (error) {
    throw deadline.failure(error);
  } finally {
    deadline.dispose();
  }
}

/** A Node Readable with `text()`. Read it to the end or destroy it: until then its socket stays taken. */
export type UpstreamBody = Dispatcher.ResponseData['body'];

/**
 * One keep-alive pool for every upstream: undici's request() rather than fetch(), which spends
 * its CPU on WHATWG streams. No per-origin connection cap, as with fetch: a burst opens sockets
 * instead of queuing. undici's own timeouts are off, the Deadline alone decides. Redirects are
 * never followed: undici strips only `authorization` when one crosses origins, so an `x-api-key`
 * (the operator's or the account's own) and the prompt would go wherever a provider, or whoever
 * answers in its name, points.
 */
const upstreams = new Agent({ keepAliveTimeout: 10_000, pipelining: 1, headersTimeout: 0, bodyTimeout: 0 });

const USER_AGENT = 'svc-gateway/0.1';

/**
 * POSTs JSON to an upstream under the deadline and returns the body of a 2xx answer; any other
 * status becomes a ProviderError. An abort of the deadline's signal destroys the body too.
 */
export async function postUpstream(url: string, headers: Record<string, string>, payload: object, deadline: Deadline): Promise<UpstreamBody & { contentType?: string }> {
  const { statusCode, body, headers: answered } = await request(url, {
    method: 'POST',
    // request() sends no User-Agent of its own, and some providers' firewalls refuse requests without one.
    headers: { 'user-agent': USER_AGENT, ...headers },
    // A multipart form goes as it is (undici sets its boundary); anything else as JSON.
    body: payload instanceof FormData ? payload : JSON.stringify(payload),
    signal: deadline.signal,
    dispatcher: upstreams,
  });
  if (statusCode >= 300 && statusCode <= 399) {
    // Read and dropped, so the socket goes back to the pool.
    await body.dump().catch(() => undefined);
    // A provider failure like any other (not billed; a fallback may answer), not the caller's.
    throw new ProviderError({ kind: 'invalid_response', status: 502, message: `upstream answered a redirect (HTTP ${statusCode}), which is not followed`, upstreamBody: null });
  }
  if (statusCode < 200 || statusCode > 299) throw await httpError(statusCode, body);
  const type = answered['content-type'];
  return Object.assign(body, { contentType: Array.isArray(type) ? type[0] : type });
}

/**
 * The name the gateway already uses. As a value it is the class (`new OpenAiCompatibleProvider`);
 * as a type it is the ChatProvider shape, so code typed with it also takes other adapters.
 */
export const OpenAiCompatibleProvider = OpenAiCompatibleAdapter;
export type OpenAiCompatibleProvider = ChatProvider;

/** Usage in the gateway's terms; absent members are 0. Reasoning is inside completionTokens. */
export function normalizeUsage(usage: unknown): NormalizedUsage {
  const u = isRecord(usage) ? usage : {};
  const prompt = isRecord(u.prompt_tokens_details) ? u.prompt_tokens_details : {};
  const completion = isRecord(u.completion_tokens_details) ? u.completion_tokens_details : {};
  return {
    promptTokens: count(u.prompt_tokens),
    completionTokens: count(u.completion_tokens),
    cachedTokens: count(prompt.cached_tokens),
    reasoningTokens: count(completion.reasoning_tokens),
  };
}

/**
 * The adapter's own abort signal: it fires when the upstream stays silent for `ms`, and follows
 * the caller's signal. Time spent by the consumer between two stream pieces is not counted, so a
 * slow client cannot turn into an upstream timeout.
 */
export class Deadline {
  readonly signal: AbortSignal;
  private readonly timeout = new AbortController();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ms: number,
    private readonly callerSignal: AbortSignal | undefined,
  ) {
    this.signal = callerSignal ? AbortSignal.any([callerSignal, this.timeout.signal]) : this.timeout.signal;
    this.arm();
  }

  async *whileReading(source: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
    for await (const bytes of source) {
      this.dispose();
      yield bytes;
      this.arm();
    }
  }

  /** The error to throw for `error`: a cancellation by the caller is rethrown as it is. */
  failure(error: unknown): unknown {
    if (this.callerSignal?.aborted) return this.callerSignal.reason;
    if (this.timeout.signal.aborted) {
      return new ProviderError({ kind: 'timeout', status: 504, message: `upstream did not answer within ${this.ms} ms` });
    }
    if (error instanceof ProviderError) return error;
    // undici rejects with the socket error itself: "connect ECONNREFUSED ...", "other side closed".
    const detail = (error as { message?: string } | undefined)?.message || String(error);
    return new ProviderError({ kind: 'network', status: 502, message: `upstream connection failed: ${detail}`, cause: error });
  }

  dispose(): void {
    clearTimeout(this.timer);
  }

  private arm(): void {
    this.timer = setTimeout(() => this.timeout.abort(), this.ms);
  }
}

/** Reads OpenAI's `{error: {message}}` and Anthropic's `{type: "error", error: {message}}` alike. */
async function httpError(status: number, responseBody: UpstreamBody): Promise<ProviderError> {
  const text = await responseBody.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Proxies in front of upstreams answer with HTML or plain text; keep it as it is.
  }
  const message = isRecord(body) && isRecord(body.error) && typeof body.error.message === 'string'
    ? body.error.message
    : `upstream answered HTTP ${status}`;
  return new ProviderError({ kind: 'http', status, message, upstreamBody: body });
}

function streamedError(chunk: Record<string, unknown>): ProviderError {
  const error = chunk.error as Record<string, unknown>;
  const code = error.code;
  const status = typeof code === 'number' && code >= 400 && code <= 599 ? code : 502;
  const message = typeof error.message === 'string' ? error.message : 'upstream reported an error mid-stream';
  return new ProviderError({ kind: 'http', status, message, upstreamBody: chunk });
}

export function invalidResponse(message: string, body: unknown): ProviderError {
  return new ProviderError({ kind: 'invalid_response', status: 502, message: `invalid upstream response: ${message}`, upstreamBody: body });
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw invalidResponse('body is not JSON', text);
  }
}

function pick(body: object, fields: ReadonlySet<string>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).filter(([key]) => fields.has(key)));
}

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}
