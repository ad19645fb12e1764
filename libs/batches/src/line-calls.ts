import type { Caller } from '@svc/identity';
import {
  failedGenerationOf,
  type Metered,
  type MeteredCalls,
  type ReserveOptions,
  type Reservation,
  type Settlement,
  type Target,
  type TargetRef,
} from '@svc/metering';
import { type ApiError, DomainError, type Nano, isConnectionFailure, refusalOf } from '@svc/platform';
import type { BatchEndpoint } from './batch';
import type { ActiveBatch, LineAnswer, LineCalls } from './runner';

/**
 * A batch line's hold lives as long as its batch may still finish (spec 3.2: 24 hours) and a
 * little more: a worker that stopped between keeping an answer and settling it is followed by
 * another that settles it, however long the first one stays down.
 */
const LINE_HOLD_TTL_MS = 25 * 3_600_000;

/** What a line keeps between its answer and its settlement: ids, counts and costs. */
interface KeptSettlement {
  reservation: Reservation;
  answered: Pick<TargetRef, 'model' | 'provider' | 'byok'>;
  settlement: Settlement;
  /**
   * The web search's price per query of the engine that ran (nano-USD, as decimal strings: this
   * is kept as JSON), absent when none ran: the reservation's targets are the models', and the
   * line's charge must include the queries its answer was priced with.
   */
  toolPrices?: { perQuery: string; costPerQuery: string | null };
}

/** A line's request held and answered by its endpoint's use case, not yet settled. */
export interface AnsweredLine {
  metered: Metered;
  target: Target;
  settlement: Settlement;
  /** The endpoint's response, given what the settlement will charge. */
  present(charged: Nano): { body: unknown };
}

/** The endpoints a line stands for, as the gateway serves them. */
export interface LineEndpoints {
  /**
   * The line's request parsed as `endpoint` parses it, then held with `options` and answered
   * by the endpoint's own use case, for `caller`. Throws what the endpoint would answer.
   */
  answer(caller: Caller, endpoint: BatchEndpoint, body: Record<string, unknown>, options: ReserveOptions): Promise<AnsweredLine>;
  /** What the endpoint answers for `err`: the spec's error object and status (sections 2.1, 7). */
  errorOf(err: unknown): ApiError;
}

export interface BatchLineCallsDeps {
  calls: MeteredCalls;
  endpoints: LineEndpoints;
  /** The key that created the batch, as it stands now; null once revoked or expired. */
  callerOf(keyId: string): Promise<Caller | null>;
}

/**
 * The lines of a batch (spec 4.11, 1 rule 6) through the same use cases as the requests they
 * stand for: parsed as the endpoint parses them, under the key that created the batch, then
 * held at the batch discount, outside the per-minute limits, and answered; the settlement is
 * made from the reservation once the runner has kept the answer, by whichever worker is there.
 */
export class BatchLineCalls implements LineCalls {
  constructor(private readonly deps: BatchLineCallsDeps) {}

  async answer(batch: ActiveBatch, body: Record<string, unknown>, holdId: string): Promise<LineAnswer> {
    const { calls, endpoints } = this.deps;
    const options = { job: { holdId, ttlMs: LINE_HOLD_TTL_MS, batchDiscount: true } };
    try {
      const caller = await this.deps.callerOf(batch.keyId);
      if (!caller) throw DomainError.unauthenticated('The key that created this batch has been revoked or has expired.', 'invalid_api_key');
      const answered = await endpoints.answer(caller, batch.endpoint, body, options);
      const { metered, target, settlement } = answered;
      const { toolPrices } = target;
      const kept: KeptSettlement = {
        reservation: metered.reservation,
        answered: { model: target.model.id, provider: target.route.provider.name, byok: target.byok },
        settlement,
        ...(toolPrices
          ? {
              toolPrices: {
                perQuery: toolPrices.perQuery.toString(),
                costPerQuery: toolPrices.costPerQuery == null ? null : toolPrices.costPerQuery.toString(),
              },
            }
          : {}),
      };
      return { answered: true, body: answered.present(calls.chargeOf(target, settlement)).body, requestId: metered.reservation.id, kept };
    } catch (err) {
      // The service's own failure (its database) is not the line's: it is tried again.
      if (isConnectionFailure(err)) throw err;
      const error = endpoints.errorOf(err);
      if (error.status >= 500 && refusalOf(err) === null && failedGenerationOf(err) === undefined) throw err;
      return { answered: false, statusCode: error.status, body: error.toBody(), requestId: failedGenerationOf(err) ?? null };
    }
  }

  /** Charges a kept answer; one settled already, by the attempt that kept it before its worker stopped, is left. */
  async settle(_batch: ActiveBatch, kept: unknown): Promise<void> {
    const { reservation, answered, settlement, toolPrices } = kept as KeptSettlement;
    const tools = toolPrices
      ? { toolPrices: { perQuery: BigInt(toolPrices.perQuery), costPerQuery: toolPrices.costPerQuery === null ? null : BigInt(toolPrices.costPerQuery) } }
      : {};
    await this.deps.calls.settleReservation(reservation, { ...answered, ...tools }, settlement);
  }

  async release(batch: ActiveBatch, holdId: string): Promise<void> {
    const held = {
      id: holdId,
      accountId: batch.accountId,
      keyId: batch.keyId,
      endpoint: batch.endpoint,
      metadata: { actor: 'batches', correlationId: holdId },
    };
    await this.deps.calls.releaseReservation(held, 'batch_line_abandoned');
  }
}
