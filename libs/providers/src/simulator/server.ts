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
 * Media, moderation, rerank and search routes, each in its vendor's wire format (details in the
 * file named), all but SearXNG's wanting `Authorization: Bearer <anything>`:
 * - POST /v1/images/generations (./images.ts): real PNGs as `b64_json`, or as `url`s served by
 *   GET /v1/files/images/<id>.png (no auth) from the last IMAGES_KEPT images.
 * - POST /v1/audio/speech (./speech.ts): binary mp3, opus, flac, wav or pcm.
 * - POST /v1/audio/transcriptions and /v1/audio/translations (./transcriptions.ts):
 *   multipart/form-data in; json, verbose_json, text, srt or vtt out.
 * - POST /v1/moderations (./moderations.ts).
 * - POST /v2/rerank (./rerank.ts): Cohere v2, errors as Cohere's `{message}` bodies.
 * - POST /v1/rerank (./rerank.ts): Jina, errors as OpenAI bodies.
 * - GET /search (./search.ts): SearXNG's JSON API, which wants no key and `format=json` (else
 *   403, plain text); errors as plain text, a 400 as `{error}`.
 * - POST /search (./search.ts): Tavily, errors as `{detail: {error}}`, a missing key included.
 * - Videos (./videos.ts), jobs that take `videoJobMs`: OpenAI's POST /v1/videos, GET and
 *   DELETE /v1/videos/{id}, GET /v1/videos/{id}/content (the MP4, or `variant=thumbnail`); and a
 *   router's POST /v1/videos/generations, GET /v1/videos/generations/{id}, POST
 *   /v1/videos/generations/{id}/cancel, whose clips are served (no auth) at
 *   GET /v1/files/videos/<id>.mp4 and .jpg.
 * - Realtime (./realtime.ts): OpenAI's GA Realtime protocol over WebSocket, an upgrade of GET
 *   /v1/realtime?model=<id> (subprotocol `realtime`), wanting the key on the upgrade (else a
 *   plain HTTP 401); responses paced `realtimeDeltaMs` apart; sessions and the client events
 *   they received are kept in `realtime.sessions`.
 * The search adapters drop the `/v1` of the simulator's base URL, as Cohere's does, so both
 * search routes sit at the root. Their JSON bodies are kept in `received`; a multipart body as
 * `{model, ...fields, file: {bytes, filename}}`; SearXNG's query string as `{q, format, pageno,
 * ...other parameters}`.
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
import { systemClock, type Clock } from '@svc/platform';
import { chunks, completion, lastUserText, parseChatRequest, planReply } from './chat';
import { DirectiveError, failureFor, parseDirectives, type SimDirectives } from './directives';
import { embeddingsResponse, parseEmbeddingsRequest } from './embeddings';
import { errorBody, readJson, sendBytes, sendJson, SimError, write } from './http';
import { ImageStore, imagesResponse, parseImagesRequest, renderImage } from './images';
import { anthropicErrorBody, checkAnthropicHeaders, message, messageEvents, parseMessagesRequest, upToDeltas } from './messages';
import { moderationResponse, parseModerationRequest } from './moderations';
import { readMultipart, type MultipartForm } from './multipart';
import { DEFAULT_REALTIME_DELTA_MS, RealtimeServer, type RealtimeSessionRecord } from './realtime';
import { cohereErrorBody, cohereRerankResponse, jinaRerankResponse, parseCohereRerankRequest, parseJinaRerankRequest } from './rerank';
import {
  parseSearxngRequest,
  parseTavilyRequest,
  SEARCH_PATH,
  searxngErrorBody,
  searxngResponse,
  tavilyErrorBody,
  tavilyRequestId,
  tavilyResponse,
} from './search';
import { parseSpeechRequest, renderSpeech, SPEECH_CONTENT_TYPES } from './speech';
import { parseTranscriptionRequest, renderTranscription, transcribe, type TranscriptionTask } from './transcriptions';
import {
  cancelVideo,
  contentVariant,
  notReady,
  openAiVideoJob,
  openAiVideoObject,
  parseOpenAiVideoForm,
  parseOpenAiVideoJson,
  parseRouterVideoRequest,
  routerVideoJob,
  routerVideoObject,
  VIDEO_FILE,
  videoMedia,
  videoState,
  VideoStore,
  type VideoJob,
} from './videos';

export interface SimulatorOptions {
  /** 0 (the default) picks a free port. */
  port?: number;
  host?: string;
  /** How long a video job takes from creation to completed (./videos.ts). Default 2000 ms. */
  videoJobMs?: number;
  /** The `openai-poll-after-ms` header of GET /v1/videos/{id}. Default a tenth of videoJobMs, at least 10 ms. */
  videoPollAfterMs?: number;
  /** What video jobs read the time from, so a test can move it by hand. Default the system clock. */
  clock?: Clock;
  /** The pause between the pieces of a realtime response (./realtime.ts). Default 5 ms. */
  realtimeDeltaMs?: number;
}

export interface Simulator {
  /** Base URL including the version prefix, e.g. `http://127.0.0.1:41234/v1`. */
  readonly url: string;
  readonly port: number;
  /** HTTP requests received so far, answered or not. */
  readonly requests: number;
  /**
   * Frames of chat and messages streams handed to their connections so far, every stream
   * together: a write completes only once the socket took it, so this is how far the readers of
   * the streams pulled them, give or take the kernel's buffers.
   */
  readonly streamedFrames: number;
  /**
   * The bodies of the latest requests (up to RECEIVED_KEPT), oldest first: what the gateway sent
   * upstream. JSON as parsed; multipart/form-data as `{model, ...fields, file: {bytes, filename}}`;
   * SearXNG's query string as `{q, format, pageno, ...}`; a video content download's as
   * `{variant?}`. Polls, cancels and deletes of video jobs have no body and are not kept.
   */
  readonly received: readonly unknown[];
  /** The realtime WebSocket sessions, oldest first (the latest 50), each with the client events it received. */
  readonly realtime: { readonly sessions: readonly RealtimeSessionRecord[] };
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
  /** Counts a stream frame the connection took (Simulator.streamedFrames). */
  streamed(): void;
  /** The request's JSON body, kept in `received`. */
  body(): Promise<unknown>;
  /** The request's multipart/form-data body, kept in `received` as `{model, ...fields, file}`. */
  form(): Promise<MultipartForm>;
  /** The request's query string, one value a parameter (the last), kept in `received`. */
  query(): Record<string, string>;
  /** Images answered by URL, for GET /v1/files/images/<id>.png. */
  images: ImageStore;
  /** `http://host:port` as the client reached the simulator: the origin of image URLs. */
  origin: string;
  videos: VideoStore;
  video: { jobMs: number; pollAfterMs: number; now(): number };
}

