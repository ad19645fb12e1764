import { AggregateStore, SqlEventStore } from '@svc/eventstore';
import { accountDecider, accountStream, HoldReaper, type AccountCommand } from '@svc/ledger';
import { stats } from '@svc/ledger/testing/account-fixtures';
import { ManualClock, type SqlRunner } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import { forgetProgress, GatewayLease, initInFlight, orphanedHolds, pruneInFlight, recordProgress, recordUnsettled } from './in-flight';
import { ProjectionRunner } from '@svc/projections';
import { creditsProjection } from './read-models/credits';

/**
 * Issue 41 A: a charge for delivered output must land whatever happens. When a gateway cannot
 * land one in time it keeps the whole charge (recordUnsettled); the hold reaper lands it as it
 * was decided, meters and cost lines included, while that gateway still lives.
 */
describe('issue 41 A: the hold reaper lands a final charge its gateway could not', () => {
  let sql: SqlRunner;
  let store: SqlEventStore;
  let aggregates: AggregateStore;
  let runner: ProjectionRunner;
  let lease: GatewayLease;
  let reaper: HoldReaper;
  // The reaper reads the database's clock (leases, expiry): holds are placed at its time.
  const clock = new ManualClock(new Date());

  beforeAll(async () => {
    sql = await freshPgRunner('inflight');
    store = new SqlEventStore(sql);
    await store.init();
    await initInFlight(sql);
    runner = new ProjectionRunner(sql, store, [creditsProjection]);
    await runner.init();
    aggregates = new AggregateStore(store, clock);
    lease = new GatewayLease(sql);
    await lease.start();
    reaper = new HoldReaper({
      orphans: () => orphanedHolds(sql),
      execute: async (accountId, command) => void (await aggregates.handle(accountDecider, accountStream(accountId), command, { actor: 'hold-reaper' })),
      forget: (holdId) => forgetProgress(sql, holdId),
      prune: () => pruneInFlight(sql),
    });
  });

  afterAll(async () => {
    await lease.stop();
    await store.close();
    await sql.close();
  });

  async function openHold(accountId: string, holdId: string): Promise<void> {
    const stream = accountStream(accountId);
    const run = (command: AccountCommand, metadata = {}) => aggregates.handle(accountDecider, stream, command, metadata);
    await run({ type: 'OpenAccount', accountId });
    await run({ type: 'AddCredits', amountNano: 1_000_000n, reason: 'signup' });
    // Placed by this live gateway, as a request's hold is.
    await run(
      { type: 'PlaceHold', holdId, keyId: 'k1', amountNano: 10_000n, model: 'm', endpoint: '/v1/chat/completions', ttlMs: 600_000 },
      { gateway: lease.id },
    );
    // The reaper finds holds in the read model.
    await runner.catchUpAll();
  }

  const finalCharge = (holdId: string): Extract<AccountCommand, { type: 'ChargeUsage' }> => ({
    type: 'ChargeUsage',
    holdId,
    amountNano: 4_200n,
    stats: stats({ prompt_tokens: 10, completion_tokens: 32, cached_tokens: 4 }),
    usage: { input: 6, cached_input: 4, output: 32 },
    lines: [
      { meter: 'input', quantity: 6, unit_price_usd: '0.0000001', amount_nano: '600' },
      { meter: 'cached_input', quantity: 4, unit_price_usd: '0.00000005', amount_nano: '200' },
      { meter: 'output', quantity: 32, unit_price_usd: '0.0000001', amount_nano: '3400' },
    ],
    providerCostNano: 2_100n,
  });

  it('leaves a live gateway its hold while the stream only records progress', async () => {
    await openHold('live', 'h-live');
    await recordProgress(sql, { holdId: 'h-live', accountId: 'live', amountNano: 900n, stats: stats({ completion_tokens: 9 }) });
    expect((await orphanedHolds(sql)).map((o) => o.holdId)).not.toContain('h-live');
    expect(await reaper.reapOnce()).toBe(0);
  });

  it('charges what was recorded of a hold due to expire rather than letting it expire unbilled', async () => {
    await openHold('due', 'h-due');
    await recordProgress(sql, { holdId: 'h-due', accountId: 'due', amountNano: 900n, stats: stats({ completion_tokens: 9 }) });
    await sql.query(`UPDATE credit_holds SET expires_at = now() - interval '1 second' WHERE hold_id = 'h-due'`);
    expect(await reaper.reapOnce()).toBe(1);
    const events = await store.readStream(accountStream('due'));
    expect(events.filter((e) => e.type === 'UsageCharged').map((e) => (e.data as { amount_nano: string }).amount_nano)).toEqual(['900']);
    expect(events.filter((e) => e.type === 'HoldExpired')).toEqual([]);
  });

  it('charges a final charge as it was decided once its short grace is over, though its gateway lives', async () => {
    await openHold('final', 'h-final');
    const command = finalCharge('h-final');
    await recordUnsettled(sql, { holdId: 'h-final', accountId: 'final', command });
    // Within the grace its own process may still land it.
    expect((await orphanedHolds(sql)).map((o) => o.holdId)).not.toContain('h-final');
    await sql.query(`UPDATE stream_progress SET recorded_at = now() - interval '6 seconds' WHERE hold_id = 'h-final'`);
    expect(await reaper.reapOnce()).toBe(1);
    const charged = (await store.readStream(accountStream('final'))).filter((e) => e.type === 'UsageCharged');
    expect(charged).toHaveLength(1);
    expect(charged[0].data).toMatchObject({
      hold_id: 'h-final',
      amount_nano: '4200',
      usage: command.usage,
      lines: command.lines,
      provider_cost_nano: '2100',
      completion_tokens: 32,
      cached_tokens: 4,
    });
    expect(charged[0].metadata).toMatchObject({ actor: 'hold-reaper' });
    // Landed once: its own process, trying again, charges nothing more (issue 41 D).
    expect((await aggregates.handle(accountDecider, accountStream('final'), command)).events).toEqual([]);
    await runner.catchUpAll();
    expect(await reaper.reapOnce()).toBe(0);
  });
});
