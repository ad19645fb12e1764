import type { CatalogModel } from '@svc/catalog';
import type { EventMetadata } from '@svc/eventstore';
import { budgetsOf } from '@svc/guardrails';
import type { Caller } from '@svc/identity';
import type { AccountCommand, GenerationStats } from '@svc/ledger';
import { DomainError, isConnectionFailure, type Nano } from '@svc/platform';
import { ProviderError } from '@svc/providers';
import { ATTR, type Attributes, type Span } from '@svc/telemetry';
import { firstAnswer, type Tried } from './attempts';
import { chargedBy, Charges, providerName, who } from './charges';
import type { ExplainedCharge } from './cost-lines';
import { markFailedGeneration } from './failed-generation';
import type { ChargeCommand, MeteringDeps } from './metering-deps';
import type { MeterUsage } from './meters';
import {
  callMetadata,
  type AnsweredBy,
  type DecidedCharge,
  type HeldReservation,
  type Metered,
  newGenerationId,
  type Plan,
  type Reservation,
  type ReserveOptions,
  type Settlement,
} from './reservation';
import { isHoldNotOpen, settleDurably } from './settle-durably';
import { ids, settleAttributes } from './spans';
import { costOf, discounted, targetsOf, type PricedTarget, type RoutedModel, type Target, type ToolPrices } from './targets';

/** A hold nobody settles (crash) outlives the upstream timeout by this much before expiry. */
const HOLD_GRACE_MS = 15 * 60_000;

/**
 * ARCHITECTURE section 10: every model call, whatever its interface and billing unit, runs
 * `reserve -> attempt -> settle` here. Reserve holds the worst case on the account (spec 1 rule
 * 1); attempt tries the targets in order (spec 4.2 rule 6: fallbacks, routing, BYOK), releasing
 * the hold when none answers (rule 3); settle charges what was used, by meter, or releases the
 * hold when nothing was returned. Two appends per call, as before the pipeline existed.
 */
export class MeteredCalls {
  private readonly charges: Charges;

  constructor(private readonly deps: MeteringDeps) {
    this.charges = new Charges(deps);
  }