const RECEIVED_KEPT = 50;
/** How many images answered by URL stay fetchable (least recently used dropped first). */
const IMAGES_KEPT = 200;
/** How many video jobs are remembered, both APIs together (oldest dropped first). */
const VIDEOS_KEPT = 500;
const DEFAULT_VIDEO_JOB_MS = 2000;

const ROUTES: Record<string, (x: Exchange) => Promise<void>> = {
  'POST /v1/chat/completions': chatCompletions,
  'POST /v1/embeddings': embeddings,
  'GET /v1/models': models,
  'POST /v1/messages': messages,
  'POST /v1/images/generations': imageGenerations,
  'POST /v1/audio/speech': speech,
  'POST /v1/audio/transcriptions': (x) => transcriptions(x, 'transcribe'),
  'POST /v1/audio/translations': (x) => transcriptions(x, 'translate'),
  'POST /v1/moderations': moderations,
  'POST /v2/rerank': cohereRerank,
  'POST /v1/rerank': jinaRerank,
  [`GET ${SEARCH_PATH}`]: searxngSearch,
  [`POST ${SEARCH_PATH}`]: tavilySearch,
  'POST /v1/videos': openAiCreateVideo,
  'POST /v1/videos/generations': routerCreateVideo,
};

/** The video routes with an id in their path, tried in order after ROUTES. */
const VIDEO_ROUTES: [method: string, path: RegExp, handler: (x: Exchange, id: string) => Promise<void>][] = [
  ['GET', /^\/v1\/videos\/generations\/([^/]+)$/, routerGetVideo],
  ['POST', /^\/v1\/videos\/generations\/([^/]+)\/cancel$/, routerCancelVideo],
  ['GET', /^\/v1\/videos\/([^/]+)$/, openAiGetVideo],
  ['DELETE', /^\/v1\/videos\/([^/]+)$/, openAiDeleteVideo],
  ['GET', /^\/v1\/videos\/([^/]+)\/content$/, openAiVideoContent],
];

