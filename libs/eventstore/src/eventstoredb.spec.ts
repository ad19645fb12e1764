import { ManualClock, parseEventStoreUrl } from '@svc/platform';
import { EventStoreDbEventStore } from './eventstoredb-event-store';
import { storeUnavailable } from './common';
import { DEFAULT_RETRY_POLICY } from './eventstoredb-retry';
import { eventStoreContract } from './testing/contract';

// No EventStoreDB server can run on the project's test machines (no Docker engine, no
// package): this suite runs wherever EVENTSTORE_URL points at one (docker-compose.yml
// provides it), a single node or a cluster (`docker compose --profile ha`), e.g.
//   EVENTSTORE_URL='esdb://127.0.0.1:2113?tls=false'
//   EVENTSTORE_URL='esdb+discover://admin:PASSWORD@node1:2113,node2:2113,node3:2113?tls=true&tlsCAFile=certs/ca/ca.crt&nodePreference=leader'
// On a cluster the suite reads right after writing, from its second client too, so the
// connection must prefer the leader (the default): a follower may not have the write yet.
const url = process.env.EVENTSTORE_URL;

(url ? describe : describe.skip)('EventStoreDB adapter', () => {
  it('is given a connection that reads from the leader, as the contract below needs on a cluster', () => {
    expect(parseEventStoreUrl(url!).nodePreference).toBe('leader');
  });

  eventStoreContract('eventstoredb', async () => {
    const store = new EventStoreDbEventStore(url!);
    await store.init();
    let second: EventStoreDbEventStore | undefined;
    let upcasting: EventStoreDbEventStore | undefined;
    return {
      store,
      // A second client: its own gRPC connection, as another process would have.
      makeSecondStore: async () => (second = new EventStoreDbEventStore(url!)),
      makeUpcastingStore: async (upcast) => (upcasting = new EventStoreDbEventStore(url!, { upcast })),
      cleanup: async () => {
        await upcasting?.close();
        await second?.close();
        await store.close();
      },
    };
  });
});

// What the adapter decides on its own, before any server call or without one: runs everywhere.
describe('EventStoreDB adapter without a server', () => {
  const event = { id: '0b0e5b8a-3a5e-4b8e-9f3c-2f2c7b8a9d10', type: 'Tested', data: { n: 1 } };
  /** Nothing listens on port 1: every call fails at once with UNAVAILABLE (connection refused). */
  const unreachable = 'esdb://127.0.0.1:1?tls=false';
  /** Two seeds that answer no gossip: every call fails with a failed discovery. */
  const unreachableCluster = 'esdb+discover://127.0.0.1:1,127.0.0.1:2?tls=false&maxDiscoverAttempts=1&discoveryInterval=1';

  /** A clock that moves only when the adapter waits, and the waits it was asked for. */
  function fakeTime() {
    const clock = new ManualClock();
    const waits: number[] = [];
    const sleep = async (ms: number) => {
      waits.push(ms);
      clock.advance(ms);
    };
    return { clock, sleep, waits };
  }
  // The waits of the default policy until 10 s would be passed: 9.5 s in 12 waits, 13 attempts.
  const DEFAULT_WAITS = [100, 200, 400, 800, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000];

  it('refuses an oversized append client-side, with the same count as every adapter', async () => {
    const store = new EventStoreDbEventStore(unreachable, { maxAppendBytes: 100 });
    const big = { ...event, data: { s: 'é'.repeat(43) } };
    await expect(store.append('s', [big], 'any')).rejects.toMatchObject({
      name: 'AppendTooLargeError',
      bytes: 102,
      limit: 100,
    });
    await store.close();
  });

  it('refuses a malformed connection string when created, saying what is wrong', () => {
    expect(() => new EventStoreDbEventStore('esdb://n1:2113,n2:99999')).toThrow(
      'EventStoreDB connection string: node 2 (n2): expected a port from 1 to 65535, got "99999"',
    );
    expect(() => new EventStoreDbEventStore('esdb://n1?nodePreference=nearest')).toThrow(/option nodePreference: expected leader, follower/);
  });

  it('takes a list of seeds, a discovery list and the kurrentdb scheme, which the client alone would refuse', async () => {
    for (const cluster of [unreachableCluster, 'kurrentdb://127.0.0.1:1?tls=false']) {
      const { clock, sleep } = fakeTime();
      const store = new EventStoreDbEventStore(cluster, { clock, sleep, retry: { ...DEFAULT_RETRY_POLICY, budgetMs: 1 } });
      await expect(store.readStream('s')).rejects.toMatchObject({ name: 'EventStoreDbUnavailableError', type: 'unavailable' });
      await store.close();
    }
  });

  it('retries an append it cannot deliver with backoff, and gives up within 10 s with an outage the callers recognise', async () => {
    const { clock, sleep, waits } = fakeTime();
    const store = new EventStoreDbEventStore(unreachable, { clock, sleep });
    const started = clock.now().getTime();
    const failure = await store.append('account-1', [event], 2n).catch((err: unknown) => err);
    expect(failure).toMatchObject({ name: 'EventStoreDbUnavailableError', type: 'unavailable', operation: 'append to account-1', attempts: 13 });
    expect((failure as Error).message).toMatch(/^EventStoreDB: append to account-1 failed 13 time\(s\) over 9500 ms, the last with: 14 UNAVAILABLE/);
    expect(waits).toEqual(DEFAULT_WAITS);
    expect(clock.now().getTime() - started).toBeLessThan(DEFAULT_RETRY_POLICY.budgetMs);
    expect(storeUnavailable(failure)).toBe(true);
    await store.close();
  });

  it('gives up the same way when no cluster member can be discovered, on reads of a stream and of $all', async () => {
    for (const read of [(s: EventStoreDbEventStore) => s.readStream('account-1'), (s: EventStoreDbEventStore) => s.readAll({ maxCount: 10 })]) {
      const { clock, sleep, waits } = fakeTime();
      const store = new EventStoreDbEventStore(unreachableCluster, { clock, sleep });
      await expect(read(store)).rejects.toMatchObject({
        name: 'EventStoreDbUnavailableError',
        type: 'unavailable',
        attempts: 13,
        cause: expect.objectContaining({ message: 'Failed to discover after 1 attempts.' }),
      });
      expect(waits).toEqual(DEFAULT_WAITS);
      await store.close();
    }
  });

  it('reopens a dropped subscription within the budget, then reports the outage to onError', async () => {
    const { clock, sleep, waits } = fakeTime();
    const store = new EventStoreDbEventStore(unreachable, { clock, sleep });
    const failure = await new Promise<unknown>((resolve) => {
      store.subscribeToAll({}, () => undefined, resolve);
    });
    expect(failure).toMatchObject({ name: 'EventStoreDbUnavailableError', operation: 'subscription to $all', attempts: 13, type: 'unavailable' });
    expect(waits).toEqual(DEFAULT_WAITS);
    await store.close();
  });

  it('stops a subscription that is waiting to reopen without waiting out the pause', async () => {
    let paused!: () => void;
    const pausing = new Promise<void>((resolve) => (paused = resolve));
    // A pause that never ends by itself: only stop() can end the wait.
    const sleep = () => {
      paused();
      return new Promise<void>(() => undefined);
    };
    const store = new EventStoreDbEventStore(unreachable, { clock: new ManualClock(), sleep });
    const errors: unknown[] = [];
    const subscription = store.subscribeToAll(
      {},
      () => undefined,
      (err) => errors.push(err),
    );
    await pausing;
    await subscription.stop();
    expect(errors).toEqual([]);
    await store.close();
  });
});
