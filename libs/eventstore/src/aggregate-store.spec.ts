import { accountDecider, accountStream, availableNano, type AccountCommand } from '../../ledger/src/account';
import { ManualClock } from '../../platform/src/clock';
import type { SqlRunner } from '../../platform/src/sql';
import { freshPgRunner } from '../../platform/src/testing/pg';
import { AggregateStore } from './aggregate-store';
import { DomainError } from './decider';
import { UnstorableEventError } from './port';
import { SqlEventStore } from './sql-event-store';

const hold = (holdId: string, amountNano: bigint): AccountCommand => ({
  type: 'PlaceHold',
  holdId,
  keyId: 'k',
  amountNano,
  model: 'm',
  endpoint: '/v1/chat/completions',
  ttlMs: 60_000,
});

describe('aggregate store on PostgreSQL (two processes sharing one account)', () => {
  let sql: SqlRunner;
  let store: SqlEventStore;
  let other: SqlEventStore;
  const clock = new ManualClock();

  beforeAll(async () => {
    sql = await freshPgRunner('agg');
    store = new SqlEventStore(sql);
    await store.init();
    other = new SqlEventStore(sql);
  });

  afterAll(async () => {
    await store.close();
    await other.close();
    await sql.close();
  });

  it('records decided events with the injected time and the caller metadata', async () => {
    clock.set('2026-11-02T10:00:00Z');
    const r = await new AggregateStore(store, clock).handle(accountDecider, accountStream('meta'), { type: 'OpenAccount', accountId: 'meta' }, { actor: 'k1' });
    expect(r.appended?.nextRevision).toBe(0n);
    const [event] = await store.readStream(accountStream('meta'));
    expect(event.metadata).toEqual({ actor: 'k1', at: '2026-11-02T10:00:00.000Z' });
  });

  it('decides again on fresh state before refusing: credits added by another process count', async () => {
    const a = new AggregateStore(store, clock);
    const b = new AggregateStore(other, clock);
    await a.handle(accountDecider, accountStream('x'), { type: 'OpenAccount', accountId: 'x' });
    await a.handle(accountDecider, accountStream('x'), { type: 'AddCredits', amountNano: 100n, reason: 'signup' });
    // b adds credits; a's cached state still says 100.
    await b.handle(accountDecider, accountStream('x'), { type: 'AddCredits', amountNano: 900n, reason: 'purchase' });
    const r = await a.handle(accountDecider, accountStream('x'), hold('h1', 1000n));
    expect(r.events.map((e) => e.type)).toEqual(['HoldPlaced']);
    expect(availableNano(r.state)).toBe(0n);
  });

  it('decides again on fresh state before deciding to do nothing: a hold placed elsewhere is expired', async () => {
    const worker = new AggregateStore(store, clock);
    const gateway = new AggregateStore(other, clock);
    const stream = accountStream('stale');
    await worker.handle(accountDecider, stream, { type: 'OpenAccount', accountId: 'stale' });
    await worker.handle(accountDecider, stream, { type: 'AddCredits', amountNano: 100n, reason: 'signup' });
    // The worker has the account cached; the gateway places a hold the worker has not seen.
    await gateway.handle(accountDecider, stream, hold('gone', 10n));
    clock.advance(60_000);
    const swept = await worker.handle(accountDecider, stream, { type: 'ExpireHolds' });
    expect(swept.events.map((e) => e.type)).toEqual(['HoldExpired']);
  });

  it('never overdraws under concurrency from two processes: exactly the affordable holds succeed', async () => {
    const a = new AggregateStore(store, clock);
    const b = new AggregateStore(other, clock);
    const stream = accountStream('hot');
    await a.handle(accountDecider, stream, { type: 'OpenAccount', accountId: 'hot' });
    await a.handle(accountDecider, stream, { type: 'AddCredits', amountNano: 50n * 7n, reason: 'signup' });
    const results = await Promise.allSettled(
      Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).handle(accountDecider, stream, hold(`h${i}`, 7n))),
    );
    const ok = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason);
    // 350 nano affords 50 holds of 7; 40 are asked: all fit.
    expect(ok).toHaveLength(40);
    expect(refused).toEqual([]);
    const more = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).handle(accountDecider, stream, hold(`m${i}`, 7n))));
    expect(more.filter((r) => r.status === 'fulfilled')).toHaveLength(10);
    for (const r of more.filter((r) => r.status === 'rejected')) {
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(DomainError);
      expect(((r as PromiseRejectedResult).reason as DomainError).code).toBe('insufficient_quota');
    }
    const state = await new AggregateStore(store, clock).load(accountDecider, stream);
    expect(availableNano(state)).toBe(0n);
    expect(state.holds.size).toBe(50);
  }, 30_000);

  it('batches the commands in flight on a hot stream: few appends, no conflicts in one process, exact refusals', async () => {
    const aggregates = new AggregateStore(store, clock);
    const stream = accountStream('batched');
    await aggregates.handle(accountDecider, stream, { type: 'OpenAccount', accountId: 'batched' });
    await aggregates.handle(accountDecider, stream, { type: 'AddCredits', amountNano: 100n * 3n, reason: 'signup' });
    const before = { ...aggregates.stats };
    const results = await Promise.allSettled(Array.from({ length: 256 }, (_, i) => aggregates.handle(accountDecider, stream, hold(`b${i}`, 3n))));
    const placed = results.filter((r) => r.status === 'fulfilled') as PromiseFulfilledResult<{ events: { type: string }[] }>[];
    expect(placed).toHaveLength(100);
    expect(placed.every((r) => r.value.events.length === 1 && r.value.events[0].type === 'HoldPlaced')).toBe(true);
    expect(results.filter((r) => r.status === 'rejected').every((r) => ((r as PromiseRejectedResult).reason as DomainError).code === 'insufficient_quota')).toBe(true);
    expect(aggregates.stats.commands - before.commands).toBe(256);
    expect(aggregates.stats.conflicts - before.conflicts).toBe(0);
    // The first command goes alone; the rest queue behind it and go in a few batches.
    expect(aggregates.stats.appends - before.appends).toBeLessThanOrEqual(4);
    const events = await store.readStream(stream);
    expect(events.filter((e) => e.type === 'HoldPlaced')).toHaveLength(100);
    expect(new Set(events.map((e) => e.data && (e.data as { hold_id?: string }).hold_id).filter(Boolean)).size).toBe(100);
  });

  // Issue 14.2: one command whose events the store refused (a NUL in HoldPlaced's metadata)
  // failed every command of its batch, the charges of delivered streams among them.
  it('fails only the command whose events the store refuses; the others of its batch are appended', async () => {
    const aggregates = new AggregateStore(store, clock);
    const stream = accountStream('poisoned-batch');
    await aggregates.handle(accountDecider, stream, { type: 'OpenAccount', accountId: 'poisoned-batch' });
    await aggregates.handle(accountDecider, stream, { type: 'AddCredits', amountNano: 1_000n, reason: 'signup' });
    // The first goes alone; the next 20 queue behind it and are decided as one batch.
    const first = aggregates.handle(accountDecider, stream, hold('p-first', 1n));
    const queued = Array.from({ length: 20 }, (_, i) => aggregates.handle(accountDecider, stream, hold(`p${i}`, 1n), i === 7 ? { user: 'u\u0000' } : { user: `u${i}` }));
    const results = await Promise.allSettled([first, ...queued]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', ...Array.from({ length: 20 }, (_, i) => (i === 7 ? 'rejected' : 'fulfilled'))]);
    const refusal = (results[8] as PromiseRejectedResult).reason;
    expect(refusal).toBeInstanceOf(UnstorableEventError);
    expect(refusal.path).toBe('metadata.user');
    const held = (await store.readStream(stream)).filter((e) => e.type === 'HoldPlaced').map((e) => (e.data as { hold_id: string }).hold_id);
    expect(held.sort()).toEqual(['p-first', ...Array.from({ length: 20 }, (_, i) => `p${i}`).filter((id) => id !== 'p7')].sort());
  });
});
