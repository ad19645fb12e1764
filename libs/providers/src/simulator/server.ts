/**
 * The simulated upstream (ARCHITECTURE section 8): a real HTTP server speaking the OpenAI wire
 * format, so the gateway always exercises its real HTTP adapters. Deterministic: the same request
 * gets the same text and usage; ids come from a per-server counter. Behaviour is steered by
 * `#sim` directives, documented in ./directives.ts.
 *
 * Routes: POST /v1/chat/completions (JSON or SSE), POST /v1/embeddings, GET /v1/models, which
 * want `Authorization: Bearer <anything>` and answer errors with OpenAI bodies; and POST
 * /v1/messages, the Anthropic Messages format (JSON or SSE events `message_start`, `ping`,
 * `content_block_start` / `_delta` / `_stop`, `message_delta`, `message_stop`), which wants
 * `x-api-key: <anything>` (else 401) and `anthropic-version` (else 400) and answers errors as
 * `{type: "error", error: {type, message}}`. Any model name is accepted.
 *
 * The chat model answers `Echo: <last user message without its #sim lines>`, cut to the
 * request's token cap, and reports prompt_tokens with countChatPromptTokens, the gateway's own
 * estimate. /v1/messages is the same model (see ./messages.ts): same text and counts, with
 * `cached_tokens` as `cache_read_input_tokens` (and left out of `input_tokens`), reasoning as a
 * `thinking` block, a tool call as a `tool_use` block, finish reasons as `end_turn`,
 * `max_tokens`, `tool_use`. `fail`, `fail_models`, `delay_ms`, `chunk_delay_ms` (between
 * events) and `cut_after_chunks` (counting content deltas after `message_start` and `ping`)
 * behave as on chat completions.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { chunks, completion, lastUserText, parseChatRequest, planReply } from './chat';
import { DirectiveError, failureFor, parseDirectives, type SimDirectives } from './directives';
import { embeddingsResponse, parseEmbeddingsRequest } from './embeddings';
import { errorBody, readJson, sendJson, SimError, write } from './http';
import { anthropicErrorBody, checkAnthropicHeaders, message, messageEvents, parseMessagesRequest, upToDeltas } from './messages';

export interface SimulatorOptions {
  /** 0 (the default) picks a free port. */
  port?: number;
  host?: string;
}

export interface Simulator {
  /** Base URL including the version prefix, e.g. `http://127.0.0.1:41234/v1`. */
  readonly url: string;
  readonly port: number;
  /** HTTP requests received so far, answered or not. */
  readonly requests: number;
  /** The JSON bodies of the latest requests (up to RECEIVED_KEPT), oldest first: what the gateway sent upstream. */
  readonly received: readonly unknown[];
  /** Stops listening and drops open connections, streams and delayed answers included. */
  close(): Promise<void>;
}

/** The models GET /v1/models lists; the other endpoints accept any model name. */
export const SIMULATOR_MODELS = ['sim/echo', 'sim/small-8k', 'sim/embed'] as const;
const MODELS_CREATED = 1_767_225_600; // 2026-01-01, fixed so the listing is deterministic

interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  /** Aborted when the connection closes, so pending delays stop instead of writing to nobody. */
  signal: AbortSignal;
  nextId(): number;
  /** The request's JSON body, kept in `received`. */
  body(): Promise<unknown>;
}

const RECEIVED_KEPT = 50;

const ROUTES: Record<string, (x: Exchange) => Promise<void>> = {
  'POST /v1/chat/completions': chatCompletions,
  'POST /v1/embeddings': embeddings,
  'GET /v1/models': models,
  'POST /v1/messages': messages,
};

const ANTHROPIC_PATH = '/v1/messages';
const pathOf = (req: IncomingMessage) => new URL(req.url ?? '/', 'http://simulator').pathname;

