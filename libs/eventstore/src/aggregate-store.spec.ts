import { randomUUID } from 'node:crypto';
import { accountDecider, accountStream, availableNano, type AccountCommand, type GenerationStats } from '@svc/ledger';
import { ManualClock } from '@svc/platform';
import { PgSqlRunner, type SqlRunner } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import { AggregateStore } from './aggregate-store';
import { DomainError } from './decider';
import { StreamContentionError, UnstorableEventError, type EventStore, type NewEvent } from './port';
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

const stats = (model = 'm'): GenerationStats => ({
  model,
  provider: 'p',
  endpoint: '/v1/chat/completions',
  prompt_tokens: 1,
  completion_tokens: 1,
  cached_tokens: 0,
  reasoning_tokens: 0,
  latency_ms: 1,
  ttft_ms: null,
});
const charge = (holdId: string, model?: string): AccountCommand => ({ type: 'ChargeUsage', holdId, amountNano: 1n, stats: stats(model) });

/**
 * `inner`, except that an append `failure` returns an error for throws it instead of appending.
 * `appends` counts every append asked for, thrown or not.
 */
function failingStore(inner: EventStore, failure: (events: NewEvent[], call: number) => unknown): EventStore & { appends: number } {
  let appends = 0;
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'appends') return appends;
      if (prop === 'append') {
        return async (...args: Parameters<EventStore['append']>) => {
          const err = failure(args[1], ++appends);
          if (err) throw err;
          return target.append(...args);
        };
      }
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as EventStore & { appends: number };
}

