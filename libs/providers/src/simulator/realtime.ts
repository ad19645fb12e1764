/**
 * The simulated realtime model: OpenAI's GA Realtime protocol over WebSocket (WIRE-FORMATS 3,
 * spec 4.16), with event and field names as in openai-node's `resources/realtime/realtime.ts`.
 *
 * Handshake (WIRE-FORMATS 3.1): `GET /v1/realtime?model=<id>` with `Upgrade: websocket`. The key
 * is `Authorization: Bearer <anything>`, as on the simulator's HTTP routes, or the browser's
 * subprotocol `openai-insecure-api-key.<key>`; without one the answer is a plain HTTP 401 with an
 * OpenAI error body and no upgrade ("authenticate on the HTTP upgrade and reply with a plain HTTP
 * 401 ... before upgrading"). Another path is a 404, no `model` a 400. The subprotocol `realtime`
 * is selected when offered (never the key-carrying one). `?call_id=` and `?intent=transcription`
 * sessions are not simulated (400).
 *
 * Every server event carries `event_id` (`event_sim_<n>`); ids come from the simulator's counter
 * (`sess_sim_`, `conv_sim_`, `item_sim_`, `resp_sim_`). Client events (WIRE-FORMATS 3.2):
 * - `session.update`: `session.type` must be `realtime`; the rest is merged into the session
 *   (`audio.input` and `audio.output` field by field, other fields replaced; `model`, `id`,
 *   `object`, `expires_at` stay) and answered by `session.updated`. Only `audio/pcm` at 24 kHz is
 *   rendered: `audio/pcmu` / `audio/pcma` are refused with `unsupported_value`.
 * - `conversation.item.create`: `conversation.item.added`, then `conversation.item.done`, the
 *   item given an `id` (a client id is kept), `object: "realtime.item"`, `status: "completed"`;
 *   `previous_item_id` (`root` or an item id) places it. Audio sent inside an item is not echoed.
 * - `input_audio_buffer.append` (no ack), `.commit` (`input_audio_buffer.committed {item_id,
 *   previous_item_id}`, then the user `input_audio` item added and done, then, when
 *   `session.audio.input.transcription.model` is set,
 *   `conversation.item.input_audio_transcription.completed`), `.clear` (`.cleared`). Committing
 *   an empty buffer is an error event (`input_audio_buffer_commit_empty`).
 * - `conversation.item.retrieve` / `.delete` / `.truncate` answer `.retrieved` / `.deleted` /
 *   `.truncated`; `output_audio_buffer.clear` is WebRTC/SIP only, an error here.
 * - `response.create`, `response.cancel`: below.
 * Malformed JSON, a binary frame, an unknown `type` or an invalid event is answered by
 * `{type: "error", event_id, error: {type: "invalid_request_error", code, message, param,
 * event_id}}` (`error.event_id` echoes the client's) and the session stays open, as openai-node
 * documents ("most errors are recoverable").
 *
 * What the model hears in audio (a committed buffer, or an `input_audio` part's `audio`) is what
 * the simulated transcription model (./transcriptions.ts) would transcribe from it: the
 * `#sim-text` lines in the bytes, else hashed words, 2.5 a second; `#sim` lines in the bytes
 * are directives.
 *
 * A response (`response.create`, with `response.{instructions, output_modalities,
 * max_output_tokens, audio, metadata, conversation: "none", input}` overriding the session for
 * it) answers the last user message of its context with the chat model's reply (./chat.ts
 * planReply: `Echo: <text without #sim lines>`, or `completion_tokens` / `malformed_json`),
 * cut into word-sized pieces. Audio output (WIRE-FORMATS 3.3, GA names):
 *   response.created (in_progress) -> response.output_item.added -> conversation.item.added ->
 *   response.content_part.added -> per piece: response.output_audio_transcript.delta and
 *   response.output_audio.delta -> response.output_audio.done ->
 *   response.output_audio_transcript.done -> response.content_part.done ->
 *   response.output_item.done -> conversation.item.done -> response.done.
 * Text output (`output_modalities: ["text"]`) has response.output_text.delta / .done instead of
 * the audio and transcript events. The conversation.item.* pair is left out when the response
 * is out of band (`conversation: "none"`), whose item does not join the conversation.
 * Deltas are `realtimeDeltaMs` apart (a simulator option, 5 ms by default).
 *
 * Audio is real PCM16 mono at 24 kHz, base64: the 440 Hz tone of ./audio-formats.ts, lasting
 * 50 ms per character (code point) of the transcript it speaks.
 *
 * Token rules (all deterministic), reported as `response.usage` on `response.done`:
 * - input text: o200k tokens of the instructions plus of every context item's text (`text` of
 *   text parts, `transcript` of audio parts sent without audio, a function call's name and
 *   arguments, a function output); an assistant audio item the simulator spoke counts as audio.
 * - input audio: 1 token per 100 ms of audio in the context (4800 bytes of 24 kHz PCM16),
 *   rounded up per item, committed user audio and earlier assistant audio alike.
 * - cached (a prompt-cache imitation): what the previous response of the session had as input,
 *   text and audio each capped by this response's own (a growing conversation re-reads its
 *   prefix). The first response has none.
 * - output text: o200k tokens of the transcript (or text) sent; output audio: 1 token per 50 ms
 *   of audio sent, that is one per character of the transcript.
 * `max_output_tokens` (the response's, else the session's; an integer or "inf") caps output text
 * plus output audio tokens: the reply is cut at the last piece that fits and ends `incomplete`,
 * `status_details: {type: "incomplete", reason: "max_output_tokens"}`. Input transcription
 * usage: `{type: "tokens", input_tokens, output_tokens, total_tokens, input_token_details:
 * {text_tokens, audio_tokens}}`, audio by the same 100 ms rule, text the transcription prompt's,
 * output the transcript's; a whisper model is billed `{type: "duration", seconds}` (whole
 * seconds, rounded up), as on /v1/audio/transcriptions.
 *
 * Directives (./directives.ts) in the last user message of the context:
 * - `fail: true` (or a status, or `fail_models` naming the session's model): response.created,
 *   then response.done `failed` with `status_details.error {type, code: "sim_failure"}`, no
 *   output, usage with the input and 0 output tokens.
 * - `stall: true`: response.created, the item and part added, the first STALL_PIECES pieces'
 *   deltas, then nothing until response.cancel or the socket closes.
 * - `delay_ms`: a wait after response.created, before the first delta; `chunk_delay_ms`
 *   replaces realtimeDeltaMs; `cut_after_chunks: n`: the socket is dropped (no close frame)
 *   after n pieces' deltas.
 * `response.cancel` stops the running response at its next piece: the done events follow with
 * what was sent (item `incomplete`), and response.done `cancelled`, `status_details: {type:
 * "cancelled", reason: "client_cancelled"}`, usage so far. With no response running it is an
 * error event (`response_cancel_not_active`); a second response.create while one runs is too
 * (`conversation_already_has_active_response`). An invalid directive is an error event
 * (`invalid_sim_directive`) and no response.
 */
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { isRecord } from '../json';
import { countTextTokens, truncateToTokens } from '../tokens';
import { pcm, tone, wav } from './audio-formats';
import { pieces, planReply, type ChatRequest } from './chat';
import { DirectiveError, failureFor, parseDirectives, type SimDirectives } from './directives';
import { errorBody, SimError } from './http';
import { isWhisper, simLinesOf, transcribe } from './transcriptions';

