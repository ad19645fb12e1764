import type { Client } from 'pg';
import { PgSqlRunner } from '@svc/platform';
import { AuthCache, type LeaseTimings } from './auth-cache';

/**
 * The lease connection of a gateway's authentication cache LISTENs too: while PostgreSQL stays
 * unreachable it is opened again with growing delays (capped at a lease), not at a fixed pace
 * by every gateway at once. Its return after one lost connection is auth-cache.spec.ts's.
 */
describe('authentication cache lease: a server that stays unreachable', () => {
  it('is tried again with doubling delays up to a lease, and nothing is raised uncaught', async () => {
    // Nothing listens on port 1: every connect is refused at once.
    const runner = await PgSqlRunner.connect({ connectionString: 'postgres://postgres@127.0.0.1:1/none' });
    const session = runner.session.bind(runner);
    let attempts = 0;
    runner.session = (...args: Parameters<PgSqlRunner['session']>): Client => {
      attempts++;
      return session(...args);
    };
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => void uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    const timings: LeaseTimings = { leaseMs: 320, renewMs: 100, marginMs: 50, retryMs: 20 };
    const cache = await AuthCache.open(runner, { timings });
    try {
      await new Promise((resolve) => setTimeout(resolve, 1200));
      // Attempts at about 0, 20, 60, 140, 300, 620 and 940 ms; a fixed 20 ms would be some 50.
      expect(attempts).toBeGreaterThanOrEqual(3);
      expect(attempts).toBeLessThanOrEqual(9);
      expect(cache.serving()).toBe(false);
      // Said once when the lease was lost, not at every attempt.
      expect(warn).toHaveBeenCalledTimes(1);
    } finally {
      await cache.close();
      warn.mockRestore();
      process.off('uncaughtException', onUncaught);
      await runner.close();
    }
    expect(uncaught).toEqual([]);
  });
});
