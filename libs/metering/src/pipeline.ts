import type { Catalog, CatalogModel } from '@svc/catalog';
import type { EventMetadata, Handled } from '@svc/eventstore';
import { StreamContentionError } from '@svc/eventstore';
import type { Caller } from '@svc/identity';
import type { AccountCommand, AccountEvent, AccountState, GenerationStats } from '@svc/ledger';
import { billedAmount, BYOK_SUFFIX } from '@svc/ledger';
import type { Clock, Nano } from '@svc/platform';
import { DomainError, isConnectionFailure, randomHex } from '@svc/platform';
import type { Provider } from '@svc/providers';
import { ProviderError } from '@svc/providers';
import { ATTR, type Attributes, type Span, type Tracing } from '@svc/telemetry';
import { byokKeyRejected } from './byok';
import { explainCharge, type CostLine, type ExplainedCharge } from './cost-lines';
import { markFailedGeneration } from './failed-generation';
import { recordedMeters, type MeterUsage } from './meters';
import {
  allFailed,
  costOf,
  targetsOf,
  worthAnotherTry,
  type Failure,
  type OwnProviders,
  type PricedTarget,
  type RoutedModel,
  type Target,
  type ToolPrices,
} from './targets';

/** A hold nobody settles (crash) outlives the upstream timeout by this much before expiry. */
const HOLD_GRACE_MS = 15 * 60_000;

/** A generation's id (spec 1 rule 2), also its hold's: `gen-` and 24 random hex digits. */
export const newGenerationId = (): string => `gen-${randomHex(12)}`;

/**
 * One way to answer, as plain data: which model through which provider, on whose key. Enough
 * to find the live target again in another process (see MeteredCalls.targetsOf).
 */
export interface TargetRef {
  model: string;
  provider: string;
  byok: boolean;
  fields: Record<string, unknown>;
}

/**
 * A billed call between its hold and its settlement, as plain data (ARCHITECTURE section 10):
 * a job or a realtime session can keep it and settle it later, in another process.
 */
export interface Reservation {
  /** The hold's id, and the generation's: the id the caller is given. */
  id: string;
  accountId: string;
  keyId: string;
  endpoint: string;
  /** The primary model's providers, then each fallback's, in the order to try them. */
  targets: TargetRef[];
  /** The input as the gateway counted it: billed when a provider reports no usage of its own. */
  promptTokens: number;
  /** Nano-USD held, as a decimal string (JSON has no integers past 2^53). */
  heldNano: string;
  /** The event metadata every decision of this call carries (actor, correlation, end user...). */
  metadata: EventMetadata;
  /** A batch line's (spec 1 rule 6): priced at each model's batch discount. */
  batchLine?: true;
}

/** What releasing a hold needs of its reservation: a batch line's abandoned attempt has only these. */
export type HeldReservation = Pick<Reservation, 'id' | 'accountId' | 'keyId' | 'endpoint' | 'metadata'>;

/**
 * Which of a reservation's targets answered, by name, and the server tools it ran at their
 * prices (absent when none ran): what pricing the call needs once its client is gone.
 */
export interface AnsweredBy extends Pick<TargetRef, 'model' | 'provider' | 'byok'> {
  toolPrices?: ToolPrices;
}

/**
 * A charge decided already, recorded as it stands: a video's, priced when it completed (at
 * most its hold, spec 1 rule 1) and kept on its stream. `lines` explain it, adding up to it;
 * null when they cannot, and it is recorded without them.
 */
export interface DecidedCharge {
  amountNano: Nano;
  usage: MeterUsage;
  lines: CostLine[] | null;
  providerCostNano: Nano | null;
  latencyMs: number;
  /** What the call returned; 0 is nothing, and is not billed (spec 1 rule 3). */
  returned: number;
}

/** A reservation with what this process needs to run it: live provider clients, and the caller's token window. */
export interface Metered {
  reservation: Reservation;
  targets: Target[];
  /** Response headers the reservation produced (deprecation notices, the tokens window). */
  headers: Record<string, string>;
  /** Counts output tokens against the caller's tokens per minute; absent when rate limits are off. */
  recordOutputTokens?: (tokens: number) => Promise<void>;
}

/** The spec 8 tokens-per-minute window of a caller, as the edge keeps it. */
export interface TokenLimits {
  /** Counts the prompt before anything is held; resolves with the window's response headers. */
  consumePrompt(caller: Caller, tokens: number): Promise<Record<string, string>>;
  recordOutput(caller: Caller, tokens: number): Promise<void>;
}