type Wire = Record<string, unknown>;

export const REALTIME_PATH = '/v1/realtime';
export const REALTIME_SUBPROTOCOL = 'realtime';
/** The GA browser's way to send the key (WIRE-FORMATS 3.1). */
const INSECURE_KEY_PREFIX = 'openai-insecure-api-key.';

const SAMPLE_RATE = 24_000;
/** 100 ms of 24 kHz PCM16: one input audio token. */
export const INPUT_AUDIO_SAMPLES_PER_TOKEN = 2400;
/** 50 ms of 24 kHz audio: one output audio token. */
export const OUTPUT_AUDIO_SAMPLES_PER_TOKEN = 1200;
/** The spoken reply lasts 50 ms per character, so one output audio token per character. */
export const OUTPUT_AUDIO_SAMPLES_PER_CHAR = 1200;
/** How many pieces a stalled response sends before going silent. */
export const STALL_PIECES = 2;
export const DEFAULT_REALTIME_DELTA_MS = 5;
export const DEFAULT_INSTRUCTIONS = 'You are the simulated realtime model: you answer with an echo of the user.';
/** GA sessions last up to 60 minutes (WIRE-FORMATS 3.1). */
const SESSION_SECONDS = 3600;
/** openai-node: `max_output_tokens` is 1 to 4096, or "inf". */
const MAX_OUTPUT_TOKENS = 4096;
/** WIRE-FORMATS 3.2: at most 15 MiB of audio per append event. */
const MAX_APPEND_BYTES = 15 * 1024 * 1024;
const SESSIONS_KEPT = 50;
const EVENTS_KEPT = 1000;

/** One WebSocket session, as `Simulator.realtime.sessions` lists it: what reached the upstream. */
export interface RealtimeSessionRecord {
  /** The `session.id` it was given (`sess_sim_<n>`). */
  readonly id: string;
  /** The `model` of the URL. */
  readonly model: string;
  /** The key of the `Authorization` header, or of the `openai-insecure-api-key.` subprotocol. */
  readonly key: string;
  /** The subprotocol selected, or null. */
  readonly protocol: string | null;
  /**
   * The client events received, oldest first (up to EVENTS_KEPT): JSON as parsed, a text frame
   * that is not JSON as its text, a binary frame as `{binary: <bytes>}`.
   */
  readonly received: unknown[];
  /** False once the socket has closed. */
  open: boolean;
}

export interface RealtimeOptions {
  /** The pause between response pieces. */
  deltaMs: number;
  /** The simulator's id counter. */
  nextId(): number;
}

/** A client mistake, answered by an `error` event; the session stays open. */
class ClientEventError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