  async reserve(caller: Caller, plan: Plan, options: ReserveOptions = {}): Promise<Metered> {
    const { deps } = this;
    const { job } = options;
    const batchLine = job?.batchDiscount === true;
    const rateLimits = job ? false : (options.rateLimits ?? true);
    // Spec 8: the prompt counts against the key's tokens per minute before anything is held,
    // with the request's admission when the edge left it to this moment. A call with no text
    // input (an audio file, a prompt-less form) has nothing to count yet.
    const admitted = rateLimits && plan.admission ? await plan.admission(plan.promptTokens) : null;
    const windowHeaders = admitted ?? (rateLimits && plan.promptTokens > 0 ? await deps.tokenLimits.consumePrompt(caller, plan.promptTokens) : {});
    // BYOK: the account's own keys (read with the caller's key) replace the operator's for their providers.
    const targets = discounted(targetsOf(plan.models, deps.providers, deps.own.resolver(caller.accountId, caller.sealedProviderKeys)), batchLine);
    const id = job?.holdId ?? newGenerationId();
    const metadata = callMetadata(caller, plan, id, job ? undefined : deps.leaseId());
    // Spec 1 rule 1: hold the worst case before anything is spent. Any target may answer, so
    // the hold covers the dearest; it is held once and settled once. A BYOK target holds only its fee.
    const held = targets.map((t) => costOf(t, plan.worstCase, deps.byokFeePercent)).reduce((a, b) => (b > a ? b : a));
    // Issue 44: every guardrail budget over the caller (organization, member, key) is held against
    // in the same decision. Only a call every target of which is the account's own key is BYOK:
    // one operator-billed fallback makes the worst case the operator's.
    const budgets = budgetsOf(
      caller.guardrails,
      targets.every((t) => t.byok),
    );
    const findings = options.guardrailFindings ?? [];
    const holdAttributes = () => ({
      ...ids(id, caller.accountId, caller.keyId),
      [ATTR.amountNano]: Number(held),
      [ATTR.model]: plan.models[0].model.id,
      [ATTR.endpoint]: plan.endpoint,
    });
    const placeHold = () =>
      deps.ledger(
        caller.accountId,
        {
          type: 'PlaceHold',
          holdId: id,
          keyId: caller.keyId,
          amountNano: held,
          model: plan.models[0].model.id,
          endpoint: plan.endpoint,
          ttlMs: job?.ttlMs ?? deps.upstreamTimeoutMs + HOLD_GRACE_MS,
          // Spec 2.2 and 3.3: the key's spend limit is checked inside the same decision.
          keyLimit: caller.limit_nano === null ? null : { limitNano: BigInt(caller.limit_nano), reset: caller.limit_reset },
          ...(plan.idempotency ? { idempotency: plan.idempotency } : {}),
          ...(budgets.length > 0 ? { budgets } : {}),
          ...(findings.length > 0 ? { guardrailFindings: findings } : {}),
        },
        metadata,
      );
    await this.traced('hold', holdAttributes, placeHold).catch((err: unknown) => {
      // The hold may have committed before the connection was lost: the request fails (503), so
      // nothing may stay held for it (issue 41 A). Given back in the background; none found, none held.
      if (isConnectionFailure(err)) {
        void settleDurably(
          () => deps.ledger(caller.accountId, { type: 'ReleaseHold', holdId: id, errorCode: 'hold_unconfirmed' }, metadata),
          async () => undefined,
        ).catch((released: unknown) => {
          // Not open: it never committed, so nothing is held.
          if (!isHoldNotOpen(released))
            deps.warn(`${id}: hold not confirmed and not released (${(released as Error).message}); it is released when it expires`);
        });
      }
      throw err;
    });
    const reservation: Reservation = {
      id,
      accountId: caller.accountId,
      keyId: caller.keyId,
      endpoint: plan.endpoint,
      targets: targets.map((t) => ({ model: t.model.id, provider: t.route.provider.name, byok: t.byok, fields: t.fields })),
      promptTokens: plan.promptTokens,
      heldNano: held.toString(),
      metadata,
      ...(batchLine ? { batchLine: true as const } : {}),
    };
    return {
      reservation,
      targets,
      headers: { ...plan.headers, ...windowHeaders },
      ...(rateLimits ? { recordOutputTokens: (tokens: number) => deps.tokenLimits.recordOutput(caller, tokens) } : {}),
    };
  }

  /**
   * The live targets of a reservation made elsewhere (a job settling in the worker): the same
   * models and providers, with the account's own keys where it was BYOK.
   */
  targetsOf(reservation: Reservation, sealedProviderKeys: ReadonlyMap<string, string>): Target[] {
    const own = this.deps.own.resolver(reservation.accountId, sealedProviderKeys);
    const targets = reservation.targets.map((ref): Target => {
      const model: CatalogModel | undefined = this.deps.catalog.get(ref.model);
      const route = model?.providers.find((r) => r.provider.name === ref.provider);
      if (!model || !route) throw DomainError.internal(`${ref.model} via ${ref.provider} is no longer in the catalog`);
      const provider = ref.byok ? own(route.provider) : this.deps.providers.get(route.provider.name);
      if (!provider) throw DomainError.internal(`provider ${route.provider.name} is not configured`);
      return { model, route, provider, byok: ref.byok, fields: ref.fields };
    });
    return discounted(targets, reservation.batchLine === true);
  }

  /**
   * Spec 4.2 rule 6: each target in turn until one answers. A provider-side failure moves on;
   * any other error, or the last failure, releases the hold (spec 1 rule 3: an error is not
   * billed) and is the answer, marked with the generation's id.
   */
  async attempt<T>(metered: Metered, call: (target: Target) => Promise<T>): Promise<{ target: Target; value: T }> {
    const { reservation } = metered;
    const started = performance.now();
    const tried = await firstAnswer(this.deps, reservation.id, metered.targets, call);
    if (tried.answered) return tried;
    await this.release(reservation, tried.target, tried.cause, performance.now() - started, tried.errorCode);
    throw markFailedGeneration(tried.error, reservation.id);
  }