function videoRoute(method: string | undefined, path: string): ((x: Exchange) => Promise<void>) | undefined {
  for (const [m, pattern, handler] of VIDEO_ROUTES) {
    const match = method === m ? pattern.exec(path) : null;
    if (match) return (x) => handler(x, decodedSegment(match[1]));
  }
  return undefined;
}

/** A malformed escape names no job: kept as it is, it is answered 404 like any unknown id. */
function decodedSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** Routes that want no key: SearXNG has none. */
const KEYLESS_ROUTES = new Set([`GET ${SEARCH_PATH}`]);

const ANTHROPIC_PATH = '/v1/messages';
const COHERE_PATH = '/v2/rerank';
const IMAGE_FILE = /^\/v1\/files\/images\/([0-9a-f]{64})\.png$/;
const urlOf = (req: IncomingMessage) => new URL(req.url ?? '/', 'http://simulator');
const pathOf = (req: IncomingMessage) => urlOf(req).pathname;

export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const { port = 0, host = '127.0.0.1', videoJobMs = DEFAULT_VIDEO_JOB_MS, clock = systemClock } = options;
  const video = {
    jobMs: videoJobMs,
    pollAfterMs: options.videoPollAfterMs ?? Math.max(10, Math.round(videoJobMs / 10)),
    now: () => clock.now().getTime(),
  };
  const videos = new VideoStore(VIDEOS_KEPT);
  let requests = 0;
  let streamedFrames = 0;
  let lastId = 0;
  let origin = '';
  const received: unknown[] = [];
  const images = new ImageStore(IMAGES_KEPT);
  const realtime = new RealtimeServer({ deltaMs: options.realtimeDeltaMs ?? DEFAULT_REALTIME_DELTA_MS, nextId: () => ++lastId });
  const keep = (value: unknown) => {
    received.push(value);
    if (received.length > RECEIVED_KEPT) received.shift();
  };
  const body = async (req: IncomingMessage) => {
    const json = await readJson(req);
    keep(json);
    return json;
  };
  const form = async (req: IncomingMessage) => {
    const parsed = await readMultipart(req);
    keep(receivedForm(parsed));
    return parsed;
  };
  const query = (req: IncomingMessage) => {
    const params = Object.fromEntries(urlOf(req).searchParams);
    keep(params);
    return params;
  };
  const server = createServer((req, res) => {
    requests++;
    const closed = new AbortController();
    res.on('close', () => closed.abort());
    const exchange: Exchange = {
      req,
      res,
      signal: closed.signal,
      nextId: () => ++lastId,
      streamed: () => void streamedFrames++,
      body: () => body(req),
      form: () => form(req),
      query: () => query(req),
      images,
      origin: req.headers.host ? `http://${req.headers.host}` : origin,
      videos,
      video,
    };
    handle(exchange).catch((error: unknown) => {
      if (closed.signal.aborted) return;
      if (res.headersSent) res.destroy();
      else answer(res, error, req);
    });
  });
  server.on('upgrade', (req, socket, head) => realtime.upgrade(req, socket, head));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  origin = `http://${host.includes(':') ? `[${host}]` : host}:${bound}`;
  return {
    url: `${origin}/v1`,
    port: bound,
    get requests() {
      return requests;
    },
    get streamedFrames() {
      return streamedFrames;
    },
    received,
    realtime: { sessions: realtime.sessions },
    close: () =>
      new Promise<void>((resolve, reject) => {
        realtime.close();
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

async function handle(x: Exchange): Promise<void> {
  const path = pathOf(x.req);
  const image = x.req.method === 'GET' ? IMAGE_FILE.exec(path) : null;
  if (image) return imageFile(x, image[1]);
  const clip = x.req.method === 'GET' ? VIDEO_FILE.exec(path) : null;
  if (clip) return videoFile(x, clip[1], clip[2] as 'mp4' | 'jpg');
  const key = `${x.req.method} ${path}`;
  const route = ROUTES[key] ?? videoRoute(x.req.method, path);
  if (!route) throw new SimError(404, `unknown route ${x.req.method} ${path}`, null, 'unknown_url');
  if (path === ANTHROPIC_PATH) checkAnthropicHeaders(x.req.headers);
  else if (!KEYLESS_ROUTES.has(key) && !/^Bearer\s+\S/i.test(x.req.headers.authorization ?? '')) {
    throw new SimError(401, 'missing or malformed Authorization: Bearer header', null, 'invalid_api_key');
  }
  await route(x);
}

/** The error answer in the wire format of the route's vendor: JSON, or plain text where the body is a string. */
function answer(res: ServerResponse, error: unknown, req: IncomingMessage): void {
  const sim =
    error instanceof SimError
      ? error
      : error instanceof DirectiveError
        ? new SimError(400, error.message, null, 'invalid_sim_directive')
        : new SimError(500, `simulator error: ${error instanceof Error ? error.message : String(error)}`);
  const body = errorBodyFor(req.method, pathOf(req))(sim);
  if (typeof body === 'string') sendBytes(res, sim.status, 'text/plain; charset=utf-8', body);
  else sendJson(res, sim.status, body);
}

function errorBodyFor(method: string | undefined, path: string): (error: SimError) => unknown {
  if (path === ANTHROPIC_PATH) return anthropicErrorBody;
  if (path === COHERE_PATH) return cohereErrorBody;
  if (path === SEARCH_PATH) return method === 'GET' ? searxngErrorBody : tavilyErrorBody;
  return errorBody;
}

/** A multipart body as `received` keeps it: one value per field unless sent several times, the file by size. */
function receivedForm({ fields, file }: MultipartForm): Record<string, unknown> {
  const flat = Object.fromEntries(Object.entries(fields).map(([name, values]) => [name, values.length === 1 ? values[0] : values]));
  return { model: flat.model, ...flat, file: file && { bytes: file.bytes.length, filename: file.filename } };
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
async function stream({ req, res, signal, streamed }: Exchange, frames: string[], directives: SimDirectives, cut: boolean, terminator = ''): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  for (const [i, frame] of frames.entries()) {
    if (i > 0 && directives.chunk_delay_ms) await sleep(directives.chunk_delay_ms, undefined, { signal });
    await write(res, frame);
    streamed();
  }
  if (cut) {
    req.socket.destroy();
    return;
  }
  if (terminator) await write(res, terminator);
  res.end();
}

async function embeddings(exchange: Exchange): Promise<void> {
  const request = parseEmbeddingsRequest(await exchange.body());
  await delayThenFail(exchange, request.directives, request.model);
  sendJson(exchange.res, 200, embeddingsResponse(request));
}

async function imageGenerations(exchange: Exchange): Promise<void> {
  const request = parseImagesRequest(await exchange.body());
  await delayThenFail(exchange, request.directives, request.model);
  const pngs = request.directives.empty ? [] : Array.from({ length: request.n }, (_, i) => renderImage(request, i));
  const urlOf = (png: Buffer) => `${exchange.origin}/v1/files/images/${exchange.images.put(png)}.png`;
  sendJson(exchange.res, 200, imagesResponse(request, pngs, urlOf, Math.floor(Date.now() / 1000)));
}

async function imageFile({ res, images }: Exchange, id: string): Promise<void> {
  const png = images.get(id);
  if (!png) throw new SimError(404, `image ${id} is not (or no longer) stored`, null, 'not_found');
  sendBytes(res, 200, 'image/png', png);
}

async function speech(exchange: Exchange): Promise<void> {
  const request = parseSpeechRequest(await exchange.body());
  await delayThenFail(exchange, request.directives, request.model);
  sendBytes(exchange.res, 200, SPEECH_CONTENT_TYPES[request.responseFormat], renderSpeech(request));
}

async function transcriptions(exchange: Exchange, task: TranscriptionTask): Promise<void> {
  const request = parseTranscriptionRequest(await exchange.form(), task);
  await delayThenFail(exchange, request.directives, request.model);
  const { contentType, body } = renderTranscription(request, transcribe(request));
  sendBytes(exchange.res, 200, contentType, body);
}

async function moderations(exchange: Exchange): Promise<void> {
  const request = parseModerationRequest(await exchange.body());
  await delayThenFail(exchange, request.directives, request.model);
  sendJson(exchange.res, 200, moderationResponse(request, `modr-sim-${exchange.nextId()}`));
}

async function cohereRerank(exchange: Exchange): Promise<void> {
  const request = parseCohereRerankRequest(await exchange.body());
  await delayThenFail(exchange, request.directives, request.model);
  sendJson(exchange.res, 200, cohereRerankResponse(request, `rerank-sim-${exchange.nextId()}`));
}

async function jinaRerank(exchange: Exchange): Promise<void> {
  const request = parseJinaRerankRequest(await exchange.body());
  await delayThenFail(exchange, request.directives, request.model);
  sendJson(exchange.res, 200, jinaRerankResponse(request));
}

async function searxngSearch(exchange: Exchange): Promise<void> {
  const request = parseSearxngRequest(exchange.query());
  await delayThenFailSearch(exchange, request.directives);
  sendJson(exchange.res, 200, searxngResponse(request));
}

async function tavilySearch(exchange: Exchange): Promise<void> {
  const started = performance.now();
  const request = parseTavilyRequest(await exchange.body());
  await delayThenFailSearch(exchange, request.directives);
  const seconds = Number(((performance.now() - started) / 1000).toFixed(3));
  sendJson(exchange.res, 200, tavilyResponse(request, tavilyRequestId(exchange.nextId()), seconds));
}

/** `delay_ms`, then `fail` / `fail_models`: the directives every non-chat route honours first. */
async function delayThenFail({ signal }: Exchange, directives: SimDirectives, model: string): Promise<void> {
  if (directives.delay_ms) await sleep(directives.delay_ms, undefined, { signal });
  failIfAsked(directives, model);
}

/** The same, then `fail_search`, which only the search routes honour; their requests name no model. */
async function delayThenFailSearch(exchange: Exchange, directives: SimDirectives): Promise<void> {
  await delayThenFail(exchange, directives, '');
  if (directives.fail_search !== undefined) throw simulatedFailure('fail_search', directives.fail_search);
}

function failIfAsked(directives: SimDirectives, model: string): void {
  const status = failureFor(directives, model);
  if (status === undefined) return;
  throw simulatedFailure(typeof directives.fail === 'number' ? 'fail' : `fail_models ${model}`, status);
}

const simulatedFailure = (directive: string, status: number) => new SimError(status, `simulated failure (#sim ${directive} ${status})`, null, 'sim_failure');

/** OpenAI's create: JSON, or multipart/form-data with the reference image as a file. */
async function openAiCreateVideo(exchange: Exchange): Promise<void> {
  const multipart = /^multipart\/form-data\b/i.test(exchange.req.headers['content-type'] ?? '');
  const request = multipart ? parseOpenAiVideoForm(await exchange.form()) : parseOpenAiVideoJson(await exchange.body());
  await delayThenFail(exchange, request.directives, request.model);
  const job = openAiVideoJob(request, `video_sim_${exchange.nextId()}`, exchange.video.now());
  exchange.videos.add(job);
  sendOpenAiVideo(exchange, job);
}

async function openAiGetVideo(exchange: Exchange, id: string): Promise<void> {
  sendOpenAiVideo(exchange, exchange.videos.get(id, 'openai'));
}

function sendOpenAiVideo({ res, video }: Exchange, job: VideoJob): void {
  const state = videoState(job, video.jobMs, video.now());
  sendJson(res, 200, openAiVideoObject(job, state), { 'openai-poll-after-ms': String(video.pollAfterMs) });
}

/** OpenAI's delete, which also stops a job still running (see ./videos.ts). */
async function openAiDeleteVideo({ res, videos, video }: Exchange, id: string): Promise<void> {
  const job = videos.get(id, 'openai');
  cancelVideo(job, video.jobMs, video.now());
  videos.delete(id);
  sendJson(res, 200, { id, object: 'video.deleted', deleted: true });
}

async function openAiVideoContent(exchange: Exchange, id: string): Promise<void> {
  const variant = contentVariant(exchange.query());
  const job = exchange.videos.get(id, 'openai');
  const state = videoState(job, exchange.video.jobMs, exchange.video.now());
  if (state.status !== 'completed') throw notReady(job, state);
  const media = videoMedia(job);
  if (variant === 'video') sendBytes(exchange.res, 200, 'video/mp4', media.mp4);
  else sendBytes(exchange.res, 200, 'image/jpeg', media.jpeg);
}

async function routerCreateVideo(exchange: Exchange): Promise<void> {
  const request = parseRouterVideoRequest(await exchange.body());
  await delayThenFail(exchange, request.directives, request.model);
  const job = routerVideoJob(request, `vgen_sim_${exchange.nextId()}`, exchange.video.now());
  exchange.videos.add(job);
  sendRouterVideo(exchange, job);
}

async function routerGetVideo(exchange: Exchange, id: string): Promise<void> {
  sendRouterVideo(exchange, exchange.videos.get(id, 'router'));
}

async function routerCancelVideo(exchange: Exchange, id: string): Promise<void> {
  const job = exchange.videos.get(id, 'router');
  cancelVideo(job, exchange.video.jobMs, exchange.video.now());
  sendRouterVideo(exchange, job);
}

function sendRouterVideo({ res, video, origin }: Exchange, job: VideoJob): void {
  sendJson(res, 200, routerVideoObject(job, videoState(job, video.jobMs, video.now()), origin));
}

/** A router clip's `video_url` / `thumbnail_url`, keyless as a signed link; 404 until completed. */
async function videoFile({ res, videos, video }: Exchange, id: string, extension: 'mp4' | 'jpg'): Promise<void> {
  // OpenAI's clips are downloaded with the key, through GET /v1/videos/{id}/content.
  const job = videos.get(id, 'router');
  const state = videoState(job, video.jobMs, video.now());
  if (state.status !== 'completed') throw notReady(job, state);
  const media = videoMedia(job);
  if (extension === 'mp4') sendBytes(res, 200, 'video/mp4', media.mp4);
  else sendBytes(res, 200, 'image/jpeg', media.jpeg);
}

async function models({ res }: Exchange): Promise<void> {
  const data = SIMULATOR_MODELS.map((id) => ({ id, object: 'model', created: MODELS_CREATED, owned_by: 'simulator' }));
  sendJson(res, 200, { object: 'list', data });
}
