import { Inject, Injectable } from '@nestjs/common';
import { type ActiveBatch, type LineAnswer, type LineCalls } from '@svc/batches';
import { embeddingsRequest } from '@svc/interfaces';
import { failedGenerationOf, isHoldNotOpen, type Reservation, type Settlement, type TargetRef } from '@svc/metering';
import { ApiError, bodyValidation, CLOCK, type Clock, isConnectionFailure, READ_DB, type SqlRunner } from '@svc/platform';
import { callerOfKey } from '@svc/identity';
import { ChatCompletionRequest } from '../chat/chat-completion.request';
import { type AnsweredCall, ChatCompletionsService } from '../chat/chat-completions.service';
import { toApiError } from '../http/error-mapping';
import { Metering } from '../metering/metering.service';

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

const validateChat = bodyValidation();

/**
 * The lines of a batch (spec 4.11, 1 rule 6) through the same use cases as the requests they
 * stand for: parsed as the endpoint parses them, under the key that created the batch, then
 * held at the batch discount, outside the per-minute limits, and answered; the settlement is
 * made once the runner has kept the answer.
 */
@Injectable()
export class BatchLineCalls implements LineCalls {
  constructor(
    private readonly chat: ChatCompletionsService,
    private readonly metering: Metering,
    @Inject(READ_DB) private readonly sql: SqlRunner,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async answer(batch: ActiveBatch, body: Record<string, unknown>, holdId: string): Promise<LineAnswer> {
    const options = { job: { holdId, ttlMs: LINE_HOLD_TTL_MS, batchDiscount: true } };
    try {
      const caller = await callerOfKey(this.sql, batch.keyId, this.clock.now());
      if (!caller) throw ApiError.authentication('The key that created this batch has been revoked or has expired.');
      let answered: AnsweredCall<{ body: unknown }>;
      if (batch.endpoint === '/v1/chat/completions') {
        const parsed = (await validateChat.transform(body, { type: 'body', metatype: ChatCompletionRequest })) as ChatCompletionRequest;
        if (parsed.stream === true) throw ApiError.invalidRequest('A batch line cannot stream: leave stream out.', 'stream');
        const { request, preset, web } = this.chat.applyRules(caller, parsed);
        answered = await this.chat.answer(caller, request, { preset, web }, options);
      } else {
        answered = await this.chat.answerEmbeddings(caller, embeddingsRequest(body), {}, options);
      }
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
      return { answered: true, body: answered.present(this.metering.calls.chargeOf(target, settlement)).body, requestId: metered.reservation.id, kept };
    } catch (err) {
      // The service's own failure (its database) is not the line's: it is tried again.
      if (isConnectionFailure(err)) throw err;
      const error = toApiError(err, this.clock.now());
      if (error.status >= 500 && !(err instanceof ApiError) && failedGenerationOf(err) === undefined) throw err;
      return { answered: false, statusCode: error.status, body: error.toBody(), requestId: failedGenerationOf(err) ?? null };
    }
  }

  async settle(batch: ActiveBatch, kept: unknown): Promise<void> {
    const { reservation, answered, settlement, toolPrices } = kept as KeptSettlement;
    const caller = await callerOfKey(this.sql, batch.keyId, this.clock.now());
    const calls = this.metering.calls;
    const found = calls
      .targetsOf(reservation, caller?.sealedProviderKeys ?? new Map())
      .find((t) => t.model.id === answered.model && t.route.provider.name === answered.provider && t.byok === answered.byok);
    if (!found) throw ApiError.internal(`batch ${batch.batchId}: ${answered.model} via ${answered.provider} is no longer a target of ${reservation.id}`);
    const target = toolPrices
      ? {
          ...found,
          toolPrices: { perQuery: BigInt(toolPrices.perQuery), costPerQuery: toolPrices.costPerQuery === null ? null : BigInt(toolPrices.costPerQuery) },
        }
      : found;
    try {
      await calls.settle({ reservation, targets: [target], headers: {} }, target, settlement);
    } catch (err) {
      // Settled by the attempt that kept it, before its worker stopped.
      if (isHoldNotOpen(err)) return;
      throw err;
    }
  }

  async release(batch: ActiveBatch, holdId: string): Promise<void> {
    try {
      await this.metering.ledger(
        batch.accountId,
        { type: 'ReleaseHold', holdId, errorCode: 'batch_line_abandoned', stats: { endpoint: batch.endpoint } },
        { actor: 'batches', correlationId: holdId },
      );
    } catch (err) {
      if (isHoldNotOpen(err)) return;
      throw err;
    }
  }
}