  /**
   * A call that costs nothing (spec 4.13: moderation is free): no hold and no charge, the same
   * fallbacks, and a generation record of cost 0 once a provider answered.
   */
  async runFree<T>(
    caller: Caller,
    plan: Pick<Plan, 'models' | 'endpoint' | 'clientRequestId'>,
    call: (target: Target) => Promise<T>,
  ): Promise<{ id: string; target: Target; value: T }> {
    const id = newGenerationId();
    const started = performance.now();
    const tried = await this.tryTargets(id, caller, plan.models, call);
    if (!tried.answered) throw tried.error;
    await this.recordFree(caller, {
      id,
      endpoint: plan.endpoint,
      model: tried.target.model.id,
      provider: providerName(tried.target),
      latencyMs: Math.round(performance.now() - started),
      clientRequestId: plan.clientRequestId,
    });
    return { id, target: tried.target, value: tried.value };
  }

  /**
   * A call made on behalf of another (the web search of a chat generation, spec 4.2 rule 7):
   * `models`' targets in turn, as `attempt` tries them, with no hold and no record of its own.
   * `id` names the generation it serves in the warnings.
   */
  tryTargets<T>(id: string, caller: Caller, models: readonly RoutedModel[], call: (target: Target) => Promise<T>): Promise<Tried<T>> {
    const targets = targetsOf(models, this.deps.providers, this.deps.own.resolver(caller.accountId, caller.sealedProviderKeys));
    return firstAnswer(this.deps, id, targets, call);
  }

  /**
   * The reservation's targets with the tools priced as the engine that answered charges them:
   * the hold counted the dearest engine; the charge is the one that ran.
   */
  withToolPrices(metered: Metered, toolPrices: ToolPrices): Metered {
    return { ...metered, targets: metered.targets.map((target) => ({ ...target, toolPrices })) };
  }

  /**
   * Charges what the call used at the prices of the target that answered (or releases the hold
   * when nothing was returned); resolves with the amount charged. The output tokens then count
   * against the caller's tokens per minute.
   */
  async settle(metered: Metered, target: Target, settlement: Settlement): Promise<Nano> {
    // Issue 43: the answer is ready and the client still waits for it, so a charge cut off by a
    // database failover is retried until the new primary takes it (the client then gets its
    // answer and its cost, charged once), rather than failed with the hold left open.
    return settleDurably(
      () => this.settleOnce(metered, target, settlement),
      async () => this.chargeOf(target, settlement),
    );
  }

  private async settleOnce(metered: Metered, target: Target, settlement: Settlement): Promise<Nano> {
    const { reservation } = metered;
    const charged = await this.charge(reservation, target, this.chargeCommand(reservation, target, settlement));
    this.countOutput(metered, settlement);
    return charged;
  }

  /**
   * Settles a hold in any process, long after its call (ARCHITECTURE section 10: a video job, a
   * batch line, a realtime response), from the reservation alone: which of its targets answered
   * and what the call used, priced as `settle` prices it, or the amount decided already (a
   * video's, priced when it completed). No client is opened, so no provider key need still be
   * saved. Resolves with the amount charged; null when the hold was no longer open (settled or
   * released by an earlier attempt of the same job).
   */
  async settleReservation(reservation: Reservation, answered: AnsweredBy, charge: Settlement | DecidedCharge): Promise<Nano | null> {
    const target = this.pricedTargetOf(reservation, answered);
    const command = 'amountNano' in charge ? this.charges.decidedCommand(reservation, target, charge) : this.chargeCommand(reservation, target, charge);
    try {
      return await this.charge(reservation, target, command);
    } catch (err) {
      if (isHoldNotOpen(err)) return null;
      throw err;
    }
  }

