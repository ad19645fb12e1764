/**
 * How every adapter reaches its upstream: undici on one shared keep-alive pool, a deadline per
 * call, and every failure turned into a ProviderError that says whether a retry or a fallback
 * model makes sense.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { Agent, request, type Dispatcher, FormData } from 'undici';
import { CallSignal } from '@svc/platform';
import { upstreamTraceHeaders } from '@svc/telemetry';
import { isRecord } from './json';
import { ProviderError } from './provider-error';
import type { SseEnd, SseEvent } from './sse';

export const DEFAULT_TIMEOUT_MS = 120_000;

/** POSTs JSON under a deadline of `timeoutMs` and parses the JSON answer; every failure is a ProviderError. */
export function postJsonUpstream(url: string, headers: Record<string, string>, payload: object, timeoutMs: number, signal?: AbortSignal) {
  return jsonUpstream((deadline) => postUpstream(url, { ...headers, accept: 'application/json' }, payload, deadline), timeoutMs, signal);
}

/** GETs `url` (its query string included) under the deadline and parses the JSON answer, as postJsonUpstream does. */
export function getJsonUpstream(url: string, headers: Record<string, string>, timeoutMs: number, signal?: AbortSignal) {
  return jsonUpstream((deadline) => callUpstream('GET', url, { ...headers, accept: 'application/json' }, undefined, deadline), timeoutMs, signal);
}

/**
 * Any method, a JSON payload or none, and the JSON answer with its headers, for upstreams whose
 * answers say more in headers (`openai-poll-after-ms`) or that want DELETE.
 */
export function sendJsonUpstream(
  method: UpstreamMethod,
  url: string,
  headers: Record<string, string>,
  payload: object | undefined,
  timeoutMs: number,
  signal?: AbortSignal,
) {
  return jsonUpstream((deadline) => callUpstream(method, url, { ...headers, accept: 'application/json' }, payload, deadline), timeoutMs, signal);
}

/** A binary answer read whole, with the content type the upstream gave it and the time since `started`. */
export async function binaryOf(answer: UpstreamBody & { contentType?: string }, started: number) {
  const bytes = Buffer.from(await answer.arrayBuffer());
  return { bytes, contentType: answer.contentType ?? 'application/octet-stream', latencyMs: performance.now() - started };
}

/** GETs a binary body (a video, an image) whole, with the content type the upstream gave it. */
export async function getBinaryUpstream(url: string, headers: Record<string, string>, timeoutMs: number, signal?: AbortSignal) {
  const started = performance.now();
  const deadline = new Deadline(timeoutMs, signal);
  try {
    return await binaryOf(await callUpstream('GET', url, headers, undefined, deadline), started);
  } catch (error) {
    throw deadline.failure(error);
  } finally {
    deadline.dispose();
  }
}

async function jsonUpstream(send: (deadline: Deadline) => Promise<UpstreamAnswer>, timeoutMs: number, signal: AbortSignal | undefined) {
  const started = performance.now();
  const deadline = new Deadline(timeoutMs, signal);
  try {
    const answer = await send(deadline);
    const json = parseJson(await answer.text());
    return { json, latencyMs: performance.now() - started, headers: answer.upstreamHeaders };
  } catch (error) {
    throw deadline.failure(error);
  } finally {
    deadline.dispose();
  }
}

/** A Node Readable with `text()`. Read it to the end or destroy it: until then its socket stays taken. */
export type UpstreamBody = Dispatcher.ResponseData['body'];
/** A 2xx answer's body, with its content type and every header. */
export type UpstreamAnswer = UpstreamBody & { contentType?: string; upstreamHeaders: IncomingHttpHeaders };
export type UpstreamMethod = 'GET' | 'POST' | 'DELETE';

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
export function postUpstream(url: string, headers: Record<string, string>, payload: object, deadline: Deadline): Promise<UpstreamAnswer> {
  return callUpstream('POST', url, headers, payload, deadline);
}

async function callUpstream(
  method: UpstreamMethod,
  url: string,
  headers: Record<string, string>,
  payload: object | undefined,
  deadline: Deadline,
): Promise<UpstreamAnswer> {
  // Issue 22: the trace context of the upstream call (or, without tracing, the caller's own), so
  // the provider's trace joins the caller's; every adapter's request passes here.
  const trace = upstreamTraceHeaders();
  const {
    statusCode,
    body,
    headers: answered,
  } = await request(url, {
    method,
    // request() sends no User-Agent of its own, and some providers' firewalls refuse requests without one.
    headers: trace ? { 'user-agent': USER_AGENT, ...headers, ...trace } : { 'user-agent': USER_AGENT, ...headers },
    // A multipart form goes as it is (undici sets its boundary); anything else as JSON.
    body: payload === undefined || payload instanceof FormData ? payload : JSON.stringify(payload),
    signal: deadline.signal,
    dispatcher: upstreams,
  });
  if (statusCode >= 300 && statusCode <= 399) {
    // Read and dropped, so the socket goes back to the pool.
    await body.dump().catch(() => undefined);
    // A provider failure like any other (not billed; a fallback may answer), not the caller's.
    throw new ProviderError({
      kind: 'invalid_response',
      status: 502,
      message: `upstream answered a redirect (HTTP ${statusCode}), which is not followed`,
      upstreamBody: null,
    });
  }
  const type = answered['content-type'];
  const contentType = Array.isArray(type) ? type[0] : type;
  if (statusCode < 200 || statusCode > 299) throw await httpError(statusCode, body, contentType);
  return Object.assign(body, { contentType, upstreamHeaders: answered as IncomingHttpHeaders });
}