export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const { port = 0, host = '127.0.0.1' } = options;
  let requests = 0;
  let lastId = 0;
  const received: unknown[] = [];
  const body = async (req: IncomingMessage) => {
    const json = await readJson(req);
    received.push(json);
    if (received.length > RECEIVED_KEPT) received.shift();
    return json;
  };
  const server = createServer((req, res) => {
    requests++;
    const closed = new AbortController();
    res.on('close', () => closed.abort());
    handle({ req, res, signal: closed.signal, nextId: () => ++lastId, body: () => body(req) }).catch((error: unknown) => {
      if (closed.signal.aborted) return;
      if (res.headersSent) res.destroy();
      else sendJson(res, ...answerFor(error, pathOf(req) === ANTHROPIC_PATH));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}/v1`,
    port: bound,
    get requests() {
      return requests;
    },
    received,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

async function handle(x: Exchange): Promise<void> {
  const path = pathOf(x.req);
  const route = ROUTES[`${x.req.method} ${path}`];
  if (!route) throw new SimError(404, `unknown route ${x.req.method} ${path}`, null, 'unknown_url');
  if (path === ANTHROPIC_PATH) checkAnthropicHeaders(x.req.headers);
  else if (!/^Bearer\s+\S/i.test(x.req.headers.authorization ?? '')) {
    throw new SimError(401, 'missing or malformed Authorization: Bearer header', null, 'invalid_api_key');
  }
  await route(x);
}

function answerFor(error: unknown, anthropic: boolean): [number, unknown] {
  const sim =
    error instanceof SimError ? error
    : error instanceof DirectiveError ? new SimError(400, error.message, null, 'invalid_sim_directive')
    : new SimError(500, `simulator error: ${error instanceof Error ? error.message : String(error)}`);
  return [sim.status, anthropic ? anthropicErrorBody(sim) : errorBody(sim)];
}

async function chatCompletions(exchange: Exchange): Promise<void> {
  const request = parseChatRequest(await exchange.body());
  const steered = await steer(exchange, request);
  if (!steered) return;
  const { directives, text, cut } = steered;

  const n = exchange.nextId();
  const reply = planReply(request, directives, text, `call_sim_${n}`);
  const meta = { id: `chatcmpl-sim-${n}`, created: Math.floor(Date.now() / 1000), model: request.model };
  if (!request.stream) {
    sendJson(exchange.res, 200, completion(reply, meta));
    return;
  }

  const { role, output, end } = chunks(reply, meta, request.includeUsage);
  const sequence = cut === undefined ? [role, ...output, ...end] : [role, ...output.slice(0, cut)];
  const frames = sequence.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`);
  await stream(exchange, frames, directives, cut !== undefined, 'data: [DONE]\n\n');
}

/** The Anthropic rendering of chatCompletions: same directives, same reply. */
async function messages(exchange: Exchange): Promise<void> {
  const request = parseMessagesRequest(await exchange.body());
  const steered = await steer(exchange, request);
  if (!steered) return;
  const { directives, text, cut } = steered;

  const n = exchange.nextId();
  const meta = { id: `msg_sim_${n}`, model: request.model, toolUseId: `toolu_sim_${n}` };
  const reply = planReply(request, directives, text, meta.toolUseId);
  if (!request.stream) {
    sendJson(exchange.res, 200, message(reply, meta));
    return;
  }

  const { start, body, end } = messageEvents(reply, meta);
  const sequence = cut === undefined ? [...start, ...body, ...end] : [...start, ...upToDeltas(body, cut)];
  const frames = sequence.map(({ event, data }) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  await stream(exchange, frames, directives, cut !== undefined);
}

/**
 * The directives both chat formats share, before any output: wait, fail, or (non-streamed with
 * cut_after_chunks) drop the connection without an answer, in which case it returns null.
 */
async function steer(
  { req, signal }: Exchange,
  request: { messages: Parameters<typeof lastUserText>[0]; model: string; stream: boolean },
): Promise<{ directives: SimDirectives; text: string; cut: number | undefined } | null> {
  const { directives, text } = parseDirectives(lastUserText(request.messages));
  if (directives.delay_ms) await sleep(directives.delay_ms, undefined, { signal });
  failIfAsked(directives, request.model);
  const cut = directives.cut_after_chunks;
  if (cut !== undefined && !request.stream) {
    req.socket.destroy();
    return null;
  }
  return { directives, text, cut };
}

/**
 * Writes the frames of a stream, `chunk_delay_ms` apart, then the terminator; a cut stream
 * ends by dropping the socket instead.
 */
async function stream({ req, res, signal }: Exchange, frames: string[], directives: SimDirectives, cut: boolean, terminator = ''): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  for (const [i, frame] of frames.entries()) {
    if (i > 0 && directives.chunk_delay_ms) await sleep(directives.chunk_delay_ms, undefined, { signal });
    await write(res, frame);
  }
  if (cut) {
    req.socket.destroy();
    return;
  }
  if (terminator) await write(res, terminator);
  res.end();
}

async function embeddings({ res, signal, body }: Exchange): Promise<void> {
  const request = parseEmbeddingsRequest(await body());
  const { delay_ms } = request.directives;
  if (delay_ms) await sleep(delay_ms, undefined, { signal });
  failIfAsked(request.directives, request.model);
  sendJson(res, 200, embeddingsResponse(request));
}

function failIfAsked(directives: SimDirectives, model: string): void {
  const status = failureFor(directives, model);
  if (status === undefined) return;
  const which = directives.fail === undefined ? `fail_models ${model}` : 'fail';
  throw new SimError(status, `simulated failure (#sim ${which} ${status})`, null, 'sim_failure');
}

async function models({ res }: Exchange): Promise<void> {
  const data = SIMULATOR_MODELS.map((id) => ({ id, object: 'model', created: MODELS_CREATED, owned_by: 'simulator' }));
  sendJson(res, 200, { object: 'list', data });
}