const lostConnection = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
const unsupportedUnicode = () => Object.assign(new Error('unsupported Unicode escape sequence'), { code: '22P05' });
const poisoned = (events: NewEvent[]) => JSON.stringify(events).includes('poison');

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

  type Counted = EventStore & { reads: number; eventsRead: number; snapshotsRead: number; exclusive: number };
  /** `inner`, counting the stream reads (and the events they brought), the snapshots read and the turns under the lock that its user asks for. */
  function counting(inner: EventStore): Counted {
    const counts = { reads: 0, eventsRead: 0, snapshotsRead: 0, exclusive: 0 };
    return new Proxy(inner, {
      get(target, prop) {
        if (typeof prop === 'string' && prop in counts) return counts[prop as keyof typeof counts];
        const value = Reflect.get(target, prop, target) as unknown;
        if (typeof value !== 'function') return value;
        if (prop === 'readStream') {
          counts.reads++;
          return async (...args: Parameters<EventStore['readStream']>) => {
            const events = await target.readStream(...args);
            counts.eventsRead += events.length;
            return events;
          };
        }
        if (prop === 'readSnapshot') {
          return (...args: Parameters<NonNullable<EventStore['readSnapshot']>>) => {
            counts.snapshotsRead++;
            return target.readSnapshot!(...args);
          };
        }
        if (prop === 'appendExclusive') counts.exclusive++;
        return value.bind(target);
      },
    }) as Counted;
  }

  /** `inner` without snapshots, as an adapter that keeps none: every read is of the events. */
  const withoutSnapshots = (inner: EventStore): EventStore =>
    new Proxy(inner, {
      get(target, prop) {
        if (prop === 'readSnapshot' || prop === 'writeSnapshot') return undefined;
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });

  /** The stream of an account `writer` opened with `credits`. */
  async function openAccount(writer: AggregateStore, accountId: string, credits: bigint): Promise<string> {
    const stream = accountStream(accountId);
    await writer.handle(accountDecider, stream, { type: 'OpenAccount', accountId });
    await writer.handle(accountDecider, stream, { type: 'AddCredits', amountNano: credits, reason: 'signup' });
    return stream;
  }

  /** `n` holds and their charges on `stream` by `writer`, one command at a time. */
  async function holdAndCharge(writer: AggregateStore, stream: string, n: number, prefix: string): Promise<void> {
    for (let i = 0; i < n; i++) {
      await writer.handle(accountDecider, stream, hold(`${prefix}${i}`, 10n));
      await writer.handle(accountDecider, stream, charge(`${prefix}${i}`));
    }
  }

  /** The snapshot kept of `stream` once the writes the appends started have landed. */
  async function keptSnapshot(stream: string, atLeast: bigint) {
    for (let i = 0; i < 100; i++) {
      const kept = await store.readSnapshot(stream);
      if (kept && kept.revision >= atLeast) return kept;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`no snapshot of ${stream} at ${atLeast} or later`);
  }

  /** An account funded with `credits` by process a, which b (its store watched) has loaded. */
  async function sharedAccount(accountId: string, credits: bigint, lostRaces: string[] = []) {
    const a = new AggregateStore(store, clock);
    const watched = counting(other);
    const b = new AggregateStore(watched, clock, { onLostRace: (stream) => lostRaces.push(stream) });
    const stream = await openAccount(a, accountId, credits);
    await b.load(accountDecider, stream);
    return { a, b, watched, stream, readsAfterLoad: watched.reads };
  }

  it('a process behind decides again on the events its refused append brought back: no read of its own, no turn under the lock (issue 45)', async () => {
    const { a, b, watched, stream, readsAfterLoad } = await sharedAccount('behind', 100n);
    // a holds 60; b's cache still says 100 available.
    await a.handle(accountDecider, stream, hold('a1', 60n));
    const placed = await b.handle(accountDecider, stream, hold('b1', 30n));
    expect(placed.events.map((e) => e.type)).toEqual(['HoldPlaced']);
    expect(placed.appended?.nextRevision).toBe(3n);
    expect(availableNano(placed.state)).toBe(10n);
    // 10 left, which b knows without reading: a's hold came back with its refused append, so the
    // next hold is refused on the right figure rather than written on the stale one.
    await a.handle(accountDecider, stream, hold('a2', 5n));
    await expect(b.handle(accountDecider, stream, hold('b2', 10n))).rejects.toMatchObject({ code: 'insufficient_quota' });
    expect(b.stats.conflicts).toBe(2);
    expect(watched.reads).toBe(readsAfterLoad);
    expect(watched.exclusive).toBe(0);
    const state = await new AggregateStore(store, clock).load(accountDecider, stream);
    expect([...state.holds.keys()].sort()).toEqual(['a1', 'a2', 'b1']);
    expect(availableNano(state)).toBe(5n);
  });

  it('a batch that lost a race takes the commands queued meanwhile into its next append (issue 45)', async () => {
    const { a, b, stream } = await sharedAccount('absorb', 100n);
    await a.handle(accountDecider, stream, hold('a1', 10n));
    // b1 goes alone on b's stale revision; b2 and b3 queue behind it while it is on its way.
    const placed = await Promise.all(['b1', 'b2', 'b3'].map((id) => b.handle(accountDecider, stream, hold(id, 20n))));
    expect(b.stats.conflicts).toBe(1);
    // One append after the lost race, for all three: not b1's, then b2's and b3's in a race of their own.
    expect(b.stats.appends).toBe(1);
    expect(placed.map((p) => p.appended?.nextRevision)).toEqual([5n, 5n, 5n]);
    expect(availableNano(placed[2].state)).toBe(30n);
    const state = await new AggregateStore(store, clock).load(accountDecider, stream);
    expect([...state.holds.keys()].sort()).toEqual(['a1', 'b1', 'b2', 'b3']);
    expect(availableNano(state)).toBe(30n);
  });

  it('tells onLostRace of each append another process beat, and of no other (issue 45: PeerRouting)', async () => {
    const lostRaces: string[] = [];
    const { a, b, stream } = await sharedAccount('told', 100n, lostRaces);
    await b.handle(accountDecider, stream, hold('b1', 10n));
    expect(lostRaces).toEqual([]);
    await a.handle(accountDecider, stream, hold('a1', 10n));
    await b.handle(accountDecider, stream, hold('b2', 10n));
    await a.handle(accountDecider, stream, hold('a2', 10n));
    await b.handle(accountDecider, stream, hold('b3', 10n));
    expect(lostRaces).toEqual([stream, stream]);
    expect(b.stats.conflicts).toBe(2);
  });

  it('a process further behind than a refusal brings back reads the stream without the lock and races again (issue 45)', async () => {
    const { a, b, watched, stream, readsAfterLoad } = await sharedAccount('far-behind', 1_000n);
    // 70 holds of 10 elsewhere: more than the 64 events a refused append brings back.
    for (let i = 0; i < 70; i++) await a.handle(accountDecider, stream, hold(`a${i}`, 10n));
    const placed = await b.handle(accountDecider, stream, hold('b1', 250n));
    expect(placed.events.map((e) => e.type)).toEqual(['HoldPlaced']);
    expect(placed.appended?.nextRevision).toBe(72n);
    expect(availableNano(placed.state)).toBe(50n);
    expect(b.stats.conflicts).toBe(1);
    // The gap's first 64 events, then (no snapshot kept yet) the 6 after them, besides the 2 it loaded.
    expect(watched.reads).toBe(readsAfterLoad + 2);
    expect(watched.eventsRead).toBe(2 + 70);
    // Under the lock, the read of the 70 would have held back every other writer of the stream.
    expect(watched.exclusive).toBe(0);
    // What b knows now is the stream: 50 left, so 60 more is refused without another race.
    await expect(b.handle(accountDecider, stream, hold('b2', 60n))).rejects.toMatchObject({ code: 'insufficient_quota' });
    expect(availableNano(await new AggregateStore(store, clock).load(accountDecider, stream))).toBe(50n);
  });

  it('past its limit of cached streams, forgets the one used least lately, never one used among the latest half-limit', async () => {
    const a = new AggregateStore(store, clock);
    const streams: string[] = [];
    for (let i = 1; i <= 5; i++) streams.push(await openAccount(a, `lru-${i}`, 1_000n));
    const [s1, s2, , s4, s5] = streams;
    const watched = counting(store);
    const b = new AggregateStore(watched, clock, { maxCachedStreams: 4 });
    for (const stream of streams.slice(0, 4)) await b.load(accountDecider, stream);
    // s1, loaded first, is used since; s2 is then the one used least lately.
    await b.handle(accountDecider, s1, hold('lru-h1', 10n));
    await b.handle(accountDecider, s1, charge('lru-h1'));
    const reads = watched.reads;
    await b.load(accountDecider, s5);
    expect(watched.reads).toBeGreaterThan(reads);

    const beforeS1 = watched.reads;
    const placed = await b.handle(accountDecider, s1, hold('lru-h2', 10n));
    expect(watched.reads).toBe(beforeS1);
    // 1,000 credits, 1 charged, 10 held: the entry kept in place is the latest state.
    expect(availableNano(placed.state)).toBe(989n);
    await b.handle(accountDecider, s4, hold('lru-h3', 10n));
    expect(watched.reads).toBe(beforeS1);

    await b.handle(accountDecider, s2, hold('lru-h4', 10n));
    expect(watched.reads).toBeGreaterThan(beforeS1);
  });

  it('keeps the command queue of a stream it caches between its commands, and forgets it with the stream', async () => {
    const a = new AggregateStore(store, clock);
    const streams: string[] = [];
    for (let i = 1; i <= 6; i++) streams.push(await openAccount(a, `queue-${i}`, 1_000n));
    const b = new AggregateStore(store, clock, { maxCachedStreams: 4 });
    for (const [i, stream] of streams.entries()) await b.handle(accountDecider, stream, hold(`queue-h${i}`, 10n));
    // Six streams decided, one after the other; the four still cached keep their queues.
    expect(b.queuedStreams).toBe(4);
    // A kept queue takes the next command as a new one would, on the latest state.
    const again = await b.handle(accountDecider, streams[5], hold('queue-again', 10n));
    expect(availableNano(again.state)).toBe(980n);
    expect(b.queuedStreams).toBe(4);
  });

  it('keeps a snapshot every so many events, of the state the events up to it fold to (issue 45)', async () => {
    const a = new AggregateStore(store, clock, { snapshotEvery: 16 });
    const stream = await openAccount(a, 'kept', 1_000n);
    await holdAndCharge(a, stream, 20, 'k');
    // 42 events: kept at every append that leaves 16 more since the last, so at revisions 15 and 31.
    const kept = await keptSnapshot(stream, 31n);
    expect(kept.revision).toBe(31n);
    expect(kept.version).toBe(accountDecider.snapshot!.version);
    const upTo = await store.readStream(stream, { maxCount: Number(kept.revision) + 1 });
    const folded = upTo.reduce((state, event) => accountDecider.evolve(state, event as never), accountDecider.initialState());
    expect(accountDecider.snapshot!.encode(accountDecider.snapshot!.decode(kept.state))).toEqual(accountDecider.snapshot!.encode(folded));
  });

  it('a process that never read a long stream starts from its snapshot and reads only what followed (issue 45)', async () => {
    const a = new AggregateStore(store, clock, { snapshotEvery: 16 });
    const stream = await openAccount(a, 'restarted', 1_000n);
    await holdAndCharge(a, stream, 40, 'r');
    await a.handle(accountDecider, stream, hold('open', 25n));
    await keptSnapshot(stream, 79n);
    const watched = counting(other);
    const fresh = new AggregateStore(watched, clock);
    const state = await fresh.load(accountDecider, stream);
    expect(watched.snapshotsRead).toBe(1);
    // The snapshot at revision 79, the event there (to check it is this log's), then 80 to 82: not the 83 events.
    expect(watched.eventsRead).toBe(1 + 3);
    const whole = await new AggregateStore(withoutSnapshots(other), clock).load(accountDecider, stream);
    expect(availableNano(state)).toBe(availableNano(whole));
    expect(availableNano(state)).toBe(1_000n - 40n - 25n);
    // It decides on it as on the whole stream: 935 left, so 936 is refused and 935 placed.
    await expect(fresh.handle(accountDecider, stream, hold('too-much', 936n))).rejects.toMatchObject({ code: 'insufficient_quota' });
    expect(availableNano((await fresh.handle(accountDecider, stream, hold('all', 935n))).state)).toBe(0n);
    expect(fresh.stats.conflicts).toBe(0);
  });

  it('a process further behind than a first read brings reads the snapshot, then only what followed it (issue 45)', async () => {
    const { a, b, watched, stream } = await sharedAccount('long-gone', 10_000n);
    const writer = new AggregateStore(store, clock, { snapshotEvery: 16 });
    await holdAndCharge(writer, stream, 150, 'w');
    await keptSnapshot(stream, 287n);
    const before = { events: watched.eventsRead, snapshots: watched.snapshotsRead };
    const placed = await b.handle(accountDecider, stream, hold('b1', 8_500n));
    // 150 charges of 1, and the new hold.
    expect(availableNano(placed.state)).toBe(10_000n - 150n - 8_500n);
    // Refused once (its cache 300 events behind), then 64 events read before the snapshot at
    // revision 287, the event there and the 14 after it: not the 300.
    expect(b.stats.conflicts).toBe(1);
    expect(watched.snapshotsRead - before.snapshots).toBe(1);
    expect(watched.eventsRead - before.events).toBe(64 + 1 + 14);
    await expect(a.handle(accountDecider, stream, hold('a1', 1_351n))).rejects.toMatchObject({ code: 'insufficient_quota' });
  });

  it('ignores a snapshot of another version, one it cannot read, or one of another log: the events are the truth (issue 45)', async () => {
    const a = new AggregateStore(store, clock);
    const stream = await openAccount(a, 'other-version', 500n);
    const version = accountDecider.snapshot!.version;
    const rich = accountDecider.snapshot!.encode({ ...accountDecider.initialState(), accountId: 'other-version', creditsNano: 10n ** 12n });
    const [, last] = await store.readStream(stream);
    for (const kept of [
      { revision: 1n, eventId: last.id, version: `${version}-older`, state: rich },
      { revision: 1n, eventId: last.id, version, state: { creditsNano: { $bigint: 'not a number' } } },
      // Of another log: not the event this one has at its revision, or a revision it has not reached.
      { revision: 1n, eventId: randomUUID(), version, state: rich },
      { revision: 2n, eventId: last.id, version, state: rich },
    ]) {
      await sql.query('DELETE FROM stream_snapshots WHERE stream = $1', [stream]);
      await store.writeSnapshot(stream, kept);
      expect(await store.readSnapshot(stream)).toEqual(kept);
      expect(availableNano(await new AggregateStore(other, clock).load(accountDecider, stream))).toBe(500n);
    }
  });

  it('never overdraws under concurrency from two processes: exactly the affordable holds succeed', async () => {
    const a = new AggregateStore(store, clock);
    const b = new AggregateStore(other, clock);
    const stream = accountStream('hot');
    await a.handle(accountDecider, stream, { type: 'OpenAccount', accountId: 'hot' });
    await a.handle(accountDecider, stream, { type: 'AddCredits', amountNano: 50n * 7n, reason: 'signup' });
    const results = await Promise.allSettled(Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).handle(accountDecider, stream, hold(`h${i}`, 7n))));
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
    expect(
      results.filter((r) => r.status === 'rejected').every((r) => ((r as PromiseRejectedResult).reason as DomainError).code === 'insufficient_quota'),
    ).toBe(true);
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
    const queued = Array.from({ length: 20 }, (_, i) =>
      aggregates.handle(accountDecider, stream, hold(`p${i}`, 1n), i === 7 ? { user: 'u\u0000' } : { user: `u${i}` }),
    );
    const results = await Promise.allSettled([first, ...queued]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', ...Array.from({ length: 20 }, (_, i) => (i === 7 ? 'rejected' : 'fulfilled'))]);
    const refusal = (results[8] as PromiseRejectedResult).reason;
    expect(refusal).toBeInstanceOf(UnstorableEventError);
    expect(refusal.path).toBe('metadata.user');
    const held = (await store.readStream(stream)).filter((e) => e.type === 'HoldPlaced').map((e) => (e.data as { hold_id: string }).hold_id);
    expect(held.sort()).toEqual(['p-first', ...Array.from({ length: 20 }, (_, i) => `p${i}`).filter((id) => id !== 'p7')].sort());
  });

  /** An account with `holds` open holds h0..h<holds-1>, each of 10 nano. */
  async function accountWithHolds(aggregates: AggregateStore, id: string, holds: number): Promise<string> {
    const stream = accountStream(id);
    await aggregates.handle(accountDecider, stream, { type: 'OpenAccount', accountId: id });
    await aggregates.handle(accountDecider, stream, { type: 'AddCredits', amountNano: 1_000_000n, reason: 'signup' });
    await Promise.all(Array.from({ length: holds }, (_, i) => aggregates.handle(accountDecider, stream, hold(`h${i}`, 10n))));
    return stream;
  }

  /** The first command goes alone; the 20 `queued` behind it are decided as one batch. */
  async function firstThenBatch(aggregates: AggregateStore, stream: string, queued: AccountCommand[]) {
    const first = aggregates.handle(accountDecider, stream, hold('alone', 1n));
    const rest = queued.map((command) => aggregates.handle(accountDecider, stream, command));
    const [alone, ...results] = await Promise.allSettled([first, ...rest]);
    expect(alone.status).toBe('fulfilled');
    return results;
  }

  const chargedHolds = async (stream: string) =>
    (await store.readStream(stream))
      .filter((e) => e.type === 'UsageCharged')
      .map((e) => (e.data as { hold_id: string }).hold_id)
      .sort();
  const others = (n: number, except: number) =>
    Array.from({ length: n }, (_, i) => `h${i}`)
      .filter((_, i) => i !== except)
      .sort();

  // Issue 14.2 as it was seen: charges of streams that had delivered, billed nothing because
  // a command beside them in the batch held a NUL.
  it('of 20 charges queued together, rejects only the one with a NUL in its data and appends the 19 others', async () => {
    const aggregates = new AggregateStore(store, clock);
    const stream = await accountWithHolds(aggregates, 'nul-charge', 20);
    const before = aggregates.stats.appends;
    const results = await firstThenBatch(
      aggregates,
      stream,
      Array.from({ length: 20 }, (_, i) => charge(`h${i}`, i === 11 ? 'model\u0000x' : 'm')),
    );
    expect(results.map((r) => r.status)).toEqual(Array.from({ length: 20 }, (_, i) => (i === 11 ? 'rejected' : 'fulfilled')));
    expect((results[11] as PromiseRejectedResult).reason).toMatchObject({ name: 'UnstorableEventError', eventType: 'UsageCharged', path: 'data.model' });
    for (const r of results.filter((r) => r.status === 'fulfilled')) {
      expect((r as PromiseFulfilledResult<{ events: { type: string }[] }>).value.events.map((e) => e.type)).toEqual(['UsageCharged']);
    }
    expect(await chargedHolds(stream)).toEqual(others(20, 11));
    // The hold of the refused charge is still open, for a release or the worker's expiry.
    expect((await aggregates.load(accountDecider, stream)).holds.has('h11')).toBe(true);
    // Alone, the batch that failed, then one append per command.
    expect(aggregates.stats.appends - before).toBe(1 + 19);
  });

  it('decides the commands one by one after any refusal of the store that is not a conflict, such as an error of its own', async () => {
    const flaky = failingStore(store, (events) => (poisoned(events) ? unsupportedUnicode() : undefined));
    const aggregates = new AggregateStore(flaky, clock);
    const stream = await accountWithHolds(aggregates, 'pg-refusal', 20);
    const results = await firstThenBatch(
      aggregates,
      stream,
      Array.from({ length: 20 }, (_, i) => charge(`h${i}`, i === 4 ? 'poison' : 'm')),
    );
    expect(results.map((r) => r.status)).toEqual(Array.from({ length: 20 }, (_, i) => (i === 4 ? 'rejected' : 'fulfilled')));
    expect((results[4] as PromiseRejectedResult).reason).toMatchObject({ code: '22P05' });
    expect(await chargedHolds(stream)).toEqual(others(20, 4));
  });

  it('fails the batch as one, with one append, when the store cannot be reached: no attempt per command', async () => {
    let down = false;
    const flaky = failingStore(store, () => (down ? lostConnection() : undefined));
    const aggregates = new AggregateStore(flaky, clock);
    const stream = await accountWithHolds(aggregates, 'unreachable', 20);
    down = true;
    const before = flaky.appends;
    const first = aggregates.handle(accountDecider, stream, hold('alone', 1n));
    const results = await Promise.allSettled([first, ...Array.from({ length: 20 }, (_, i) => aggregates.handle(accountDecider, stream, charge(`h${i}`)))]);
    expect(results.map((r) => r.status)).toEqual(Array.from({ length: 21 }, () => 'rejected'));
    expect(results.every((r) => (r as PromiseRejectedResult).reason.code === 'ECONNREFUSED')).toBe(true);
    expect(flaky.appends - before).toBe(2);
    // Back up: the charges, retried by their callers, go through.
    down = false;
    await Promise.all(Array.from({ length: 20 }, (_, i) => aggregates.handle(accountDecider, stream, charge(`h${i}`))));
    expect(await chargedHolds(stream)).toEqual(others(20, -1));
  });

  it('stops deciding one by one once the store stops answering: the rest fail without an attempt each', async () => {
    let armed = false;
    let call = 0;
    const flaky = failingStore(store, (events) => {
      if (!armed) return undefined;
      if (poisoned(events)) return unsupportedUnicode();
      // Appends that hold no poison: the first command alone, then h1 alone; then the store is gone.
      return ++call > 2 ? lostConnection() : undefined;
    });
    const aggregates = new AggregateStore(flaky, clock);
    const stream = await accountWithHolds(aggregates, 'gone-halfway', 20);
    armed = true;
    const before = flaky.appends;
    const results = await firstThenBatch(
      aggregates,
      stream,
      Array.from({ length: 20 }, (_, i) => charge(`h${i}`, i === 0 ? 'poison' : 'm')),
    );
    // h0 poisoned; h1 appended alone (call 2); h2 meets the lost connection, h3..h19 are not tried.
    expect(results.map((r) => (r.status === 'fulfilled' ? 'ok' : ((r as PromiseRejectedResult).reason as { code: string }).code))).toEqual([
      '22P05',
      'ok',
      ...Array.from({ length: 18 }, () => 'ECONNREFUSED'),
    ]);
    expect(flaky.appends - before).toBe(1 + 1 + 3);
    expect(await chargedHolds(stream)).toEqual(['h1']);
  });
});