/**
 * The adapter's own abort signal: it fires when the upstream stays silent for `ms`, and follows
 * the caller's signal. Time spent by the consumer between two stream pieces is not counted, so a
 * slow client cannot turn into an upstream timeout.
 */
export class Deadline {
  readonly signal = new CallSignal();
  private timer: NodeJS.Timeout | undefined;
  private timedOut = false;
  private readonly followCaller: (() => void) | undefined;

  constructor(
    private ms: number,
    private readonly callerSignal: AbortSignal | undefined,
  ) {
    if (callerSignal?.aborted) this.signal.abort(callerSignal.reason);
    else if (callerSignal) {
      this.followCaller = () => this.signal.abort(callerSignal.reason);
      callerSignal.addEventListener('abort', this.followCaller, { once: true });
    }
    this.arm();
  }

  async *whileReading(source: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
    for await (const bytes of source) {
      this.disarm();
      yield bytes;
      this.arm();
    }
  }

  /** The error to throw for `error`: a cancellation by the caller is rethrown as it is. */
  failure(error: unknown): unknown {
    if (this.callerSignal?.aborted) return this.callerSignal.reason;
    if (this.timedOut) {
      return new ProviderError({ kind: 'timeout', status: 504, message: `upstream did not answer within ${this.ms} ms` });
    }
    if (error instanceof ProviderError) return error;
    // undici rejects with the socket error itself: "connect ECONNREFUSED ...", "other side closed".
    const detail = (error as { message?: string } | undefined)?.message || String(error);
    return new ProviderError({ kind: 'network', status: 502, message: `upstream connection failed: ${detail}`, cause: error });
  }

  /** The call is over: no timer left, and the caller's signal no longer followed. */
  dispose(): void {
    this.disarm();
    if (this.followCaller) this.callerSignal!.removeEventListener('abort', this.followCaller);
  }

  /**
   * Where a stream read under this deadline ends (see readSse): its last event by `isLast`, after
   * which the body has STREAM_END_GRACE_MS to end before it is cut.
   */
  streamEnd(isLast: (event: SseEvent) => boolean): SseEnd {
    return {
      isLast,
      onLast: () => {
        this.ms = Math.min(this.ms, STREAM_END_GRACE_MS);
        this.arm();
      },
    };
  }

  private arm(): void {
    // Re-arming replaces the running timer: a stream's last event re-arms from inside a read, which re-arms again after it.
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timedOut = true;
      this.signal.abort();
    }, this.ms);
  }

  private disarm(): void {
    clearTimeout(this.timer);
  }
}

/** How long a stream's body may take to end after its last event before it is cut. */
export const STREAM_END_GRACE_MS = 1000;

/** An error answer as a ProviderError whose message is the upstream's own explanation where it gives one. */
async function httpError(status: number, responseBody: UpstreamBody, contentType: string | undefined): Promise<ProviderError> {
  const text = await responseBody.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Proxies in front of upstreams answer with HTML or plain text; keep it as it is.
  }
  return new ProviderError({ kind: 'http', status, message: explanationIn(body, contentType) ?? `upstream answered HTTP ${status}`, upstreamBody: body });
}

/** The longest plain-text error body taken as the message; a longer one is cut there. */
const PLAIN_MESSAGE_CHARS = 300;

/**
 * OpenAI's `{error: {message}}` and Anthropic's `{type: "error", error: {message}}`; SearXNG's
 * `{error: "..."}`; Tavily's `{detail: {error: "..."}}`; and a `text/plain` body (SearXNG's other
 * errors), but not HTML, whose markup says nothing a caller could use.
 */
function explanationIn(body: unknown, contentType: string | undefined): string | undefined {
  if (typeof body === 'string') {
    const text = body.trim();
    return /^text\/plain\b/i.test(contentType ?? '') && text !== '' ? text.slice(0, PLAIN_MESSAGE_CHARS) : undefined;
  }
  if (!isRecord(body)) return undefined;
  if (isRecord(body.error) && typeof body.error.message === 'string') return body.error.message;
  if (typeof body.error === 'string') return body.error;
  if (isRecord(body.detail) && typeof body.detail.error === 'string') return body.detail.error;
  return undefined;
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