export interface MeteringDeps {
  clock: Clock;
  catalog: Catalog;
  /** The operator's provider clients, by catalog provider name. */
  providers: ReadonlyMap<string, Provider>;
  /** The accounts' own provider clients (BYOK): OwnProviders, which opens their sealed keys. */
  own: Pick<OwnProviders, 'resolver'>;
  byokFeePercent: number;
  upstreamTimeoutMs: number;
  /** Decides `command` on the account's stream (the command bus, in a gateway). */
  ledger(accountId: string, command: AccountCommand, metadata: EventMetadata): Promise<Handled<AccountState, AccountEvent>>;
  tokenLimits: TokenLimits;
  /** The lease of the serving process, named in HoldPlaced's metadata so the hold reaper knows whom it waits for. */
  leaseId(): string | undefined;
  warn(message: string): void;
  /** Told of every upstream call and every charge (the process's metrics); O(1), no I/O. */
  observer?: MeteringObserver;
  /** Issue 22: spans of the hold, each upstream call and the charge or release; absent when the process does not trace. */
  tracing?: Tracing | null;
  /**
   * Where a charge for delivered output that could not land in time is kept for the hold reaper
   * to land (issue 41 A): durable, outside the account's stream. Absent: such a charge fails.
   */
  unsettled?: UnsettledCharges;
}

type ChargeCommand = Extract<AccountCommand, { type: 'ChargeUsage' }>;

/** A charge decided but not yet in the log: the command the account is to decide, as data. */
export interface UnsettledCharge {
  holdId: string;
  accountId: string;
  command: ChargeCommand;
}

export interface UnsettledCharges {
  record(charge: UnsettledCharge): Promise<void>;
}

/**
 * What the pipeline reports as it runs (issue 22): each upstream call, answered or failed, with
 * its time, and each charge this process records, by generation id (the request log finds its
 * generation's by the id it answered with). Implemented by the process's metrics.
 */
export interface MeteringObserver {
  upstreamAnswered(generationId: string, provider: string, operation: string, seconds: number): void;
  upstreamFailed(generationId: string, provider: string, operation: string, seconds: number, error: unknown): void;
  charged(generationId: string, amountNano: bigint): void;
}

/**
 * What the edge knows of a request that its billed call records: the client's request id
 * (spec 4), and its Idempotency-Key hashed with its API key and its body's fingerprint, which
 * the account decides with the hold (issue 41 B).
 */
export interface RequestTags {
  clientRequestId?: string;
  idempotency?: { key: string; fingerprint: string };
}

/** What a call asks to hold (spec 1 rule 1): the models that may answer, and its worst case by meter. */
export interface Plan {
  models: readonly RoutedModel[];
  /** Headers of the requested model (deprecation notices, spec 9). */
  headers: Record<string, string>;
  /** The input as the gateway counts it (tokens): counted against the tokens per minute, billed when the provider reports none. */
  promptTokens: number;
  /** The most the call may use, by meter. */
  worstCase: MeterUsage;
  endpoint: string;
  /** The end user's id (safety_identifier / user), recorded with the events. */
  user?: unknown;
  clientRequestId?: string;
  /** The preset the request used (spec 2.5), recorded with the events as the client's request id is. */
  preset?: { slug: string; version: number };
  /** Decided with the hold (see RequestTags). */
  idempotency?: RequestTags['idempotency'];
}

/** How trying a call's targets went: the first answer, or the failure to report (`cause` is the last provider's own error). */
export type Tried<T> = { answered: true; target: Target; value: T } | { answered: false; target: Target; cause: unknown; error: unknown; errorCode?: string };

export interface ReserveOptions {
  /** Spec 8 tokens per minute; off for work outside the per-minute limits (spec 1 rule 6: batches). */
  rateLimits?: boolean;
  /**
   * Work that outlives its request (a batch line, spec 1 rule 6; a video, spec 4.15): outside
   * the per-minute limits, under the hold id its job chose (a batch line names one per attempt,
   * so its worker knows which hold is whose). No serving process's lease vouches for the hold:
   * a worker settles it, or releases it, or another worker does after a crash, within `ttlMs`.
   * `batchDiscount`: priced at each model's batch discount (a batch line's).
   */
  job?: { holdId: string; ttlMs: number; batchDiscount?: boolean };
}

