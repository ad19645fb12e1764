import { StreamContentionError } from '@svc/eventstore';
import { DomainError, isConnectionFailure } from '@svc/platform';

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