/** The realtime endpoint of one simulator: attach `upgrade` to its HTTP server's `upgrade` event. */
export class RealtimeServer {
  readonly sessions: RealtimeSessionRecord[] = [];
  private readonly wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) => (protocols.has(REALTIME_SUBPROTOCOL) ? REALTIME_SUBPROTOCOL : false),
  });

  constructor(private readonly options: RealtimeOptions) {}

  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    // A client that goes away mid-handshake must not crash the simulator.
    socket.on('error', () => undefined);
    const url = new URL(req.url ?? '/', 'http://simulator');
    if (url.pathname !== REALTIME_PATH) return refuse(socket, new SimError(404, `unknown route GET ${url.pathname}`, null, 'unknown_url'));
    const key = keyOf(req);
    if (key === null) {
      return refuse(socket, new SimError(401, 'missing or malformed Authorization: Bearer header', null, 'invalid_api_key'));
    }
    if (url.searchParams.has('call_id') || url.searchParams.has('intent')) {
      return refuse(socket, new SimError(400, 'the simulator speaks model sessions only (?model=), not call_id or intent', null, 'unsupported_value'));
    }
    const model = url.searchParams.get('model');
    if (!model) return refuse(socket, new SimError(400, 'the model query parameter is required', 'model', 'missing_required_parameter'));
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const record: RealtimeSessionRecord = {
        id: `sess_sim_${this.options.nextId()}`,
        model,
        key,
        protocol: ws.protocol || null,
        received: [],
        open: true,
      };
      this.sessions.push(record);
      if (this.sessions.length > SESSIONS_KEPT) this.sessions.shift();
      new Connection(ws, record, this.options).start();
    });
  }

  /** Drops every open socket at once: the simulator is closing. */
  close(): void {
    for (const ws of this.wss.clients) ws.terminate();
    this.wss.close();
  }
}

function keyOf(req: IncomingMessage): string | null {
  const bearer = /^Bearer\s+(\S+)/i.exec(req.headers.authorization ?? '');
  if (bearer) return bearer[1];
  const offered = (req.headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim());
  const insecure = offered.find((p) => p.startsWith(INSECURE_KEY_PREFIX) && p.length > INSECURE_KEY_PREFIX.length);
  return insecure ? insecure.slice(INSECURE_KEY_PREFIX.length) : null;
}