/** What a call used and how it went, once it is done. */
export interface Settlement {
  usage: MeterUsage;
  /** Inside `output`: reported separately on the generation (spec 2.6). */
  reasoningTokens?: number;
  latencyMs: number;
  ttftMs: number | null;
  /**
   * What the call returned, in its own units (vectors, images, characters of audio...); absent:
   * its output tokens. Nothing returned is not billed (spec 1 rule 3).
   */
  returned?: number;
}

/**
 * ARCHITECTURE section 10: every model call, whatever its interface and billing unit, runs
 * `reserve -> attempt -> settle` here. Reserve holds the worst case on the account (spec 1 rule
 * 1); attempt tries the targets in order (spec 4.2 rule 6: fallbacks, routing, BYOK), releasing
 * the hold when none answers (rule 3); settle charges what was used, by meter, or releases the
 * hold when nothing was returned. Two appends per call, as before the pipeline existed.
 */
export class MeteredCalls {
  constructor(private readonly deps: MeteringDeps) {}

  async reserve(caller: Caller, plan: Plan, options: ReserveOptions = {}): Promise<Metered> {
    const { deps } = this;
    const { job } = options;
    const batchLine = job?.batchDiscount === true;
    const rateLimits = job ? false : (options.rateLimits ?? true);
    // Spec 8: the prompt counts against the key's tokens per minute before anything is held.
    // A call with no text input (an audio file, a prompt-less form) has nothing to count yet.
    const windowHeaders = rateLimits && plan.promptTokens > 0 ? await deps.tokenLimits.consumePrompt(caller, plan.promptTokens) : {};
    // BYOK: the account's own keys (read with the caller's key) replace the operator's for their providers.
    const targets = discounted(targetsOf(plan.models, deps.providers, deps.own.resolver(caller.accountId, caller.sealedProviderKeys)), batchLine);
    const id = job?.holdId ?? newGenerationId();
    const leaseId = job ? undefined : deps.leaseId();
    // Ids, not content: the end user's id and the client's request id go with the events.
    const metadata: EventMetadata = {
      actor: `key:${caller.keyId}`,
      correlationId: id,
      ...(plan.clientRequestId ? { client_request_id: plan.clientRequestId } : {}),
      ...(typeof plan.user === 'string' ? { user: plan.user } : {}),
      ...(plan.preset ? { preset: plan.preset.slug, preset_version: plan.preset.version } : {}),
      // The process whose lease vouches for the hold: once it lapses, the hold is reaped.
      ...(leaseId ? { gateway: leaseId } : {}),
    };
    // Spec 1 rule 1: hold the worst case before anything is spent. Any target may answer, so
    // the hold covers the dearest; it is held once and settled once. A BYOK target holds only its fee.
    const held = targets.map((t) => costOf(t, plan.worstCase, deps.byokFeePercent)).reduce((a, b) => (b > a ? b : a));
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
        ).catch(() => undefined);
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
    const tried = await this.firstAnswer(reservation.id, metered.targets, call);
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
    return this.firstAnswer(id, targets, call);
  }

  /**
   * The reservation's targets with the tools priced as the engine that answered charges them:
   * the hold counted the dearest engine; the charge is the one that ran.
   */
  withToolPrices(metered: Metered, toolPrices: ToolPrices): Metered {
    return { ...metered, targets: metered.targets.map((target) => ({ ...target, toolPrices })) };
  }

  /**
   * Spec 4.2 rule 6: each target in turn until one answers. Only a provider-side failure moves
   * on; a refusal of the request, or of the account's own key (spec 7: not retried on the
   * operator's key at full price), ends the search, as does the last failure.
   */
  private async firstAnswer<T>(id: string, targets: readonly Target[], call: (target: Target) => Promise<T>): Promise<Tried<T>> {
    const failures: Failure[] = [];
    const { observer, tracing } = this.deps;
    for (const [i, target] of targets.entries()) {
      // The one place providers are called: each try timed, by provider and operation (the model's type).
      const started = performance.now();
      try {
        const value = await (tracing
          ? tracing.upstream(`upstream ${providerName(target)}`, upstreamAttributes(id, target, i + 1), () => call(target))
          : call(target));
        observer?.upstreamAnswered(id, providerName(target), target.model.type, (performance.now() - started) / 1000);
        return { answered: true, target, value };
      } catch (err) {
        observer?.upstreamFailed(id, providerName(target), target.model.type, (performance.now() - started) / 1000, err);
        if (worthAnotherTry(err)) {
          failures.push({ target, error: err });
          this.deps.warn(`${id}: ${target.model.id} via ${target.route.provider.name} failed (${err.message}); trying the next`);
          continue;
        }
        if (target.byok && err instanceof ProviderError && err.kind === 'http' && (err.status === 401 || err.status === 403)) {
          return { answered: false, target, cause: err, error: byokKeyRejected(err, target.route.provider.name), errorCode: 'byok_key_rejected' };
        }
        return { answered: false, target, cause: err, error: err };
      }
    }
    const last = failures[failures.length - 1];
    return { answered: false, target: last.target, cause: last.error, error: allFailed(failures) };
  }

  /**
   * Charges what the call used at the prices of the target that answered (or releases the hold
   * when nothing was returned); resolves with the amount charged. The output tokens then count
   * against the caller's tokens per minute.
   */
  async settle(metered: Metered, target: Target, settlement: Settlement): Promise<Nano> {
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
    const command = 'amountNano' in charge ? this.decidedCommand(reservation, target, charge) : this.chargeCommand(reservation, target, charge);
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

  /** The ChargeUsage command of a charge decided already: its amount as it stands, its lines when they add up to it. */
  private decidedCommand(reservation: Reservation, target: PricedTarget, charge: DecidedCharge): ChargeCommand {
    const { amountNano, usage, lines, providerCostNano, latencyMs, returned } = charge;
    return {
      type: 'ChargeUsage',
      holdId: reservation.id,
      amountNano,
      stats: { ...this.statsOf(reservation, target, { usage }), latency_ms: Math.max(0, Math.round(latencyMs)), ttft_ms: null },
      usage,
      returned,
      ...(lines === null ? {} : { lines, providerCostNano }),
    };
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
      return await settleDurably(() => this.settle(metered, target, settlement), landed);
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
    const amountNano = this.costOf(target, settlement.usage);
    const { lines, providerCostNano } = this.explain(reservation.id, target, settlement.usage, amountNano);
    return {
      type: 'ChargeUsage',
      holdId: reservation.id,
      amountNano,
      stats: { ...this.statsOf(reservation, target, settlement), latency_ms: Math.round(settlement.latencyMs), ttft_ms: settlement.ttftMs },
      usage: recordedMeters(settlement.usage),
      ...(lines ? { lines } : {}),
      providerCostNano,
      ...(settlement.returned === undefined ? {} : { returned: settlement.returned }),
    };
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
    // The settlement's `returned`, else its output tokens: what `settle` sends the ledger.
    return billedAmount(this.costOf(target, settlement.usage), settlement.returned ?? settlement.usage.output ?? 0);
  }

  /**
   * `fn` in a span of the current request's trace when this process traces (issue 22); else
   * just `fn`, its attributes never built.
   */
  private traced<T>(name: string, attributes: () => Attributes, fn: (span?: Span) => Promise<T>): Promise<T> {
    const { tracing } = this.deps;
    return tracing ? tracing.span(name, attributes(), fn) : fn();
  }

  /**
   * Issue 23: the lines of the charge `amountNano` and the provider's cost. Lines that would not
   * add up to the charge (a defect of cost-lines.ts, which its spec rules out) are left out
   * rather than recorded wrong: the charge itself stands as `costOf` makes it.
   */
  private explain(id: string, target: PricedTarget, usage: MeterUsage, amountNano: Nano): { lines: CostLine[] | undefined; providerCostNano: Nano | null } {
    const explained = this.explainCharge(target, usage);
    if (explained.amountNano === amountNano) return { lines: explained.lines, providerCostNano: explained.providerCostNano };
    this.deps.warn(`${id}: the cost lines add up to ${explained.amountNano} nano-USD, not the ${amountNano} charged; recorded without them`);
    return { lines: undefined, providerCostNano: explained.providerCostNano };
  }

  /** The lines of the charge for `usage` on `target`, and the provider's cost (issue 23). */
  explainCharge(target: PricedTarget, usage: MeterUsage): ExplainedCharge {
    return explainCharge(target, usage, this.deps.byokFeePercent);
  }

  /** The charge for `usage` on `target`, as settle would make it. */
  costOf(target: PricedTarget, usage: MeterUsage): Nano {
    return costOf(target, usage, this.deps.byokFeePercent);
  }

  /** What the generation record shows of a settlement: who answered and the token counts. */
  statsOf(
    reservation: Pick<Reservation, 'endpoint'>,
    target: PricedTarget,
    settlement: Pick<Settlement, 'usage' | 'reasoningTokens'>,
  ): Omit<GenerationStats, 'latency_ms' | 'ttft_ms'> {
    const { usage } = settlement;
    return {
      ...who(reservation, target),
      prompt_tokens: usage.input ?? 0,
      completion_tokens: usage.output ?? 0,
      cached_tokens: usage.cached_input ?? 0,
      reasoning_tokens: settlement.reasoningTokens ?? 0,
    };
  }
}

