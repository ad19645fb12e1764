import type { Caller } from '@svc/identity';
import { transcriptionMeters } from '@svc/interfaces';
import { isHoldNotOpen, newGenerationId, type Metered, type MeteredCalls, type RoutedModel, type Settlement, type Target } from '@svc/metering';
import { responseMeters, responseWorstCase, type ConversationTally } from './billing';
import type { Wire } from './events';

/** Spec 4.1: the endpoint realtime generations are recorded under. */
export const REALTIME_ENDPOINT = '/v1/realtime';

/**
 * A response's hold (a job hold: no serving lease vouches for it) outlives the longest a session
 * may last (spec 8: 60 minutes) plus the wait after a client leaves: the session settles or
 * releases it before then; only a crashed process leaves it open, until the expiry sweeper
 * releases it unbilled once this TTL is over.
 */
export const RESPONSE_HOLD_TTL_MS = 65 * 60_000;
/** A transcription is held and settled at once: the TTL only matters if the process dies in between. */
const TRANSCRIPTION_HOLD_TTL_MS = 15 * 60_000;

/** A response held and not yet settled, with when it started and first gave output (its latency and time to first token). */
export interface HeldResponse {
  metered: Metered;
  target: Target;
  startedAt: number;
  firstOutputAt: number | null;
}

/** An input transcription billed: its generation's id, and the amount charged (null when the charge could not be made). */
export interface BilledTranscription {
  generationId: string;
  charged: bigint | null;
}

export interface SessionBillingDeps {
  calls: MeteredCalls;
  caller: Caller;
  /** The realtime model with only the route the session dialled: every response is billed at its prices. */
  routed: RoutedModel;
  warn(message: string): void;
}

/**
 * The billing of one realtime session (spec 4.16, ARCHITECTURE section 10): each response a
 * billed call of its own, held before it starts (spec 1 rule 1), charged from its
 * `response.done` by meter, released unbilled when it returns nothing or never ends (rule 3);
 * each input transcription a call of its own at the transcription model's price. The client has
 * the output by the time it is charged, so the charge lands whatever happens: now, or kept for
 * the hold reaper (issue 41 A).
 */
export class SessionBilling {
  constructor(private readonly deps: SessionBillingDeps) {}

  /**
   * Holds the worst case of the response `responseCreate` asks for, given what the conversation
   * holds by now, under an id of the session's choosing and outside the per-minute limits (the
   * session holds a slot already). Rejects when the account refuses it (spec 3.3, 6.2).
   */
  async holdResponse(tally: ConversationTally, responseCreate: Wire): Promise<HeldResponse> {
    const { calls, caller, routed } = this.deps;
    const worstCase = responseWorstCase(tally, responseCreate, routed.routes[0].prices);
    const metered = await calls.reserve(
      caller,
      { models: [routed], headers: {}, promptTokens: worstCase.input ?? 0, worstCase, endpoint: REALTIME_ENDPOINT },
      { job: { holdId: newGenerationId(), ttlMs: RESPONSE_HOLD_TTL_MS } },
    );
    return { metered, target: metered.targets[0], startedAt: performance.now(), firstOutputAt: null };
  }

  /** The response's first output delta: its time to first token. */
  outputStarted(response: HeldResponse): void {
    if (response.firstOutputAt === null) response.firstOutputAt = performance.now();
  }

  /**
   * Charges the usage `response.done` reports, by meter; no output (a failed or empty response)
   * is free (spec 1 rule 3), and no usage reported at all releases the hold. Resolves with the
   * amount charged; null when nothing was, or when the charge could not be made nor kept (the
   * hold is then left to expire, and a warning says so).
   */
  async settleResponse(response: HeldResponse, usage: unknown): Promise<bigint | null> {
    const { calls } = this.deps;
    const latencyMs = performance.now() - response.startedAt;
    const reported = responseMeters(usage);
    const { reservation } = response.metered;
    try {
      if (!reported) {
        await calls.release(reservation, response.target, new Error('no usage reported'), latencyMs, 'no_usage_reported');
        return null;
      }
      const settlement: Settlement = {
        usage: reported.usage,
        returned: reported.returned,
        latencyMs,
        ttftMs: response.firstOutputAt === null ? null : Math.round(response.firstOutputAt - response.startedAt),
      };
      return await calls.settleDelivered(response.metered, response.target, settlement);
    } catch (err) {
      this.deps.warn(`realtime ${reservation.id}: settling failed (${(err as Error).message}); the hold is left to expire`);
      return null;
    }
  }

  /**
   * Releases, unbilled, a response the session ended before its `response.done`, or one held
   * while the session was ending (`begun` false: it never started). One settled or released
   * already is left as it is.
   */
  async releaseResponse(response: HeldResponse, begun: boolean): Promise<void> {
    const { reservation } = response.metered;
    const why = begun ? 'session closed before response.done' : 'session closed before the response began';
    const latencyMs = begun ? performance.now() - response.startedAt : 0;
    await this.deps.calls.release(reservation, response.target, new Error(why), latencyMs, 'session_closed').catch((err: unknown) => {
      if (!isHoldNotOpen(err)) this.deps.warn(`realtime ${reservation.id}: release failed (${(err as Error).message})`);
    });
  }

  /**
   * Spec 4.16: an input transcription (`...input_audio_transcription.completed`) at `routed`'s
   * price. The work is done by now, so the exact amount is held and charged at once. Null when
   * the event reports no usage (not billed); rejects when the hold is refused.
   */
  async billTranscription(routed: RoutedModel, event: Wire): Promise<BilledTranscription | null> {
    const { calls, caller } = this.deps;
    const usage = transcriptionMeters(event.usage, routed.routes[0].prices);
    if (!usage) {
      this.deps.warn(`realtime ${this.deps.routed.model.id}: a transcription reported no usage; not billed`);
      return null;
    }
    const started = performance.now();
    const metered = await calls.reserve(
      caller,
      { models: [routed], headers: {}, promptTokens: 0, worstCase: usage, endpoint: REALTIME_ENDPOINT },
      { job: { holdId: newGenerationId(), ttlMs: TRANSCRIPTION_HOLD_TTL_MS } },
    );
    const transcript = typeof event.transcript === 'string' ? event.transcript : '';
    const settlement: Settlement = { usage, returned: transcript.length > 0 ? 1 : 0, latencyMs: performance.now() - started, ttftMs: null };
    const charged = await calls.settleDelivered(metered, metered.targets[0], settlement).catch((err: unknown) => {
      this.deps.warn(`realtime ${metered.reservation.id}: settling a transcription failed (${(err as Error).message})`);
      return null;
    });
    return { generationId: metered.reservation.id, charged };
  }
}
