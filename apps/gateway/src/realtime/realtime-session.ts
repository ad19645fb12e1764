import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Caller } from '@svc/identity';
import type { Metering, RoutedModel } from '@svc/metering';
import { ApiError, type Clock, nanoToUsd } from '@svc/platform';
import {
  type BilledTranscription,
  checkClientFrame,
  EMPTY_TALLY,
  SESSION_END_MESSAGES,
  SessionBilling,
  sessionEnd,
  tallyClientEvent,
  tallyServerEvent,
  transcriptionModelOf,
  withTranscriptionModel,
  type ClientEventProblem,
  type ConversationTally,
  type HeldResponse,
  type Wire,
} from '@svc/realtime';
import type { RawData, WebSocket } from 'ws';
import { toApiError } from '../http/error-mapping';

/**
 * Spec 1 rule 4: a client that leaves mid-response is still billed, so the upstream stays open
 * until that response's `response.done`, at most this long (then the hold is released unbilled).
 */
export const DRAIN_AFTER_CLIENT_LEFT_MS = 30_000;
/** How often the session limits (spec 8) and the key's expiry are checked against the injected clock. */
export const LIMIT_CHECK_EVERY_MS = 1_000;
/**
 * Spec 5.5 for a session (issue 41 S1): besides every invalidation of the authentication cache,
 * the key is looked up again this often: a lost NOTIFY, or a gateway running without the cache,
 * delays a revocation by this much at most. Expiry and a rotation's grace are judged every second.
 */
export const KEY_LOOKUP_EVERY_MS = 5_000;

/**
 * Close codes (RFC 6455): 1008 (policy) for exhaustion, as spec 3.3 and 6.2 require, and for a
 * key revoked, rotated out or expired mid-session (spec 5.5); 1000 when
 * the 60-minute or 10-idle-minute limit ends the session (a normal end, announced by an `error`
 * event whose code says which); 1011 when the upstream goes away without a sendable code.
 */
export const CLOSE_EXHAUSTED = 1008;
/** Spec 5.5: a key that stops working ends its sessions as a policy violation too (issue 41 S1). */
export const CLOSE_POLICY = 1008;
export const CLOSE_LIMIT = 1000;
const CLOSE_UPSTREAM_GONE = 1011;

/** A response held, and the upstream's id of it once response.created names it. */
interface OpenResponse extends HeldResponse {
  upstreamId: string | null;
}

export interface SessionParts {
  caller: Caller;
  metering: Metering;
  clock: Clock;
  /** The realtime model with only the route the session dialled. */
  routed: RoutedModel;
  upstream: WebSocket;
  /** Emits 'close' once the session is over: gives the concurrency slot back (RateLimitService.admit). */
  slot: EventEmitter;
  /**
   * Spec 5.5: why the session's key no longer works at the injected clock's now (revoked, rotated
   * out past its grace, expired), or null. `fresh` looks the key up again; otherwise the last
   * lookup is judged against the clock. Rejects when the lookup itself fails.
   */
  keyRefusal(fresh: boolean): Promise<ApiError | null>;
  /** Calls `changed` when keys may have changed (the authentication cache's invalidations); returns the unsubscribe. */
  watchKey(changed: () => void): () => void;
  warn(message: string): void;
  /** The session is over: forget it. */
  ended(session: RealtimeSession): void;
}

const OUTPUT_DELTAS = new Set([
  'response.output_audio.delta',
  'response.output_text.delta',
  'response.output_audio_transcript.delta',
  'response.function_call_arguments.delta',
]);

/**
 * One realtime session (spec 4.16): relays the GA protocol between the client and the provider,
 * each response billed as a call of its own (SessionBilling): held on the client's
 * `response.create` before it is forwarded, settled from the upstream's `response.done`. Events
 * of each direction are handled one at a time, in order, so a hold is in place before the
 * response.create that needs it goes on, and a charge is recorded before its response.done is
 * relayed (a /v1/generation read right after sees it).
 */
export class RealtimeSession {
  private client: WebSocket | null = null;
  private tally: ConversationTally = EMPTY_TALLY;
  private open: OpenResponse | null = null;
  private transcription: RoutedModel | null = null;
  private readonly startedMs: number;
  private lastClientEventMs: number;
  private fromClient: Promise<void> = Promise.resolve();
  private fromUpstream: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;
  private drain: NodeJS.Timeout | null = null;
  private over = false;
  private readonly done = new EventEmitter();
  private unwatchKey: (() => void) | null = null;
  private lastKeyLookupMs = 0;
  /** A key check under way, and whether another (fresh) one was asked for meanwhile. */
  private checkingKey = false;
  private keyCheckAgain = false;
  private readonly billing: SessionBilling;

