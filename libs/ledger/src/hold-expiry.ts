import type { Clock } from '@svc/platform';
import { PeriodicTask } from '@svc/platform';
import { EXPIRE_BATCH } from './account';

export interface HoldExpiryPorts {
  /** Accounts that may have a hold open past its expiry at `now` (a read model; may lag). */
  dueAccounts(now: Date): Promise<string[]>;
  /** Sends ExpireHolds to one account; returns how many holds it expired. */
  expire(accountId: string): Promise<number>;
  clock: Clock;
}

/**
 * Holds never leak (issue: ledger): a hold whose request never settled (a crashed process) is
 * expired by the worker once its `expires_at` passes. The decision is the account's own, on its
 * own state, so a stale read model costs at most an ExpireHolds that expires nothing.
 */
export class HoldExpirySweeper {
  private readonly task: PeriodicTask;

  constructor(
    private readonly ports: HoldExpiryPorts,
    intervalMs = 30_000,
  ) {
    this.task = new PeriodicTask(() => this.sweepOnce(), intervalMs);
  }

  /** One pass over every due account; returns the number of holds expired. */
  async sweepOnce(): Promise<number> {
    let expired = 0;
    for (const accountId of await this.ports.dueAccounts(this.ports.clock.now())) {
      // One decision expires at most EXPIRE_BATCH holds (the append size limit): repeat while full.
      for (let n = EXPIRE_BATCH; n >= EXPIRE_BATCH; expired += n) n = await this.ports.expire(accountId);
    }
    return expired;
  }

  start(onError: (err: unknown) => void = (err) => console.error('hold expiry failed:', err)): void {
    this.task.start(onError);
  }

  stop(): Promise<void> {
    return this.task.stop();
  }
}
