import { DomainError } from '@svc/eventstore';
import { PeriodicTask } from '@svc/platform';
import type { AccountCommand, GenerationStats } from './account';
import type { CostLine, MeterUsage } from './pricing';

/**
 * An open hold whose serving process is gone, or whose final charge could not land, with the
 * usage last recorded of it (`charge`: the rest of the final charge, meters and cost lines).
 */
export interface Orphan {
  holdId: string;
  accountId: string;
  progress: {
    amountNano: bigint;
    stats: GenerationStats;
    charge?: { usage?: MeterUsage; lines?: CostLine[]; provider_cost_nano?: string | null; returned?: number };
  } | null;
}

export interface HoldReaperPorts {
  /** Open holds placed by processes whose lease has lapsed (a read model; may lag). */
  orphans(): Promise<Orphan[]>;
  /** Decides a command on the account (the same path as every other ledger command). */
  execute(accountId: string, command: AccountCommand): Promise<void>;
  /** Drops what was recorded of a hold once it is settled. */
  forget(holdId: string): Promise<void>;
  /** Housekeeping after each pass. */
  prune(): Promise<void>;
}

/**
 * Spec 1 rules 3 and 4 for a process that died mid-request: what it recorded as delivered is
 * charged (a stream's client got that output), and a hold of which it recorded no output is
 * released, since nothing is known to have been delivered.
 */
export function reapCommand(orphan: Orphan): AccountCommand {
  const { progress } = orphan;
  const { charge } = progress ?? {};
  // `reaped`: the process may be alive after all (issue 41 D) and may still charge what it delivered.
  if (progress === null || (charge === undefined && progress.stats.completion_tokens === 0))
    return { type: 'ReleaseHold', holdId: orphan.holdId, errorCode: 'gateway_lost', reaped: true };
  // A final charge goes as it was decided; the ledger still releases one that returned nothing.
  return {
    type: 'ChargeUsage',
    holdId: orphan.holdId,
    amountNano: progress.amountNano,
    stats: progress.stats,
    ...(charge?.usage === undefined ? {} : { usage: charge.usage }),
    ...(charge?.lines === undefined ? {} : { lines: charge.lines }),
    ...(charge?.provider_cost_nano == null ? {} : { providerCostNano: BigInt(charge.provider_cost_nano) }),
    ...(charge?.returned === undefined ? {} : { returned: charge.returned }),
    reaped: true,
  };
}

/**
 * Settles the holds of serving processes that died (issue 14.10) as soon as their lease lapses,
 * instead of when the holds expire 15 minutes after the upstream timeout. The account decides:
 * a hold settled meanwhile (by its process, alive after all, or another reaper) is refused as
 * not found and left alone, so no hold is settled twice.
 */
export class HoldReaper {
  private readonly task: PeriodicTask;

  constructor(
    private readonly ports: HoldReaperPorts,
    intervalMs = 5_000,
  ) {
    this.task = new PeriodicTask(() => this.reapOnce(), intervalMs);
  }

  /** One pass; resolves with the holds it settled. */
  async reapOnce(): Promise<number> {
    let settled = 0;
    for (const orphan of await this.ports.orphans()) {
      try {
        await this.ports.execute(orphan.accountId, reapCommand(orphan));
        settled++;
      } catch (err) {
        if (!(err instanceof DomainError && (err.code === 'hold_not_open' || err.code === 'account_not_found'))) throw err;
      }
      await this.ports.forget(orphan.holdId);
    }
    await this.ports.prune();
    return settled;
  }

  start(onError: (err: unknown) => void = (err) => console.error('hold reaper failed:', err)): void {
    this.task.start(onError);
  }

  stop(): Promise<void> {
    return this.task.stop();
  }
}