  constructor(private readonly parts: SessionParts) {
    this.startedMs = this.lastClientEventMs = parts.clock.now().getTime();
    this.billing = new SessionBilling({ calls: parts.metering.calls, caller: parts.caller, routed: parts.routed, warn: parts.warn });
  }

  get modelId(): string {
    return this.parts.routed.model.id;
  }

  start(client: WebSocket): void {
    this.client = client;
    const { upstream } = this.parts;
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
    client.on('message', (data, isBinary) => {
      this.fromClient = this.fromClient.then(() => this.onClient(data, isBinary)).catch((err: unknown) => this.failed(err));
    });
    upstream.on('message', (data, isBinary) => {
      this.fromUpstream = this.fromUpstream.then(() => this.onUpstream(data, isBinary)).catch((err: unknown) => this.failed(err));
    });
    client.on('close', () => this.clientLeft());
    upstream.on('close', (code, reason) => {
      // Events still queued are relayed (and billed) first.
      this.fromUpstream = this.fromUpstream.then(() => this.upstreamGone(code, reason.toString()));
    });
    this.timer = setInterval(() => void this.checkLimits(), LIMIT_CHECK_EVERY_MS);
    this.timer.unref();
    this.lastKeyLookupMs = performance.now();
    this.unwatchKey = this.parts.watchKey(() => void this.checkKey(true));
    upstream.resume();
  }

  /** Ends the session now (the gateway is shutting down): an open response is released. */
  async shutdown(): Promise<void> {
    if (this.over) return;
    this.closeClient(1001, 'gateway shutting down');
    await this.end();
  }

  // ---- client -> upstream -----------------------------------------------------------------

  private async onClient(data: RawData, isBinary: boolean): Promise<void> {
    if (this.over) return;
    this.lastClientEventMs = this.parts.clock.now().getTime();
    const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    const checked = checkClientFrame(bytes, isBinary);
    if (!checked.ok) return this.sendError(checked.error);
    let event: Wire = checked.event;
    if (event.type === 'session.update') {
      const rewritten = this.sessionUpdate(event);
      if ('error' in rewritten) return this.sendError(rewritten.error);
      event = rewritten.event;
    }
    if (event.type === 'response.create') return this.createResponse(event);
    this.tally = tallyClientEvent(this.tally, event);
    this.forward(event);
  }

  /**
   * Spec 4.16: the session's model is the URL's (the one billed), and input transcription takes
   * one of the three transcription models, each sent upstream as its route's model id.
   */
  private sessionUpdate(event: Wire): { event: Wire } | { error: ClientEventProblem } {
    const eventId = typeof event.event_id === 'string' ? event.event_id : null;
    const session = event.session as Wire | undefined;
    if (session && typeof session === 'object' && 'model' in session) {
      if (session.model !== this.modelId && session.model !== this.parts.routed.routes[0].upstreamModel) {
        return {
          error: problem(
            'invalid_value',
            `session.model cannot change a session's model: it is '${this.modelId}', chosen in the URL.`,
            'session.model',
            eventId,
          ),
        };
      }
      event = { ...event, session: { ...session, model: this.parts.routed.routes[0].upstreamModel } };
    }
    const chosen = transcriptionModelOf(event);
    if ('error' in chosen) return chosen;
    if (chosen.model === null) this.transcription = null;
    if (typeof chosen.model !== 'string') return { event };
    let routed: RoutedModel;
    try {
      // The key's model allowlist applies to the transcription model too.
      const { models } = this.parts.metering.route(this.parts.caller, 'audio', { model: chosen.model });
      routed = { ...models[0], routes: models[0].routes.slice(0, 1) };
    } catch (err) {
      const api = toApiError(err, this.parts.clock.now());
      return { error: problem(api.code ?? 'invalid_value', api.message, 'session.audio.input.transcription.model', eventId) };
    }
    this.transcription = routed;
    return { event: withTranscriptionModel(event, routed.routes[0].upstreamModel) };
  }

  /** Spec 1 rule 1: the response's worst case is held before the response.create goes upstream. */
  private async createResponse(event: Wire): Promise<void> {
    const eventId = typeof event.event_id === 'string' ? event.event_id : null;
    if (this.open) {
      // One billed response at a time: a second would run on no hold of its own.
      return this.sendError(
        problem(
          'conversation_already_has_active_response',
          'A response is already in progress; wait for its response.done or send response.cancel.',
          null,
          eventId,
        ),
      );
    }
    // The key may have expired since the last check: no new hold on it.
    if (await this.checkKey(false)) return;
    const opened = await this.hold(event, eventId);
    if (!opened) return;
    if (this.over) return this.releaseLate(opened);
    this.open = opened;
    this.forward(event);
  }

  private async hold(responseCreate: Wire, eventId: string | null): Promise<OpenResponse | null> {
    try {
      return { ...(await this.billing.holdResponse(this.tally, responseCreate)), upstreamId: null };
    } catch (err) {
      this.refused(err, eventId);
      return null;
    }
  }

