import { AggregateStore, SqlEventStore, fold } from '@svc/eventstore';
import { accountDecider, accountStream, budgetBucket, budgetHeldNano, budgetSpendOf, chargedIn, type AccountCommand, type Budget } from '@svc/ledger';
import { ManualClock, type SqlRunner } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import { ProjectionRunner } from '@svc/projections';
import { budgetSpendProjection, budgetWindow } from './budget-spend';

const stats = {
  model: 'sim/echo',
  provider: 'sim',
  endpoint: '/v1/chat/completions',
  prompt_tokens: 10,
  completion_tokens: 5,
  cached_tokens: 0,
  reasoning_tokens: 0,
  latency_ms: 20,
  ttft_ms: null,
};

/**
 * Issue 44 item 5: a budget's spend is a projection of the account's log and equals what the
 * account decided against it — charges in the window, and open holds — live, and after a rebuild.
 */
describe('guardrail budget spend, projected from the account log (issue 44)', () => {
  const clock = new ManualClock(new Date('2026-11-02T10:00:00.000Z'));
  let sql: SqlRunner;
  let store: SqlEventStore;
  let aggregates: AggregateStore;

  beforeAll(async () => {
    sql = await freshPgRunner('budgetspend');
    store = new SqlEventStore(sql);
    await store.init();
    aggregates = new AggregateStore(store, clock);
  });

  afterAll(async () => {
    await store?.close();
    await sql?.close();
  });

  const org: Budget = { guardrailId: 'g_org', name: 'Org', scope: 'organization', subject: 'org1', limitNano: 1_000_000n, reset: 'daily' };
  const member: Budget = { guardrailId: 'g_m', name: 'Member', scope: 'member', subject: 'u1', limitNano: 500_000n, reset: 'never' };
  const bucket = (b: Budget) => budgetBucket(b.guardrailId, b.scope, b.subject);
  const account = (command: AccountCommand) => aggregates.handle(accountDecider, accountStream('a1'), command);

  it('equals the decider’s own figures for every budget, live and rebuilt', async () => {
    const runner = new ProjectionRunner(sql, store, [budgetSpendProjection], { idleMs: 20 });
    await runner.init();
    await account({ type: 'OpenAccount', accountId: 'a1' });
    await account({ type: 'AddCredits', amountNano: 100_000_000n, reason: 'signup' });
    const hold = (holdId: string, amountNano: bigint, budgets: Budget[], keyId = 'k1') =>
      account({ type: 'PlaceHold', holdId, keyId, amountNano, model: 'sim/echo', endpoint: '/v1/chat/completions', ttlMs: 60_000, budgets });

    await hold('h1', 200_000n, [org, member]);
    await account({ type: 'ChargeUsage', holdId: 'h1', amountNano: 120_000n, stats });
    await hold('h2', 100_000n, [org], 'k2');
    await hold('h3', 50_000n, [org, member]);
    await account({ type: 'ReleaseHold', holdId: 'h3', errorCode: 'upstream_503' });
    await hold('h4', 10_000n, []);
    await account({ type: 'ChargeUsage', holdId: 'h4', amountNano: 9_000n, stats });
    // The next day: the org's daily window starts again, the member's lifetime budget does not.
    clock.set(new Date('2026-11-03T09:00:00.000Z'));
    await hold('h5', 80_000n, [org, member]);
    await account({ type: 'ChargeUsage', holdId: 'h5', amountNano: 70_000n, stats });
    await hold('h6', 30_000n, [org, member]);

    const state = fold(accountDecider, (await store.readStream(accountStream('a1'))) as never);
    const expected = (b: Budget) => ({
      spent: chargedIn(budgetSpendOf(state, bucket(b)), b.reset, clock.now().getTime()),
      held: budgetHeldNano(state, bucket(b)),
    });
    const projected = async (b: Budget) => {
      const w = await budgetWindow(sql, bucket(b), b.reset, clock.now());
      return { spent: w.spent_nano, held: w.held_nano };
    };

    await runner.catchUpAll();
    expect(expected(org)).toEqual({ spent: 70_000n, held: 130_000n });
    expect(expected(member)).toEqual({ spent: 190_000n, held: 30_000n });
    expect(await projected(org)).toEqual(expected(org));
    expect(await projected(member)).toEqual(expected(member));
    // Yesterday's window of the org budget holds yesterday's charge alone.
    expect((await budgetWindow(sql, bucket(org), 'daily', new Date('2026-11-02T23:00:00.000Z'))).spent_nano).toBe(120_000n);

    await runner.rebuild();
    expect(await projected(org)).toEqual(expected(org));
    expect(await projected(member)).toEqual(expected(member));
    // One event per batch: every settlement meets its hold in an earlier batch, never in its own.
    await new ProjectionRunner(sql, store, [budgetSpendProjection], { batchSize: 1 }).rebuild();
    expect(await projected(org)).toEqual(expected(org));
    expect(await projected(member)).toEqual(expected(member));
  });
});