/**
 * What a ChargeUsage decision charged the generation in all: its charge; nothing when nothing was
 * returned (spec 1 rule 3: released); after the hold reaper settled the hold (issue 41 D), the
 * whole corrected charge, or the reaper's own when nothing more was delivered (no event).
 */
function chargedBy(events: readonly AccountEvent[], command: ChargeCommand): Nano {
  const [event] = events;
  if (event === undefined) return billedAmount(command.amountNano, command.returned ?? command.stats.completion_tokens);
  if (event.type === 'UsageCharged') return BigInt(event.data.amount_nano);
  if (event.type === 'UsageCorrected') return BigInt(event.data.total_nano);
  return 0n;
}

/** Spec 1 rule 6: a batch line's targets, each at its model's batch discount. */
function discounted(targets: Target[], batchLine: boolean): Target[] {
  return batchLine ? targets.map((t) => ({ ...t, discountPercent: t.model.batchDiscountPercent })) : targets;
}

/**
 * A BYOK generation records its provider as `<name>:byok`: GenerationStats has no field for it
 * yet, and the suffix keeps BYOK usage apart in the activity figures.
 */
function who(reservation: Pick<Reservation, 'endpoint'>, target: PricedTarget) {
  return { model: target.model.id, provider: providerName(target), endpoint: reservation.endpoint };
}

