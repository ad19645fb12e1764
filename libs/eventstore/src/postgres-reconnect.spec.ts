import { randomUUID } from 'node:crypto';
import { Client, type PoolClient } from 'pg';
import { PgSqlRunner } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import type { NewEvent } from './port';
import { SqlEventStore } from './sql-event-store';
import { sleep, waitFor } from './testing/contract';

/**
 * Issue 14.4: connections PostgreSQL terminates under the event store (a restart, an operator's
 * pg_terminate_backend) must cost a failed statement at most: nothing is raised uncaught (the
 * worker died of it), the pool hands out working connections again, and the LISTEN connection
 * comes back by itself so readers are woken by other processes' appends again.
 */
describe('event store on PostgreSQL: connections terminated by the server', () => {
  /** This process's pool, its sessions named so that they alone are terminated. */
  let runner: PgSqlRunner;
  const name = `esreconnect-${randomUUID()}`;
  /** Another pool on the same schema: a second process, whose appends must wake this one. */
  let otherRunner: PgSqlRunner & { schema: string };
  let other: SqlEventStore;
  let killer: Client;

  beforeAll(async () => {
    otherRunner = await freshPgRunner('esreconnect');
    other = new SqlEventStore(otherRunner);
    await other.init();
    runner = await PgSqlRunner.connect({ connectionString: process.env.DATABASE_URL, options: `-c search_path=${otherRunner.schema}`, application_name: name });
    killer = new Client({ connectionString: process.env.DATABASE_URL });
    await killer.connect();
  });
  afterAll(async () => {
    await killer.end();
    await other.close();
    await otherRunner.close();
    await runner.close();
  });

  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown) => void uncaught.push(err);
  beforeEach(() => {
    uncaught.length = 0;
    process.on('uncaughtException', onUncaught);
  });
  afterEach(() => process.off('uncaughtException', onUncaught));

  const event = (type = 'Tested'): NewEvent => ({ id: randomUUID(), type, data: { n: 1 } });

  /** Backend pids of this process's sessions; `listening`: the LISTEN one only. */
  async function sessions({ listening = false } = {}): Promise<number[]> {
    const { rows } = await killer.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE application_name = $1 ${listening ? `AND query = 'LISTEN eventstore_appended'` : ''}`,
      [name],
    );
    return rows.map((r) => r.pid);
  }
  const listeners = () => sessions({ listening: true });
  const terminate = (pids: number[]) => killer.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [pids]);

  it('wakes watchers again after its LISTEN connection was terminated, on another process append', async () => {
    // Polling would hide a lost LISTEN: with a minute between polls only a NOTIFY wakes in time.
    const store = new SqlEventStore(runner, { pollIntervalMs: 60_000 });
    let wakes = 0;
    const unwatch = store.watchAppends(() => void wakes++);
    try {
      await waitFor(async () => (await listeners()).length === 1);
      await other.append(`w-${randomUUID()}`, [event()], 'no_stream');
      await waitFor(() => wakes > 0);

      const [killed] = await listeners();
      await terminate([killed]);
      // Back on a new session (within the first retry delay, about a second).
      await waitFor(async () => {
        const now = await listeners();
        return now.length === 1 && now[0] !== killed;
      }, 5000);
      // The reconnect itself wakes once (appends made while it was away woke nobody); the count
      // after it must come from a NOTIFY.
      await sleep(50);
      const before = wakes;
      await other.append(`w-${randomUUID()}`, [event()], 'no_stream');
      await waitFor(() => wakes > before);
      expect(uncaught).toEqual([]);
    } finally {
      unwatch();
      await store.close();
    }
  });

  // What the projection runner and the hold sweepers rely on: reads and appends on the pool,
  // wake-ups from watchAppends. A statement in flight when its connection dies fails (the runner
  // retries it); the next ones must not.
  it('reads, appends and wakes again after every connection of its store was terminated', async () => {
    const store = new SqlEventStore(runner, { pollIntervalMs: 60_000 });
    let wakes = 0;
    const unwatch = store.watchAppends(() => void wakes++);
    try {
      await waitFor(async () => (await listeners()).length === 1);
      // Several pooled connections, idle beside the LISTEN one.
      await Promise.all(Array.from({ length: 4 }, () => store.append(`s-${randomUUID()}`, [event('Warm')], 'no_stream')));
      await sleep(50);
      const pids = await sessions();
      expect(pids.length).toBeGreaterThanOrEqual(3);
      await terminate(pids);
      await sleep(100);

      const stream = `s-${randomUUID()}`;
      const mine = await store.append(stream, [event('Mine')], 'no_stream');
      expect((await store.readStream(stream)).map((e) => e.type)).toEqual(['Mine']);
      expect(await store.readAll({ after: mine.position })).toEqual([]);
      // None of the terminated sessions is left, and LISTEN is back on a session of its own.
      await waitFor(async () => (await listeners()).length === 1, 5000);
      expect((await sessions()).filter((pid) => pids.includes(pid))).toEqual([]);
      await sleep(50);
      const before = wakes;
      await other.append(`s-${randomUUID()}`, [event('Theirs')], 'no_stream');
      await waitFor(() => wakes > before, 5000);
      expect(uncaught).toEqual([]);
    } finally {
      unwatch();
      await store.close();
    }
  });

  it('fails only an append whose transaction lost its connection; nothing of it is written, and the next append works', async () => {
    const store = new SqlEventStore(runner);
    const stream = `tx-${randomUUID()}`;
    try {
      const failed = await runner
        .transaction(async (tx) => {
          await store.appendInTransaction(tx, stream, [event('Lost')], 'no_stream');
          const { rows } = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
          await terminate([rows[0].pid]);
          await sleep(100);
        })
        .then(
          () => null,
          (err: unknown) => err,
        );
      expect(failed).toBeInstanceOf(Error);
      await sleep(50);
      expect(uncaught).toEqual([]);
      await store.append(stream, [event('Kept')], 'no_stream');
      expect((await store.readStream(stream)).map((e) => e.type)).toEqual(['Kept']);
    } finally {
      await store.close();
    }
  });

  // See sql-reconnect.spec.ts: the error of a backend terminated as the pool hands its client
  // over, emitted before `await pool.connect()` resumes.
  it('listens to the LISTEN connection from the hand-over on, and opens another when that one is lost before it LISTENs', async () => {
    const store = new SqlEventStore(runner, { pollIntervalMs: 60_000 });
    const terminated = Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
    runner.sessions.once('acquire', (client: PoolClient) => queueMicrotask(() => client.emit('error', terminated)));
    let wakes = 0;
    const unwatch = store.watchAppends(() => void wakes++);
    try {
      await sleep(100);
      expect(uncaught).toEqual([]);
      // The client that reported the error is not kept: a new session LISTENs after the retry delay.
      expect(await listeners()).toEqual([]);
      await waitFor(async () => (await listeners()).length === 1, 5000);
      await sleep(50);
      const before = wakes;
      await other.append(`h-${randomUUID()}`, [event()], 'no_stream');
      await waitFor(() => wakes > before);
    } finally {
      unwatch();
      await store.close();
    }
  });

  it('tries a LISTEN connection that cannot be opened again with growing delays, not every second', async () => {
    // Nothing listens on port 1; the session pool is never asked, its connect is replaced.
    const unreachable = await PgSqlRunner.connect({ connectionString: 'postgres://postgres@127.0.0.1:1/none' });
    let attempts = 0;
    unreachable.sessions.connect = ((callback?: (err: Error) => void) => {
      attempts++;
      const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
      if (!callback) return Promise.reject(refused);
      setImmediate(() => callback(refused));
    }) as typeof unreachable.sessions.connect;
    jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask'] });
    const store = new SqlEventStore(unreachable);
    try {
      store.watchAppends(() => undefined);
      await jest.advanceTimersByTimeAsync(2 * 60_000);
      // 1, 2, 4, 8, 16, 30, 30, 30 s (each within 20%): 9 attempts in two minutes, not 120.
      expect(attempts).toBeGreaterThanOrEqual(7);
      expect(attempts).toBeLessThanOrEqual(10);
    } finally {
      await store.close();
      jest.useRealTimers();
      await unreachable.close();
    }
    expect(uncaught).toEqual([]);
  });
});