/**
 * Issue 41 A: one account in flight on several gateway processes. Each process is its own pool
 * and its own aggregate cache on one PostgreSQL schema, as four gateways are.
 */
describe('issue 41 A: a hot account written from four processes', () => {
  const clock = new ManualClock();
  let runners: SqlRunner[] = [];
  let stores: SqlEventStore[] = [];

  beforeAll(async () => {
    const first = await freshPgRunner('hot4');
    runners = [first];
    for (let i = 1; i < 4; i++)
      runners.push(await PgSqlRunner.connect({ connectionString: process.env.DATABASE_URL!, options: `-c search_path=${first.schema}` }));
    stores = runners.map((r) => new SqlEventStore(r));
    await stores[0].init();
  });

  afterAll(async () => {
    for (const s of stores) await s.close();
    for (const r of runners) await r.close();
  });

  async function openAccount(aggregates: AggregateStore, id: string, credits: bigint): Promise<string> {
    const stream = accountStream(id);
    await aggregates.handle(accountDecider, stream, { type: 'OpenAccount', accountId: id });
    await aggregates.handle(accountDecider, stream, { type: 'AddCredits', amountNano: credits, reason: 'signup' });
    return stream;
  }

  /** Every process places then charges `perProcess` holds at once; resolves with each command's outcome. */
  async function storm(processes: AggregateStore[], stream: string, perProcess: number) {
    return Promise.allSettled(
      processes.flatMap((p, n) =>
        Array.from({ length: perProcess }, async (_, i) => {
          await p.handle(accountDecider, stream, hold(`p${n}-${i}`, 5n));
          await p.handle(accountDecider, stream, { type: 'ChargeUsage', holdId: `p${n}-${i}`, amountNano: 3n, stats: stats() });
        }),
      ),
    );
  }

  it('lands every hold and every charge, without retrying a race: a writer that loses one takes its turn under the lock', async () => {
    // maxRetries 0: a second optimistic race would fail the batch, so only the turn under the lock can pass.
    const processes = stores.map((s) => new AggregateStore(s, clock, { maxRetries: 0 }));
    const stream = await openAccount(processes[0], 'hot4', 1_000_000n);
    const outcomes = await storm(processes, stream, 150);
    expect(outcomes.filter((o) => o.status === 'rejected').map((o) => String((o as PromiseRejectedResult).reason))).toEqual([]);
    // The processes did contend: the test proves the way out, not a quiet run.
    expect(processes.reduce((n, p) => n + p.stats.conflicts, 0)).toBeGreaterThan(0);
    const events = await stores[0].readStream(stream);
    expect(events.filter((e) => e.type === 'HoldPlaced')).toHaveLength(600);
    expect(events.filter((e) => e.type === 'UsageCharged')).toHaveLength(600);
    const state = await new AggregateStore(stores[1], clock).load(accountDecider, stream);
    expect(state.holds.size).toBe(0);
    expect(availableNano(state)).toBe(1_000_000n - 600n * 3n);
  }, 60_000);

  it('starves no process: each lands all of its commands while the others keep the account busy', async () => {
    const processes = stores.map((s) => new AggregateStore(s, clock, { maxRetries: 0 }));
    const stream = await openAccount(processes[0], 'fair4', 1_000_000n);
    await storm(processes, stream, 100);
    const charged = (await stores[0].readStream(stream)).filter((e) => e.type === 'UsageCharged').map((e) => (e.data as { hold_id: string }).hold_id);
    for (let n = 0; n < 4; n++) expect(charged.filter((id) => id.startsWith(`p${n}-`))).toHaveLength(100);
  }, 60_000);

  it('without a store lock, a writer that keeps losing fails with StreamContentionError and writes nothing, never WrongExpectedVersionError', async () => {
    // The same store without its optional appendExclusive, as an adapter that has none (EventStoreDB).
    const optimistic = stores.map(
      (s) => new Proxy(s, { get: (t, p) => (p === 'appendExclusive' ? undefined : (Reflect.get(t, p, t) as unknown)) }) as EventStore,
    );
    const processes = optimistic.map((s) => new AggregateStore(s, clock, { maxRetries: 0 }));
    const stream = await openAccount(processes[0], 'noLock', 1_000_000n);
    const outcomes = await Promise.allSettled(
      processes.flatMap((p, n) => Array.from({ length: 50 }, (_, i) => p.handle(accountDecider, stream, hold(`q${n}-${i}`, 5n)))),
    );
    const failures = outcomes.filter((o) => o.status === 'rejected').map((o) => (o as PromiseRejectedResult).reason);
    expect(failures.length).toBeGreaterThan(0);
    for (const err of failures) expect(err).toBeInstanceOf(StreamContentionError);
    const placed = (await stores[0].readStream(stream)).filter((e) => e.type === 'HoldPlaced');
    expect(placed).toHaveLength(outcomes.length - failures.length);
  }, 60_000);

  it('without a store lock, jittered retries land every command of a contended account', async () => {
    const optimistic = stores.map(
      (s) => new Proxy(s, { get: (t, p) => (p === 'appendExclusive' ? undefined : (Reflect.get(t, p, t) as unknown)) }) as EventStore,
    );
    const processes = optimistic.map((s) => new AggregateStore(s, clock));
    const stream = await openAccount(processes[0], 'jitter', 1_000_000n);
    const outcomes = await storm(processes, stream, 40);
    expect(outcomes.filter((o) => o.status === 'rejected')).toEqual([]);
    expect((await stores[0].readStream(stream)).filter((e) => e.type === 'UsageCharged')).toHaveLength(160);
  }, 60_000);
});