/** A plain HTTP answer instead of the upgrade, then the socket closed. */
function refuse(socket: Duplex, error: SimError): void {
  const body = JSON.stringify(errorBody(error));
  const head = [
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? ''}`,
    'Connection: close',
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
  ];
  socket.once('finish', () => socket.destroy());
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
}

/** A conversation item and what the model reads from it. */
interface Entry {
  /** As the wire shows it: ids set, audio data left out. */
  item: Wire;
  textTokens: number;
  /** Audio in the item, in 24 kHz samples. */
  audioSamples: number;
  /** What the model takes from a user message: its text parts and what it hears in its audio. */
  heard: string;
}

interface Usage {
  inputText: number;
  inputAudio: number;
  cachedText: number;
  cachedAudio: number;
  outputText: number;
  outputAudio: number;
}

/** A response as planned when response.create arrives: everything but the timing. */
interface Plan {
  id: string;
  audio: boolean;
  maxOutputTokens: number | 'inf';
  toConversation: boolean;
  output: Wire;
  metadata: unknown;
  directives: SimDirectives;
  failStatus: number | undefined;
  /** The reply after the output cap. */
  text: string;
  incomplete: boolean;
  usage: Usage;
}

interface Running {
  id: string;
  cancel: AbortController;
}

const inputAudioTokens = (samples: number) => Math.ceil(samples / INPUT_AUDIO_SAMPLES_PER_TOKEN);
const charCount = (text: string) => [...text].length;

class Connection {
  private readonly closed = new AbortController();
  private readonly session: Wire;
  private readonly conversationId: string;
  private items: Entry[] = [];
  private buffer: Buffer[] = [];
  private running: Running | null = null;
  /** The input of the previous response: what the imitated prompt cache holds. */
  private cache: { text: number; audio: number } | null = null;

  constructor(
    private readonly ws: WebSocket,
    private readonly record: RealtimeSessionRecord,
    private readonly options: RealtimeOptions,
  ) {
    this.conversationId = `conv_sim_${options.nextId()}`;
    this.session = {
      type: 'realtime',
      object: 'realtime.session',
      id: record.id,
      model: record.model,
      output_modalities: ['audio'],
      instructions: DEFAULT_INSTRUCTIONS,
      tools: [],
      tool_choice: 'auto',
      max_output_tokens: 'inf',
      tracing: null,
      truncation: 'auto',
      prompt: null,
      include: null,
      expires_at: Math.floor(Date.now() / 1000) + SESSION_SECONDS,
      audio: {
        input: { format: { type: 'audio/pcm', rate: SAMPLE_RATE }, transcription: null, noise_reduction: null, turn_detection: null },
        output: { format: { type: 'audio/pcm', rate: SAMPLE_RATE }, voice: 'alloy', speed: 1 },
      },
    };
  }

  start(): void {
    this.ws.on('error', () => undefined);
    this.ws.on('close', () => {
      this.record.open = false;
      this.closed.abort();
    });
    this.ws.on('message', (data, isBinary) => this.receive(data, isBinary));
    this.send({ type: 'session.created', session: this.session });
  }

  private send(event: Wire): void {
    if (this.ws.readyState !== this.ws.OPEN) return;
    const { type, ...rest } = event;
    this.ws.send(JSON.stringify({ type, event_id: `event_sim_${this.options.nextId()}`, ...rest }));
  }

  private fail(error: ClientEventError, clientEventId: unknown): void {
    const event_id = typeof clientEventId === 'string' ? clientEventId : null;
    this.send({ type: 'error', error: { type: 'invalid_request_error', code: error.code, message: error.message, param: error.param, event_id } });
  }

  private keep(event: unknown): void {
    this.record.received.push(event);
    if (this.record.received.length > EVENTS_KEPT) this.record.received.shift();
  }

  private receive(data: RawData, isBinary: boolean): void {
    const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    if (isBinary) {
      this.keep({ binary: bytes.length });
      return this.fail(new ClientEventError('invalid_json', 'binary frames are not events: send JSON text frames'), null);
    }
    const text = bytes.toString('utf8');
    let event: unknown;
    try {
      event = JSON.parse(text);
    } catch {
      this.keep(text);
      return this.fail(new ClientEventError('invalid_json', 'the event is not valid JSON'), null);
    }
    this.keep(event);
    const eventId = isRecord(event) ? event.event_id : undefined;
    try {
      if (!isRecord(event)) throw new ClientEventError('invalid_json', 'an event must be a JSON object');
      this.dispatch(event);
    } catch (error) {
      if (error instanceof ClientEventError) return this.fail(error, eventId);
      if (error instanceof DirectiveError) return this.fail(new ClientEventError('invalid_sim_directive', error.message), eventId);
      throw error;
    }
  }

  private dispatch(event: Wire): void {
    switch (event.type) {
      case 'session.update':
        return this.updateSession(event);
      case 'conversation.item.create':
        return this.createItem(event);
      case 'conversation.item.retrieve':
        return this.send({ type: 'conversation.item.retrieved', item: this.entry(event.item_id).item });
      case 'conversation.item.delete':
        return this.deleteItem(event);
      case 'conversation.item.truncate':
        return this.truncateItem(event);
      case 'input_audio_buffer.append':
        return this.append(event);
      case 'input_audio_buffer.commit':
        return this.commit();
      case 'input_audio_buffer.clear':
        this.buffer = [];
        return this.send({ type: 'input_audio_buffer.cleared' });
      case 'output_audio_buffer.clear':
        throw new ClientEventError('unsupported_event', 'output_audio_buffer.clear is for WebRTC and SIP connections only', 'type');
      case 'response.create':
        return this.createResponse(event);
      case 'response.cancel':
        return this.cancelResponse(event);
      case undefined:
        throw new ClientEventError('missing_required_parameter', "Missing required parameter: 'type'.", 'type');
      default:
        throw new ClientEventError('invalid_value', `Invalid value: ${JSON.stringify(event.type)}: not a client event type.`, 'type');
    }
  }

  private updateSession(event: Wire): void {
    const update = event.session;
    if (!isRecord(update)) throw new ClientEventError('missing_required_parameter', "Missing required parameter: 'session'.", 'session');
    if (update.type !== 'realtime') {
      throw new ClientEventError('invalid_value', "session.type must be 'realtime' (the simulator has no transcription sessions)", 'session.type');
    }
    checkConfig(update, 'session');
    const { type: _type, id: _id, object: _object, model: _model, expires_at: _expires, audio, ...rest } = update;
    Object.assign(this.session, rest);
    if (isRecord(audio)) {
      const current = this.session.audio as { input: Wire; output: Wire };
      if (isRecord(audio.input)) current.input = { ...current.input, ...audio.input };
      if (isRecord(audio.output)) current.output = { ...current.output, ...audio.output };
    }
    this.send({ type: 'session.updated', session: this.session });
  }

  private createItem(event: Wire): void {
    const entry = this.entryOf(event.item, 'item', true);
    const at = this.insertAt(event.previous_item_id);
    this.items.splice(at, 0, entry);
    const previous_item_id = at > 0 ? (this.items[at - 1].item.id as string) : null;
    this.send({ type: 'conversation.item.added', previous_item_id, item: entry.item });
    this.send({ type: 'conversation.item.done', previous_item_id, item: entry.item });
  }

  /** Where an item goes: after `previous_item_id`, at the start for `root`, else at the end. */
  private insertAt(previous: unknown): number {
    if (previous === undefined || previous === null) return this.items.length;
    if (previous === 'root') return 0;
    const index = this.items.findIndex((e) => e.item.id === previous);
    if (index < 0) throw new ClientEventError('item_not_found', `previous_item_id ${JSON.stringify(previous)} is not in the conversation`, 'previous_item_id');
    return index + 1;
  }

  private entry(id: unknown): Entry {
    const entry = this.items.find((e) => e.item.id === id);
    if (!entry) throw new ClientEventError('item_not_found', `item ${JSON.stringify(id)} is not in the conversation`, 'item_id');
    return entry;
  }

  private deleteItem(event: Wire): void {
    const entry = this.entry(event.item_id);
    this.items = this.items.filter((e) => e !== entry);
    this.send({ type: 'conversation.item.deleted', item_id: entry.item.id });
  }

  /** The client stopped playing an assistant's audio there: the rest of it, and its transcript, are gone. */
  private truncateItem(event: Wire): void {
    const entry = this.entry(event.item_id);
    const { content_index, audio_end_ms } = event;
    const content = entry.item.content;
    const part = Array.isArray(content) && Number.isInteger(content_index) ? content[content_index as number] : undefined;
    if (entry.item.role !== 'assistant' || !isRecord(part) || part.type !== 'output_audio') {
      throw new ClientEventError('invalid_value', 'only an assistant output_audio part can be truncated', 'content_index');
    }
    const ms = entry.audioSamples / (SAMPLE_RATE / 1000);
    if (!Number.isInteger(audio_end_ms) || (audio_end_ms as number) < 0 || (audio_end_ms as number) > ms) {
      throw new ClientEventError('invalid_value', `audio_end_ms must be a whole number of ms from 0 to ${Math.floor(ms)}`, 'audio_end_ms');
    }
    entry.audioSamples = Math.round(((audio_end_ms as number) * SAMPLE_RATE) / 1000);
    part.transcript = '';
    this.send({ type: 'conversation.item.truncated', item_id: entry.item.id, content_index, audio_end_ms });
  }

  private append(event: Wire): void {
    if (typeof event.audio !== 'string') throw new ClientEventError('missing_required_parameter', "Missing required parameter: 'audio' (base64).", 'audio');
    const bytes = Buffer.from(event.audio, 'base64');
    if (bytes.length > MAX_APPEND_BYTES) throw new ClientEventError('invalid_value', 'at most 15 MiB of audio per append event', 'audio');
    this.buffer.push(bytes);
  }

  private commit(): void {
    const bytes = Buffer.concat(this.buffer);
    if (bytes.length === 0) {
      throw new ClientEventError('input_audio_buffer_commit_empty', 'Error committing input audio buffer: the buffer is empty.');
    }
    this.buffer = [];
    const entry = this.entryOf({ type: 'message', role: 'user', content: [{ type: 'input_audio', audio: bytes.toString('base64') }] }, 'item', false);
    const previous_item_id = (this.items.at(-1)?.item.id as string | undefined) ?? null;
    this.items.push(entry);
    const item_id = entry.item.id;
    this.send({ type: 'input_audio_buffer.committed', item_id, previous_item_id });
    this.send({ type: 'conversation.item.added', previous_item_id, item: entry.item });
    this.send({ type: 'conversation.item.done', previous_item_id, item: entry.item });

    const transcription = (this.session.audio as { input: Wire }).input.transcription;
    if (!isRecord(transcription) || typeof transcription.model !== 'string') return;
    const { transcript } = hear(bytes, transcription);
    ((entry.item.content as Wire[])[0] as Wire).transcript = transcript;
    const audio = inputAudioTokens(bytes.length / 2);
    const text = countTextTokens(typeof transcription.prompt === 'string' ? transcription.prompt : '');
    const output = countTextTokens(transcript);
    const usage = isWhisper(transcription.model)
      ? { type: 'duration', seconds: Math.ceil(bytes.length / 2 / SAMPLE_RATE) }
      : {
          type: 'tokens',
          input_tokens: audio + text,
          output_tokens: output,
          total_tokens: audio + text + output,
          input_token_details: { text_tokens: text, audio_tokens: audio },
        };
    this.send({ type: 'conversation.item.input_audio_transcription.completed', item_id, content_index: 0, transcript, usage });
  }

  /**
   * A conversation item as sent by the client, checked, with its id (a new one unless the
   * client named one) and its token counts; audio data is counted and heard, then left out.
   */
  private entryOf(value: unknown, param: string, clientId: boolean): Entry {
    if (!isRecord(value)) throw new ClientEventError('missing_required_parameter', `Missing required parameter: '${param}'.`, param);
    const id = clientId && typeof value.id === 'string' && value.id !== '' ? value.id : `item_sim_${this.options.nextId()}`;
    if (this.items.some((e) => e.item.id === id))
      throw new ClientEventError('invalid_value', `an item with id ${JSON.stringify(id)} already exists`, `${param}.id`);
    const item: Wire = { ...value, id, object: 'realtime.item', status: 'completed' };
    let textTokens = 0;
    let audioSamples = 0;
    const heard: string[] = [];
    const countText = (v: unknown) => (typeof v === 'string' ? countTextTokens(v) : 0);
    switch (value.type) {
      case 'message': {
        const partTypes = MESSAGE_PARTS[value.role as string];
        if (!partTypes) throw new ClientEventError('invalid_value', 'a message role must be user, assistant or system', `${param}.role`);
        if (!Array.isArray(value.content))
          throw new ClientEventError('missing_required_parameter', `Missing required parameter: '${param}.content'.`, `${param}.content`);
        item.content = value.content.map((part, i) => {
          const where = `${param}.content[${i}]`;
          if (!isRecord(part) || !partTypes.includes(part.type as string)) {
            throw new ClientEventError('invalid_value', `${where}.type must be one of ${partTypes.join(', ')}`, `${where}.type`);
          }
          const { audio, ...shown } = part;
          if (typeof audio === 'string') {
            const bytes = Buffer.from(audio, 'base64');
            audioSamples += bytes.length / 2;
            const { transcript, simLines } = hear(bytes, null);
            heard.push(...simLines, transcript);
            return { ...shown, transcript: typeof part.transcript === 'string' ? part.transcript : null };
          }
          const text = typeof part.text === 'string' ? part.text : typeof part.transcript === 'string' ? part.transcript : '';
          textTokens += countText(text);
          heard.push(text);
          return shown;
        });
        break;
      }
      case 'function_call':
        if (typeof value.name !== 'string' || typeof value.call_id !== 'string') {
          throw new ClientEventError('missing_required_parameter', 'a function_call item needs call_id and name', `${param}.call_id`);
        }
        textTokens = countText(value.name) + countText(value.arguments);
        break;
      case 'function_call_output':
        if (typeof value.call_id !== 'string' || typeof value.output !== 'string') {
          throw new ClientEventError('missing_required_parameter', 'a function_call_output item needs call_id and output', `${param}.call_id`);
        }
        textTokens = countText(value.output);
        break;
      default:
        throw new ClientEventError('invalid_value', `${param}.type must be message, function_call or function_call_output`, `${param}.type`);
    }
    return { item, textTokens, audioSamples, heard: heard.filter(Boolean).join('\n') };
  }

  private createResponse(event: Wire): void {
    if (this.running) {
      throw new ClientEventError('conversation_already_has_active_response', `Conversation already has an active response in progress: ${this.running.id}.`);
    }
    const plan = this.plan(event.response === undefined ? {} : event.response);
    const running: Running = { id: plan.id, cancel: new AbortController() };
    this.running = running;
    this.respond(plan, running)
      .catch(() => this.ws.terminate())
      .finally(() => {
        if (this.running === running) this.running = null;
      });
  }

  private cancelResponse(event: Wire): void {
    const running = this.running;
    if (!running || (typeof event.response_id === 'string' && event.response_id !== running.id)) {
      throw new ClientEventError(
        'response_cancel_not_active',
        'Cancellation failed: no active response found.',
        typeof event.response_id === 'string' ? 'response_id' : null,
      );
    }
    running.cancel.abort();
  }

  private plan(overrides: unknown): Plan {
    if (!isRecord(overrides)) throw new ClientEventError('invalid_value', 'response must be an object', 'response');
    checkConfig(overrides, 'response');
    if (overrides.conversation !== undefined && overrides.conversation !== 'auto' && overrides.conversation !== 'none') {
      throw new ClientEventError('invalid_value', "response.conversation must be 'auto' or 'none'", 'response.conversation');
    }
    if (overrides.input !== undefined && !Array.isArray(overrides.input))
      throw new ClientEventError('invalid_value', 'response.input must be an array of items', 'response.input');
    // Out of band (`input` given): a new context of those items alone, which never joins the conversation.
    const context = Array.isArray(overrides.input) ? overrides.input.map((item, i) => this.entryOf(item, `response.input[${i}]`, false)) : this.items;
    const session = this.session as { output_modalities: string[]; instructions: string; max_output_tokens: number | 'inf'; audio: { output: Wire } };
    const modalities = (overrides.output_modalities as string[] | undefined) ?? session.output_modalities;
    const instructions = typeof overrides.instructions === 'string' ? overrides.instructions : session.instructions;
    const maxOutputTokens = (overrides.max_output_tokens as number | 'inf' | undefined) ?? session.max_output_tokens;
    const audioOutput =
      isRecord(overrides.audio) && isRecord(overrides.audio.output) ? { ...session.audio.output, ...overrides.audio.output } : session.audio.output;

    const lastUser = context.findLast((e) => e.item.type === 'message' && e.item.role === 'user');
    const { directives, text: echo } = parseDirectives(lastUser?.heard ?? '');
    const request: ChatRequest = {
      model: this.record.model,
      messages: [{ role: 'user', content: echo }],
      stream: true,
      includeUsage: false,
      maxTokens: undefined,
      stop: [],
      responseFormat: null,
    };
    // The realtime model speaks text only: a tool call directive is not simulated here.
    const reply = planReply(request, { ...directives, tool_call: undefined, reasoning_tokens: undefined }, echo, '').content ?? '';
    const audio = modalities[0] === 'audio';
    const text = maxOutputTokens === 'inf' ? reply : audio ? fitSpoken(reply, maxOutputTokens) : truncateToTokens(reply, maxOutputTokens);

    const inputText = countTextTokens(instructions) + context.reduce((sum, e) => sum + e.textTokens, 0);
    const inputAudio = context.reduce((sum, e) => sum + inputAudioTokens(e.audioSamples), 0);
    const usage: Usage = {
      inputText,
      inputAudio,
      cachedText: Math.min(this.cache?.text ?? 0, inputText),
      cachedAudio: Math.min(this.cache?.audio ?? 0, inputAudio),
      outputText: 0,
      outputAudio: 0,
    };
    const failStatus = directives.fail === true ? 500 : failureFor(directives, this.record.model);
    return {
      id: `resp_sim_${this.options.nextId()}`,
      audio,
      maxOutputTokens,
      toConversation: overrides.conversation !== 'none',
      output: { format: audioOutput.format, voice: audioOutput.voice },
      metadata: overrides.metadata ?? null,
      directives,
      failStatus,
      text,
      incomplete: text !== reply,
      usage,
    };
  }

  private response(plan: Plan, status: string, statusDetails: unknown, output: Wire[], usage: Usage | null): Wire {
    return {
      id: plan.id,
      object: 'realtime.response',
      status,
      status_details: statusDetails,
      output,
      conversation_id: plan.toConversation ? this.conversationId : null,
      output_modalities: [plan.audio ? 'audio' : 'text'],
      max_output_tokens: plan.maxOutputTokens,
      audio: { output: plan.output },
      usage: usage && usageWire(usage),
      metadata: plan.metadata,
    };
  }

  private async respond(plan: Plan, running: Running): Promise<void> {
    const signal = AbortSignal.any([this.closed.signal, running.cancel.signal]);
    const { directives } = plan;
    const usage = { ...plan.usage };
    this.send({ type: 'response.created', response: this.response(plan, 'in_progress', null, [], null) });
    // Every response that starts fills the imitated prompt cache with its input.
    this.cache = { text: usage.inputText, audio: usage.inputAudio };
    if (plan.failStatus !== undefined) {
      const error = {
        type: plan.failStatus >= 500 ? 'server_error' : plan.failStatus === 429 ? 'rate_limit_error' : 'invalid_request_error',
        code: 'sim_failure',
      };
      this.send({ type: 'response.done', response: this.response(plan, 'failed', { type: 'failed', error }, [], usage) });
      return;
    }

    const item: Wire = {
      id: `item_sim_${this.options.nextId()}`,
      object: 'realtime.item',
      type: 'message',
      role: 'assistant',
      status: 'in_progress',
      content: [],
    };
    const where = { response_id: plan.id, item_id: item.id, output_index: 0, content_index: 0 };
    this.send({ type: 'response.output_item.added', response_id: plan.id, output_index: 0, item });
    let entry: Entry | undefined;
    let previous_item_id: string | null = null;
    if (plan.toConversation) {
      previous_item_id = (this.items.at(-1)?.item.id as string | undefined) ?? null;
      entry = { item, textTokens: 0, audioSamples: 0, heard: '' };
      this.items.push(entry);
      this.send({ type: 'conversation.item.added', previous_item_id, item });
    }
    this.send({ type: 'response.content_part.added', ...where, part: plan.audio ? { type: 'audio', transcript: '' } : { type: 'text', text: '' } });

    const spoken = plan.audio ? pcm(tone(charCount(plan.text) * OUTPUT_AUDIO_SAMPLES_PER_CHAR)) : Buffer.alloc(0);
    const gap = directives.chunk_delay_ms ?? this.options.deltaMs;
    const parts = pieces(plan.text);
    const stallAt = directives.stall ? Math.min(STALL_PIECES, parts.length) : -1;
    let sent = '';
    for (let i = 0; i <= parts.length; i++) {
      if (i === stallAt) await aborted(signal);
      if (directives.cut_after_chunks !== undefined && i === Math.min(directives.cut_after_chunks, parts.length)) {
        this.ws.terminate();
        return;
      }
      if (i === parts.length || signal.aborted) break;
      const pause = i === 0 ? (directives.delay_ms ?? 0) : gap;
      if (pause > 0 && !(await pauseFor(pause, signal))) break;
      const piece = parts[i];
      if (plan.audio) {
        const from = charCount(sent) * OUTPUT_AUDIO_SAMPLES_PER_CHAR * 2;
        const to = from + charCount(piece) * OUTPUT_AUDIO_SAMPLES_PER_CHAR * 2;
        this.send({ type: 'response.output_audio_transcript.delta', ...where, delta: piece });
        this.send({ type: 'response.output_audio.delta', ...where, delta: spoken.subarray(from, to).toString('base64') });
      } else {
        this.send({ type: 'response.output_text.delta', ...where, delta: piece });
      }
      sent += piece;
    }
    if (this.closed.signal.aborted) return;

    const cancelled = running.cancel.signal.aborted;
    usage.outputText = countTextTokens(sent);
    usage.outputAudio = plan.audio ? charCount(sent) * (OUTPUT_AUDIO_SAMPLES_PER_CHAR / OUTPUT_AUDIO_SAMPLES_PER_TOKEN) : 0;
    if (plan.audio) {
      this.send({ type: 'response.output_audio.done', ...where });
      this.send({ type: 'response.output_audio_transcript.done', ...where, transcript: sent });
    } else {
      this.send({ type: 'response.output_text.done', ...where, text: sent });
    }
    this.send({ type: 'response.content_part.done', ...where, part: plan.audio ? { type: 'audio', transcript: sent } : { type: 'text', text: sent } });
    item.status = cancelled || plan.incomplete ? 'incomplete' : 'completed';
    item.content = [plan.audio ? { type: 'output_audio', transcript: sent } : { type: 'output_text', text: sent }];
    this.send({ type: 'response.output_item.done', response_id: plan.id, output_index: 0, item });
    if (entry) {
      // Later responses hear this turn as the audio it was, or read it as text.
      entry.audioSamples = plan.audio ? charCount(sent) * OUTPUT_AUDIO_SAMPLES_PER_CHAR : 0;
      entry.textTokens = plan.audio ? 0 : usage.outputText;
      this.send({ type: 'conversation.item.done', previous_item_id, item });
    }
    const [status, details] = cancelled
      ? ['cancelled', { type: 'cancelled', reason: 'client_cancelled' }]
      : plan.incomplete
        ? ['incomplete', { type: 'incomplete', reason: 'max_output_tokens' }]
        : ['completed', null];
    this.send({ type: 'response.done', response: this.response(plan, status, details, [item], usage) });
  }
}

/** The content part types each role may send (WIRE-FORMATS 3.2, conversation item content). */
const MESSAGE_PARTS: Record<string, string[]> = {
  user: ['input_text', 'input_audio', 'input_image'],
  assistant: ['output_text', 'output_audio'],
  system: ['input_text'],
};

/** The session fields a response can override too, checked before anything is merged. */
function checkConfig(config: Wire, param: string): void {
  const modalities = config.output_modalities;
  if (modalities !== undefined && !(Array.isArray(modalities) && modalities.length === 1 && (modalities[0] === 'audio' || modalities[0] === 'text'))) {
    throw new ClientEventError('invalid_value', `${param}.output_modalities must be ["audio"] or ["text"]`, `${param}.output_modalities`);
  }
  const max = config.max_output_tokens;
  if (max !== undefined && max !== 'inf' && !(Number.isInteger(max) && (max as number) >= 1 && (max as number) <= MAX_OUTPUT_TOKENS)) {
    throw new ClientEventError(
      'invalid_value',
      `${param}.max_output_tokens must be an integer from 1 to ${MAX_OUTPUT_TOKENS}, or "inf"`,
      `${param}.max_output_tokens`,
    );
  }
  if (config.instructions !== undefined && typeof config.instructions !== 'string') {
    throw new ClientEventError('invalid_type', `${param}.instructions must be a string`, `${param}.instructions`);
  }
  const audio = config.audio;
  if (audio === undefined) return;
  if (!isRecord(audio)) throw new ClientEventError('invalid_type', `${param}.audio must be an object`, `${param}.audio`);
  for (const direction of ['input', 'output'] as const) {
    const side = audio[direction];
    if (side === undefined) continue;
    if (!isRecord(side)) throw new ClientEventError('invalid_type', `${param}.audio.${direction} must be an object`, `${param}.audio.${direction}`);
    const format = side.format;
    if (format !== undefined && !(isRecord(format) && format.type === 'audio/pcm' && (format.rate === undefined || format.rate === SAMPLE_RATE))) {
      throw new ClientEventError(
        'unsupported_value',
        `the simulator speaks only {type: "audio/pcm", rate: ${SAMPLE_RATE}}`,
        `${param}.audio.${direction}.format`,
      );
    }
  }
  const transcription = isRecord(audio.input) ? audio.input.transcription : undefined;
  if (
    transcription !== undefined &&
    transcription !== null &&
    !(isRecord(transcription) && (transcription.model === undefined || typeof transcription.model === 'string'))
  ) {
    throw new ClientEventError(
      'invalid_type',
      `${param}.audio.input.transcription must be an object with a model, or null`,
      `${param}.audio.input.transcription`,
    );
  }
}

/** The longest run of whole pieces whose text tokens plus spoken audio tokens stay within `max`. */
function fitSpoken(reply: string, max: number): string {
  let fitted = '';
  for (const piece of pieces(reply)) {
    const longer = fitted + piece;
    const cost = countTextTokens(longer) + charCount(longer) * (OUTPUT_AUDIO_SAMPLES_PER_CHAR / OUTPUT_AUDIO_SAMPLES_PER_TOKEN);
    if (cost > max) break;
    fitted = longer;
  }
  return fitted;
}

/**
 * What the simulated transcription model makes of raw 24 kHz PCM16: wrapped in a WAV header so
 * it reads the right duration, and given the transcription settings when there are some.
 */
function hear(bytes: Buffer, transcription: Wire | null): { transcript: string; simLines: string[] } {
  const even = bytes.length % 2 === 0 ? bytes : Buffer.concat([bytes, Buffer.alloc(1)]);
  const samples = new Int16Array(even.length / 2);
  for (let i = 0; i < samples.length; i++) samples[i] = even.readInt16LE(i * 2);
  const file = wav(samples);
  const { simText, simLines } = simLinesOf(bytes);
  const { text } = transcribe({
    task: 'transcribe',
    model: typeof transcription?.model === 'string' ? transcription.model : 'sim/realtime-ears',
    file: { field: 'file', filename: 'input.wav', mimeType: 'audio/wav', bytes: file },
    language: typeof transcription?.language === 'string' ? transcription.language : undefined,
    prompt: typeof transcription?.prompt === 'string' ? transcription.prompt : '',
    responseFormat: 'json',
    temperature: 0,
    granularities: [],
    directives: {},
    simText,
  });
  return { transcript: text, simLines };
}

function usageWire(u: Usage): Wire {
  const input = u.inputText + u.inputAudio;
  const output = u.outputText + u.outputAudio;
  return {
    total_tokens: input + output,
    input_tokens: input,
    output_tokens: output,
    input_token_details: {
      text_tokens: u.inputText,
      audio_tokens: u.inputAudio,
      image_tokens: 0,
      cached_tokens: u.cachedText + u.cachedAudio,
      cached_tokens_details: { text_tokens: u.cachedText, audio_tokens: u.cachedAudio, image_tokens: 0 },
    },
    output_token_details: { text_tokens: u.outputText, audio_tokens: u.outputAudio },
  };
}

/** Waits `ms`; false when the signal fired first. */
async function pauseFor(ms: number, signal: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, undefined, { signal });
    return true;
  } catch {
    return false;
  }
}

function aborted(signal: AbortSignal): Promise<void> {
  return signal.aborted ? Promise.resolve() : new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}
