/**
 * What a billed call's settlement asks the account to charge (ARCHITECTURE section 10, issue 23):
 * its cost at the prices of the target that answered, or the BYOK fee on it, the meters it bills,
 * the lines that explain it, and what the generation record shows of who answered.
 */
import type { AccountEvent, GenerationStats } from '@svc/ledger';
import { billedAmount, BYOK_SUFFIX } from '@svc/ledger';
import type { Nano } from '@svc/platform';
import { explainCharge, type CostLine, type ExplainedCharge } from './cost-lines';
import type { ChargeCommand } from './metering-deps';
import { recordedMeters, type MeterUsage } from './meters';
import type { DecidedCharge, Reservation, Settlement } from './reservation';
import { costOf, type PricedTarget } from './targets';

export interface ChargesOptions {
  /** SVC_BYOK_FEE_PERCENT: what a call on the account's own key is billed, of its cost. */
  byokFeePercent: number;
  warn(message: string): void;
}

/** Prices settlements as `settle` charges them, in any process: no provider client is needed. */
export class Charges {
  constructor(private readonly options: ChargesOptions) {}

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

  /** The ChargeUsage command of a charge decided already: its amount as it stands, its lines when they add up to it. */
  decidedCommand(reservation: Reservation, target: PricedTarget, charge: DecidedCharge): ChargeCommand {
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

  /** What `settle` charges for `settlement`: its cost, or nothing when nothing was returned (spec 1 rule 3). */
  chargeOf(target: PricedTarget, settlement: Pick<Settlement, 'usage' | 'returned'>): Nano {
    // The settlement's `returned`, else its output tokens: what `settle` sends the ledger.
    return billedAmount(this.costOf(target, settlement.usage), settlement.returned ?? settlement.usage.output ?? 0);
  }

  /** The lines of the charge for `usage` on `target`, and the provider's cost (issue 23). */
  explainCharge(target: PricedTarget, usage: MeterUsage): ExplainedCharge {
    return explainCharge(target, usage, this.options.byokFeePercent);
  }

  /** The charge for `usage` on `target`, as settle would make it. */
  costOf(target: PricedTarget, usage: MeterUsage): Nano {
    return costOf(target, usage, this.options.byokFeePercent);
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

  /**
   * Issue 23: the lines of the charge `amountNano` and the provider's cost. Lines that would not
   * add up to the charge (a defect of cost-lines.ts, which its spec rules out) are left out
   * rather than recorded wrong: the charge itself stands as `costOf` makes it.
   */
  private explain(id: string, target: PricedTarget, usage: MeterUsage, amountNano: Nano): { lines: CostLine[] | undefined; providerCostNano: Nano | null } {
    const explained = this.explainCharge(target, usage);
    if (explained.amountNano === amountNano) return { lines: explained.lines, providerCostNano: explained.providerCostNano };
    this.options.warn(`${id}: the cost lines add up to ${explained.amountNano} nano-USD, not the ${amountNano} charged; recorded without them`);
    return { lines: undefined, providerCostNano: explained.providerCostNano };
  }
}

/**
 * What a ChargeUsage decision charged the generation in all: its charge; nothing when nothing was
 * returned (spec 1 rule 3: released); after the hold reaper settled the hold (issue 41 D), the
 * whole corrected charge, or the reaper's own when nothing more was delivered (no event).
 */
export function chargedBy(events: readonly AccountEvent[], command: ChargeCommand): Nano {
  const [event] = events;
  if (event === undefined) return billedAmount(command.amountNano, command.returned ?? command.stats.completion_tokens);
  if (event.type === 'UsageCharged') return BigInt(event.data.amount_nano);
  if (event.type === 'UsageCorrected') return BigInt(event.data.total_nano);
  return 0n;
}

/**
 * A BYOK generation records its provider as `<name>:byok`: GenerationStats has no field for it
 * yet, and the suffix keeps BYOK usage apart in the activity figures.
 */
export function who(reservation: Pick<Reservation, 'endpoint'>, target: PricedTarget) {
  return { model: target.model.id, provider: providerName(target), endpoint: reservation.endpoint };
}

/** The provider a generation records: `<name>:byok` on the account's own key (see `who`). */
export const providerName = (target: PricedTarget) => (target.byok ? `${target.route.provider.name}${BYOK_SUFFIX}` : target.route.provider.name);