/** Who a span's decision is about: ids only (issue 22: never content or a secret). */
function ids(generationId: string, accountId: string, keyId: string): Attributes {
  return { [ATTR.generationId]: generationId, [ATTR.accountId]: accountId, [ATTR.keyId]: keyId };
}

function settleAttributes(reservation: Reservation, target: PricedTarget): Attributes {
  return {
    ...ids(reservation.id, reservation.accountId, reservation.keyId),
    [ATTR.provider]: providerName(target),
    [ATTR.model]: target.model.id,
    [ATTR.endpoint]: reservation.endpoint,
  };
}

/** An upstream call's span: which provider serves which model for what, and which try this is (fallbacks make several). */
function upstreamAttributes(generationId: string, target: Target, attempt: number): Attributes {
  return {
    [ATTR.generationId]: generationId,
    [ATTR.provider]: providerName(target),
    [ATTR.model]: target.model.id,
    [ATTR.operation]: target.model.type,
    [ATTR.attempt]: attempt,
  };
}

const providerName = (target: PricedTarget) => (target.byok ? `${target.route.provider.name}${BYOK_SUFFIX}` : target.route.provider.name);

/** The ledger's answer to a charge or release of a hold already settled (or released): for a job that repeats one, done before. */
export function isHoldNotOpen(err: unknown): boolean {
  return err instanceof DomainError && err.code === 'hold_not_open';
}

/** How often, and how long in all (about 30 s), a settlement is retried while the store is unreachable or the account too busy. */
const SETTLE_RETRIES = 9;

/**
 * A settlement that must land: a stream's client has the output already, and a hold left open
 * would be released unbilled when it expires. While the database cannot be reached it is
 * retried with backoff; an attempt that lost its connection may have committed, so a hold
 * found no longer open on a retry is taken as settled by it (`landed`).
 */
export async function settleDurably<T>(attempt: () => Promise<T>, landed: () => Promise<T>): Promise<T> {
  let unreachable = false;
  for (let i = 0; ; i++) {
    try {
      return await attempt();
    } catch (err) {
      if (unreachable && isHoldNotOpen(err)) return landed();
      const contended = err instanceof StreamContentionError;
      if (!(isConnectionFailure(err) || contended) || i >= SETTLE_RETRIES) throw err;
      // Contention writes nothing: only a lost connection leaves the attempt's fate unknown.
      if (!contended) unreachable = true;
      await new Promise((resolve) => setTimeout(resolve, Math.min(250 * 2 ** i, 5_000)));
    }
  }
}
