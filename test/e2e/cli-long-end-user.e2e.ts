import { randomBytes } from 'node:crypto';
import { AggregateStore, SqlEventStore } from '@svc/eventstore';
import { accountDecider, accountStream, type GenerationStats } from '@svc/ledger';
import { ManualClock, PgSqlRunner } from '@svc/platform';
import { cliHarness } from '../support/cli';

const stats: GenerationStats = {
  model: 'sim/echo',
  provider: 'sim',
  endpoint: '/v1/chat/completions',
  prompt_tokens: 4,
  completion_tokens: 2,
  cached_tokens: 0,
  reasoning_tokens: 0,
  latency_ms: 5,
  ttft_ms: null,
};

/**
 * Issue 41 C: `projections rebuild activity` failed on the charge of a request whose end user
 * was 3 KB of random text (its index row too large for PostgreSQL), and so did every later try.
 */
describe('operator CLI: rebuilding activity over a request with a 3 KB end user (issue 41 C)', () => {
  const harness = cliHarness('cli_long_user');
  const cli = harness.run;
  const longUser = randomBytes(3000).toString('base64url').slice(0, 3000);

  beforeAll(async () => {
    const sql = await PgSqlRunner.connect({ connectionString: harness.url, max: 2 });
    const store = new SqlEventStore(sql);
    await store.init();
    const aggregates = new AggregateStore(store, new ManualClock());
    const account = (command: Parameters<typeof accountDecider.decide>[0], metadata = {}) =>
      aggregates.handle(accountDecider, accountStream('u1'), command, metadata);
    await account({ type: 'OpenAccount', accountId: 'u1' });
    await account({ type: 'AddCredits', amountNano: 1_000_000n, reason: 'signup' });
    for (const [holdId, user] of [
      ['h-long', longUser],
      ['h-short', 'short-user'],
    ]) {
      await account(
        { type: 'PlaceHold', holdId, keyId: 'k1', amountNano: 1000n, model: 'sim/echo', endpoint: '/v1/chat/completions', ttlMs: 60_000 },
        { user },
      );
      await account({ type: 'ChargeUsage', holdId, amountNano: 100n, stats });
    }
    await store.close();
    await sql.close();
  }, 30_000);

  it('gets past it, records it under its end user, and sets nothing aside', async () => {
    expect(await cli('projections', 'rebuild', 'activity')).toContain('activity: rebuilt from 6 events');
    expect(await cli('projections', 'status')).toMatch(/^activity\s+0\s+0\s+\d{20}\/\d{20}$/m);
    const sql = await PgSqlRunner.connect({ connectionString: harness.url, max: 1 });
    try {
      const { rows } = await sql.query<{ user_id: string; requests: number }>('SELECT user_id, requests FROM activity_daily ORDER BY length(user_id)');
      expect(rows).toEqual([
        { user_id: 'short-user', requests: 1 },
        { user_id: longUser, requests: 1 },
      ]);
    } finally {
      await sql.close();
    }
  });
});