  /**
   * Spec 3.3 and 6.2: a hold refused for money (402 balance, 429 key or account spend limit) is
   * an `error` event, then close code 1008; any other refusal is an `error` event and the
   * session goes on.
   */
  private refused(err: unknown, eventId: string | null): void {
    const api = toApiError(err, this.parts.clock.now());
    this.sendError({ type: api.type, code: api.code, message: api.message, param: api.param, event_id: eventId });
    if (api.type === 'insufficient_quota') {
      this.closeClient(CLOSE_EXHAUSTED, api.code ?? 'insufficient_quota');
      void this.end();
    }
  }

  private forward(event: Wire): void {
    const { upstream } = this.parts;
    if (upstream.readyState === upstream.OPEN) upstream.send(JSON.stringify(event));
  }

  // ---- upstream -> client -----------------------------------------------------------------

  private async onUpstream(data: RawData, isBinary: boolean): Promise<void> {
    const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    let event: Wire;
    try {
      event = JSON.parse(bytes.toString('utf8')) as Wire;
      if (typeof event !== 'object' || event === null || isBinary) throw new Error('not an event');
    } catch {
      this.parts.warn(`realtime ${this.modelId}: the upstream sent a frame that is not a JSON event; dropped`);
      return;
    }
    this.tally = tallyServerEvent(this.tally, event);
    const response = typeof event.response === 'object' && event.response !== null ? (event.response as Wire) : null;
    switch (event.type) {
      case 'response.created':
        if (!this.open && !(await this.unaskedResponse(response))) return;
        if (this.open) {
          this.open.upstreamId = typeof response?.id === 'string' ? response.id : null;
          event = { ...event, generation_id: this.open.metered.reservation.id };
        }
        break;
      case 'response.done': {
        const open = this.open;
        if (!open || (open.upstreamId !== null && response?.id !== open.upstreamId)) break;
        this.open = null;
        const charged = await this.billing.settleResponse(open, response?.usage);
        event = withCharge(event, open.metered.reservation.id, charged);
        if (this.client === null || this.client.readyState !== this.client.OPEN) this.drained();
        break;
      }
      case 'conversation.item.input_audio_transcription.completed': {
        const billed = await this.billTranscription(event);
        if (billed === null) return;
        event = billed;
        break;
      }
      default:
        if (this.open && OUTPUT_DELTAS.has(event.type as string)) this.billing.outputStarted(this.open);
    }
    this.sendClient(event);
  }

  /**
   * A response the client did not ask for (server VAD's automatic responses): it is held as it
   * starts; refused for money, it is cancelled upstream and the session ends as spec 3.3 says.
   */
  private async unaskedResponse(response: Wire | null): Promise<boolean> {
    const opened = await this.hold({ response: response ?? {} }, null);
    if (!opened) {
      this.forward({ type: 'response.cancel' });
      return false;
    }
    if (this.over) {
      await this.releaseLate(opened);
      return false;
    }
    this.open = opened;
    return true;
  }

  /**
   * Spec 4.16: an input transcription, billed at its model's price, relayed with its generation
   * and cost; null when the hold is refused (the event is then not relayed and the session
   * ends, spec 3.3).
   */
  private async billTranscription(event: Wire): Promise<Wire | null> {
    const routed = this.transcription;
    if (!routed) return event;
    let billed: BilledTranscription | null;
    try {
      billed = await this.billing.billTranscription(routed, event);
    } catch (err) {
      this.refused(err, null);
      return null;
    }
    if (!billed) return event;
    return { ...event, generation_id: billed.generationId, ...(billed.charged === null ? {} : { cost: nanoToUsd(billed.charged) }) };
  }

  /** A hold taken while the session was ending (its key refused meanwhile): released, never billed. */
  private releaseLate(opened: OpenResponse): Promise<void> {
    return this.billing.releaseResponse(opened, false);
  }

  // ---- ends -------------------------------------------------------------------------------

  /**
   * Spec 5.5 for a live session (issue 41 S1): a key revoked, rotated out past its grace or
   * expired ends the session with an `error` event and close 1008 (policy), its open response
   * released unbilled. True when the session was ended. A failed lookup ends nothing: the
   * database being away is not a revocation, and the next check asks again.
   */
  private async checkKey(fresh: boolean): Promise<boolean> {
    if (this.over) return true;
    if (this.checkingKey) {
      this.keyCheckAgain ||= fresh;
      return false;
    }
    this.checkingKey = true;
    let refusal: ApiError | null = null;
    try {
      if (fresh) this.lastKeyLookupMs = performance.now();
      refusal = await this.parts.keyRefusal(fresh);
    } catch (err) {
      this.parts.warn(`realtime ${this.modelId}: the session's key could not be checked (${(err as Error).message}); checked again shortly`);
    } finally {
      this.checkingKey = false;
    }
    if (this.over) return true;
    if (refusal) {
      this.sendError({ type: refusal.type, code: refusal.code, message: refusal.message, param: null, event_id: null });
      this.closeClient(CLOSE_POLICY, refusal.code ?? 'invalid_api_key');
      await this.end();
      return true;
    }
    if (this.keyCheckAgain) {
      this.keyCheckAgain = false;
      return this.checkKey(true);
    }
    return false;
  }