  /**
   * Releases a hold unbilled (spec 1 rule 3) from what is known of it once its call is gone: a
   * video that failed, a batch line's attempt abandoned by a worker that died (whose hold id is
   * all that is left of it). Resolves false when the hold was no longer open (settled or
   * released before).
   */
  async releaseReservation(reservation: HeldReservation, errorCode: string): Promise<boolean> {
    const attributes = () => ({
      ...ids(reservation.id, reservation.accountId, reservation.keyId),
      [ATTR.endpoint]: reservation.endpoint,
      [ATTR.amountNano]: 0,
      [ATTR.errorCode]: errorCode,
    });
    const command: AccountCommand = { type: 'ReleaseHold', holdId: reservation.id, errorCode, stats: { endpoint: reservation.endpoint } };
    try {
      await this.traced('release', attributes, () => this.deps.ledger(reservation.accountId, command, reservation.metadata));
      return true;
    } catch (err) {
      if (isHoldNotOpen(err)) return false;
      throw err;
    }
  }

  /**
   * One of a reservation's targets, priced, without its client (see PricedTarget): the same
   * model and provider from the catalog, at the batch discount for a batch line.
   */
  pricedTargetOf(reservation: Reservation, answered: AnsweredBy): PricedTarget {
    const ref = reservation.targets.find((t) => t.model === answered.model && t.provider === answered.provider && t.byok === answered.byok);
    if (!ref) throw DomainError.internal(`${answered.model} via ${answered.provider} is not a target of ${reservation.id}`);
    const model = this.deps.catalog.get(ref.model);
    const route = model?.providers.find((r) => r.provider.name === ref.provider);
    if (!model || !route) throw DomainError.internal(`${ref.model} via ${ref.provider} is no longer in the catalog`);
    return {
      model,
      route,
      byok: ref.byok,
      fields: ref.fields,
      ...(answered.toolPrices ? { toolPrices: answered.toolPrices } : {}),
      ...(reservation.batchLine ? { discountPercent: model.batchDiscountPercent } : {}),
    };
  }

  /** Decides `command` on the hold's account, in a span; resolves with the amount the generation was charged in all. */
  private async charge(reservation: Reservation, target: PricedTarget, command: ChargeCommand): Promise<Nano> {
    const charged = await this.traced(
      'charge',
      () => settleAttributes(reservation, target),
      async (span) => {
        const settled = await this.deps.ledger(reservation.accountId, command, reservation.metadata);
        const amount = chargedBy(settled.events, command);
        span?.setAttribute(ATTR.amountNano, Number(amount));
        return amount;
      },
    );
    if (charged > 0n) this.deps.observer?.charged(reservation.id, charged);
    return charged;
  }

  /**
   * `settle` for output the client already has (a stream, a realtime response): the charge
   * must land whatever happens (issue 41 A). It is retried while the store is unreachable or
   * the account too busy; if it still cannot land, it is kept durably (`unsettled`) for the
   * hold reaper, which charges it, never just releases the hold. Resolves with the amount
   * charged or to be charged.
   */
  async settleDelivered(metered: Metered, target: Target, settlement: Settlement): Promise<Nano> {
    const { reservation } = metered;
    // An attempt that lost its connection may have committed: a hold found settled on a retry was settled by it.
    const landed = async () => this.chargeOf(target, settlement);
    try {
      return await settleDurably(() => this.settleOnce(metered, target, settlement), landed);
    } catch (err) {
      const { unsettled } = this.deps;
      if (!unsettled || err instanceof DomainError) throw err;
      const command = this.chargeCommand(reservation, target, settlement);
      await unsettled.record({ holdId: reservation.id, accountId: reservation.accountId, command });
      this.deps.warn(`${reservation.id}: charge not landed yet (${(err as Error).message}); kept for the hold reaper`);
      return landed();
    }
  }