  /** Spec 8: 60 minutes at most, 10 idle minutes, on the injected clock; and the key (spec 5.5). */
  private async checkLimits(): Promise<void> {
    if (this.over) return;
    if (await this.checkKey(performance.now() - this.lastKeyLookupMs >= KEY_LOOKUP_EVERY_MS)) return;
    const why = sessionEnd(this.startedMs, this.lastClientEventMs, this.parts.clock.now().getTime());
    if (!why) return;
    this.sendError({ type: 'invalid_request_error', code: why, message: SESSION_END_MESSAGES[why], param: null, event_id: null });
    this.closeClient(CLOSE_LIMIT, why);
    void this.end();
  }

  /** Spec 1 rule 4: a response under way is still settled; the upstream closes once it is done, or the wait is over. */
  private clientLeft(): void {
    if (this.over) return;
    if (!this.open) {
      void this.end();
      return;
    }
    this.drain = setTimeout(() => void this.end(), DRAIN_AFTER_CLIENT_LEFT_MS);
    this.drain.unref();
  }

  private drained(): void {
    if (!this.over) void this.end();
  }

  private async upstreamGone(code: number, reason: string): Promise<void> {
    if (this.over) return;
    // Only codes an endpoint may send are passed on (1005, 1006 and 1015 are not).
    const passOn = code === 1000 || (code >= 1001 && code <= 1014 && ![1004, 1005, 1006].includes(code)) || (code >= 3000 && code <= 4999);
    this.closeClient(passOn ? code : CLOSE_UPSTREAM_GONE, passOn ? reason : 'upstream connection lost');
    await this.end();
  }

  /** Once: the timers stop, an unsettled response is released (spec 1 rule 3), both sockets close, the slot is given back. */
  private async end(): Promise<void> {
    if (this.over) return new Promise((resolve) => this.done.once('ended', resolve));
    this.over = true;
    this.unwatchKey?.();
    if (this.timer) clearInterval(this.timer);
    if (this.drain) clearTimeout(this.drain);
    const open = this.open;
    this.open = null;
    const { upstream } = this.parts;
    if (upstream.readyState === upstream.OPEN || upstream.readyState === upstream.CONNECTING) upstream.close(1000, 'session over');
    if (open) await this.billing.releaseResponse(open, true);
    this.closeClient(1000, 'session over');
    this.parts.slot.emit('close');
    this.parts.ended(this);
    this.done.emit('ended');
  }

  private failed(err: unknown): void {
    // A fault of ours ends this session only: never the process.
    this.parts.warn(`realtime ${this.modelId}: ${(err as Error)?.stack ?? String(err)}`);
    // The one mapping of the edge: a refusal keeps its own type and code, anything unexpected is a 500's.
    const api = toApiError(err, this.parts.clock.now());
    this.sendError({ type: api.type, code: api.code, message: api.message, param: null, event_id: null });
    this.closeClient(1011, 'internal error');
    void this.end();
  }

  private sendError(error: ClientEventProblem | { type: string; code: string | null; message: string; param: string | null; event_id: string | null }): void {
    this.sendClient({ type: 'error', event_id: `event_svc_${randomBytes(8).toString('hex')}`, error });
  }

  private sendClient(event: Wire): void {
    const client = this.client;
    if (client && client.readyState === client.OPEN) client.send(JSON.stringify(event));
  }

  private closeClient(code: number, reason: string): void {
    const client = this.client;
    if (client && (client.readyState === client.OPEN || client.readyState === client.CONNECTING)) client.close(code, reason.slice(0, 120));
  }
}

function problem(code: string, message: string, param: string | null, eventId: string | null): ClientEventProblem {
  return { type: 'invalid_request_error', code, message, param, event_id: eventId };
}

/**
 * The relayed response.done: `generation_id` (top level, as on response.created) names the
 * generation for /v1/generation, and `response.usage.cost` is the USD charged (spec 1 rule 2).
 */
function withCharge(event: Wire, id: string, charged: bigint | null): Wire {
  const response = event.response as Wire;
  const usage = typeof response.usage === 'object' && response.usage !== null ? (response.usage as Wire) : null;
  return {
    ...event,
    generation_id: id,
    response: { ...response, ...(usage && charged !== null ? { usage: { ...usage, cost: nanoToUsd(charged) } } : {}) },
  };
}