  /** The ChargeUsage command of a settlement: what was used, priced at the target that answered, explained line by line. */
  chargeCommand(reservation: Reservation, target: PricedTarget, settlement: Settlement): ChargeCommand {
    return this.charges.chargeCommand(reservation, target, settlement);
  }

  /** The output tokens count against the caller's tokens per minute once the call is settled. */
  private countOutput(metered: Metered, settlement: Settlement): void {
    const output = settlement.usage.output ?? 0;
    if (metered.recordOutputTokens && output > 0) {
      metered
        .recordOutputTokens(output)
        .catch((err: unknown) => this.deps.warn(`${metered.reservation.id}: output tokens not counted against the rate limit: ${(err as Error).message}`));
    }
  }

  /** Releases the hold of a call that failed: nothing is billed (spec 1 rule 3). */
  async release(reservation: Reservation, target: Target, err: unknown, latencyMs: number, errorCode?: string): Promise<void> {
    const status = err instanceof ProviderError ? err.status : undefined;
    const code = errorCode ?? (status === undefined ? 'upstream_error' : `upstream_${status}`);
    const releaseAttributes = () => ({ ...settleAttributes(reservation, target), [ATTR.amountNano]: 0, [ATTR.errorCode]: code });
    await this.traced('release', releaseAttributes, () =>
      this.deps.ledger(
        reservation.accountId,
        {
          type: 'ReleaseHold',
          holdId: reservation.id,
          errorCode: code,
          stats: { ...who(reservation, target), latency_ms: Math.round(latencyMs) },
        },
        reservation.metadata,
      ),
    );
  }

  /**
   * A generation that moves no money: a free call's (spec 4.13), or a response cache hit's
   * (spec 4.2), which names the generation it replayed. Its id can then be looked up like any
   * other (issue 15.2).
   */
  async recordFree(
    caller: Caller,
    free: { id: string; endpoint: string; model?: string; provider?: string; sourceId?: string; latencyMs?: number; clientRequestId?: string },
  ): Promise<void> {
    const metadata: EventMetadata = {
      actor: `key:${caller.keyId}`,
      correlationId: free.id,
      ...(free.clientRequestId ? { client_request_id: free.clientRequestId } : {}),
    };
    const { id: generationId, endpoint, model, provider, sourceId, latencyMs } = free;
    await this.deps.ledger(
      caller.accountId,
      { type: 'RecordFreeGeneration', generationId, keyId: caller.keyId, endpoint, model, provider, sourceId, latencyMs },
      metadata,
    );
  }

  /** What `settle` charges for `settlement`: its cost, or nothing when nothing was returned (spec 1 rule 3). */
  chargeOf(target: PricedTarget, settlement: Pick<Settlement, 'usage' | 'returned'>): Nano {
    return this.charges.chargeOf(target, settlement);
  }

  /**
   * `fn` in a span of the current request's trace when this process traces (issue 22); else
   * just `fn`, its attributes never built.
   */
  private traced<T>(name: string, attributes: () => Attributes, fn: (span?: Span) => Promise<T>): Promise<T> {
    const { tracing } = this.deps;
    return tracing ? tracing.span(name, attributes(), fn) : fn();
  }

  /** The lines of the charge for `usage` on `target`, and the provider's cost (issue 23). */
  explainCharge(target: PricedTarget, usage: MeterUsage): ExplainedCharge {
    return this.charges.explainCharge(target, usage);
  }

  /** The charge for `usage` on `target`, as settle would make it. */
  costOf(target: PricedTarget, usage: MeterUsage): Nano {
    return this.charges.costOf(target, usage);
  }

  /** What the generation record shows of a settlement: who answered and the token counts. */
  statsOf(
    reservation: Pick<Reservation, 'endpoint'>,
    target: PricedTarget,
    settlement: Pick<Settlement, 'usage' | 'reasoningTokens'>,
  ): Omit<GenerationStats, 'latency_ms' | 'ttft_ms'> {
    return this.charges.statsOf(reservation, target, settlement);
  }
}
