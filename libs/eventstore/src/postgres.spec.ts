import { Client, type PoolClient } from 'pg';
import { PgSqlRunner, type SqlExecutor } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import { WrongExpectedVersionError, type NewEvent, type RecordedEvent, type Upcaster } from './port';
import { START, decodePosition } from './position';
import { SINGLES_APPEND } from './sql/append';
import { NOTIFY_GAP_MS } from './sql/notify';
import { SqlEventStore, type SqlEventStoreOptions } from './sql-event-store';
import { eventStoreContract, sleep, waitFor } from './testing/contract';
import { sqlEventStoreContract } from './testing/sql-contract';
import { visibleUpTo } from './testing/visible';
import { randomUUID } from 'node:crypto';

const POLL_MS = 50;

async function openStore(runner: PgSqlRunner, upcast?: Upcaster): Promise<SqlEventStore> {
  const store = new SqlEventStore(runner, { pollIntervalMs: POLL_MS, upcast });
  await store.init();
  return store;
}

eventStoreContract('postgres', async () => {
  const runner = await freshPgRunner('es');
  const store = await openStore(runner);
  const closing: (() => Promise<void>)[] = [() => store.close(), () => runner.close()];
  return {
    store,
    // Another pool on the same schema stands for another process. It defaults to
    // SERIALIZABLE, a setting a DBA may choose: appends must still conflict cleanly.
    makeSecondStore: async () => {
      const second = await PgSqlRunner.connect({
        connectionString: process.env.DATABASE_URL,
        options: `-c search_path=${runner.schema} -c default_transaction_isolation=serializable`,
      });
      const secondStore = await openStore(second);
      closing.unshift(
        () => secondStore.close(),
        () => second.close(),
      );
      return secondStore;
    },
    makeUpcastingStore: async (upcast) => {
      const upcasting = await openStore(runner, upcast);
      closing.unshift(() => upcasting.close());
      return upcasting;
    },
    cleanup: async () => {
      for (const close of closing) await close();
    },
  };
});

sqlEventStoreContract('postgres', async () => {
  const runner = await freshPgRunner('es');
  const store = await openStore(runner);
  return {
    store,
    runner,
    cleanup: async () => {
      await store.close();
      await runner.close();
    },
  };
});

/** A count (`n`) read from the statistics views once this one connection's pending statistics have reached them. */
async function flushedCount(one: PgSqlRunner, sql: string): Promise<number> {
  // Pending statistics reach the views once the backend has gone idle after this request.
  await one.query('SELECT pg_stat_force_next_flush()');
  await sleep(100);
  const { rows } = await one.query<{ n: string }>(sql);
  return Number(rows[0].n);
}

describe('SqlEventStore on PostgreSQL server', () => {
  let runner: PgSqlRunner & { schema: string };
  let store: SqlEventStore;
  beforeAll(async () => {
    runner = await freshPgRunner('es');
    store = await openStore(runner);
  });
  afterAll(async () => {
    await store?.close();
    await runner?.close();
  });

  const event = (type: string): NewEvent => ({ id: randomUUID(), type, data: {} });

  it('looks a retried append up by its event ids, not by reading the stream: the cost of an append does not grow with the stream', async () => {
    // A schema of its own (the other tests read the whole log), on one connection: the
    // statistics read are those of the backend that appended.
    const own = await freshPgRunner('es');
    await own.close();
    const one = await PgSqlRunner.connect({ connectionString: process.env.DATABASE_URL, options: `-c search_path=${own.schema}`, max: 1 });
    try {
      const long = await openStore(one);
      const stream = `long-${randomUUID()}`;
      await long.append(
        stream,
        Array.from({ length: 2000 }, () => event('Filled')),
        'no_stream',
      );
      const indexReads = () =>
        flushedCount(
          one,
          "SELECT coalesce(sum(idx_tup_read), 0)::text AS n FROM pg_stat_user_indexes WHERE schemaname = current_schema() AND relname = 'events'",
        );
      const before = await indexReads();
      await long.append(stream, [event('Next')], 1999n);
      const read = (await indexReads()) - before;
      // The last revision (one entry) and the new event's id (none yet): a scan of the stream reads 2,000.
      expect(read).toBeGreaterThan(0);
      expect(read).toBeLessThan(10);
      await long.close();
    } finally {
      await one.close();
    }
  });

  describe("appends of one event, at an exact revision or to a new stream, alone or in a group of distinct streams, are one INSERT under their streams' locks; what it cannot write, the group function answers (issue 45)", () => {
    /** A store on one connection of its own schema that counts its calls of the group function. */
    async function countingStore() {
      const own = await freshPgRunner('es');
      await own.close();
      const one = await PgSqlRunner.connect({
        connectionString: process.env.DATABASE_URL,
        options: `-c search_path=${own.schema} -c track_functions=pl`,
        max: 1,
      });
      const counted = await openStore(one);
      const calls = () =>
        flushedCount(
          one,
          "SELECT coalesce(sum(calls), 0)::text AS n FROM pg_stat_user_functions WHERE schemaname = current_schema() AND funcname = 'eventstore_append_group'",
        );
      const closing: Array<() => Promise<void>> = [() => counted.close(), () => one.close()];
      /** A store of another process on the same schema, closed with this one. */
      const anotherProcess = async () => {
        const other = await PgSqlRunner.connect({ connectionString: process.env.DATABASE_URL, options: `-c search_path=${own.schema}`, max: 1 });
        const elsewhere = await openStore(other);
        closing.unshift(
          () => elsewhere.close(),
          () => other.close(),
        );
        return elsewhere;
      };
      const close = async () => {
        for (const step of closing) await step();
      };
      return { store: counted, runner: one, calls, anotherProcess, close };
    }

    it('writes a new stream and an exact revision without the function, and the function answers a retry, a stale and an early revision', async () => {
      const { store: s, calls, close } = await countingStore();
      try {
        const stream = `lone-${randomUUID()}`;
        const [e0, e1, late, early] = [event('A'), event('B'), event('Late'), event('Early')];
        const c0 = await calls();
        const first = await s.append(stream, [e0], 'no_stream');
        const second = await s.append(stream, [e1], 0n);
        expect([first.nextRevision, second.nextRevision]).toEqual([0n, 1n]);
        expect(second.position > first.position).toBe(true);
        expect(await calls()).toBe(c0);

        // The same append again (a retry after a lost answer): its original result, nothing written.
        expect(await s.append(stream, [e1], 0n)).toEqual(second);
        expect(await calls()).toBe(c0 + 1);
        // Behind the stream: refused with what was written since, for the writer to fold.
        const stale = await s.append(stream, [late], 0n).catch((err: unknown) => err);
        expect(stale).toBeInstanceOf(WrongExpectedVersionError);
        expect((stale as WrongExpectedVersionError).newer?.map((e) => e.id)).toEqual([e1.id]);
        // Ahead of the stream: refused, and no gap written.
        const ahead = await s.append(stream, [early], 5n).catch((err: unknown) => err);
        expect(ahead).toBeInstanceOf(WrongExpectedVersionError);
        expect((ahead as WrongExpectedVersionError).actual).toBe(1n);
        expect(await calls()).toBe(c0 + 3);
        expect((await s.readStream(stream)).map((e) => [e.revision, e.id])).toEqual([
          [0n, e0.id],
          [1n, e1.id],
        ]);
        // An append of two events keeps to the function.
        await s.append(`two-${randomUUID()}`, [event('X'), event('Y')], 'no_stream');
        expect(await calls()).toBe(c0 + 4);
      } finally {
        await close();
      }
    });

    it("after a revision is taken by another process, that stream's next lone append goes to the function, the one after to the INSERT again; other streams do not", async () => {
      const { store: s, runner: one, calls, anotherProcess, close } = await countingStore();
      const elsewhere = await anotherProcess();
      try {
        const [contended, quiet] = [`hot-${randomUUID()}`, `quiet-${randomUUID()}`];
        await s.append(contended, [event('A')], 'no_stream');
        await elsewhere.append(contended, [event('B')], 0n);
        const c0 = await calls();
        // This process still believes revision 0 is the last: its INSERT is refused, the function answers.
        await expect(s.append(contended, [event('C')], 0n)).rejects.toBeInstanceOf(WrongExpectedVersionError);
        expect(await calls()).toBe(c0 + 1);
        await s.append(contended, [event('D')], 1n);
        expect(await calls()).toBe(c0 + 2);
        await s.append(quiet, [event('E')], 'no_stream');
        expect(await calls()).toBe(c0 + 2);
        // Refused once: after one append by the function, the stream goes back to the INSERT.
        await s.append(contended, [event('F')], 2n);
        expect(await calls()).toBe(c0 + 2);
        expect((await one.query<{ n: string }>('SELECT count(*)::text AS n FROM events WHERE stream = $1', [contended])).rows[0].n).toBe('4');
      } finally {
        await close();
      }
    });

    it('a stream refused again and again skips the INSERT for twice as many appends each time, and comes back to it as the INSERT writes', async () => {
      const { store: s, calls, anotherProcess, close } = await countingStore();
      const elsewhere = await anotherProcess();
      try {
        const stream = `shared-${randomUUID()}`;
        await s.append(stream, [event('A')], 'no_stream');
        let revision = 0n;
        /** Another process appends after `revision`; this one, still there, is refused (its INSERT, when it tries one, and the function). */
        const raceAndLose = async () => {
          await elsewhere.append(stream, [event('Theirs')], revision);
          await expect(s.append(stream, [event('Mine')], revision)).rejects.toBeInstanceOf(WrongExpectedVersionError);
          revision += 1n;
        };
        /** This process's next `n` appends: how many of them the function wrote. */
        const byFunction = async (n: number) => {
          const before = await calls();
          for (let i = 0; i < n; i++) revision = (await s.append(stream, [event('Mine')], revision)).nextRevision;
          return (await calls()) - before;
        };
        await raceAndLose(); // level 0: 1 append skips
        expect(await byFunction(1)).toBe(1);
        await raceAndLose(); // the INSERT was refused again, the stream still remembered: level 1, 2 skip
        expect(await byFunction(2)).toBe(2);
        await raceAndLose(); // level 2: 4 skip
        expect(await byFunction(4)).toBe(4);
        // Skips spent, the INSERT writes: level 1, then 0, then the stream is forgotten, each write by the INSERT.
        expect(await byFunction(3)).toBe(0);
        // Forgotten: a refusal now starts over at one skip.
        await raceAndLose();
        expect(await byFunction(2)).toBe(1);
        const written = await s.readStream(stream);
        expect(written.map((e) => e.revision)).toEqual(written.map((_, i) => BigInt(i)));
      } finally {
        await close();
      }
    });

    const transactionsOf = async (executor: PgSqlRunner, streams: string[]) =>
      (await executor.query<{ tx: string }>('SELECT DISTINCT tx::text AS tx FROM events WHERE stream = ANY($1)', [streams])).rows.length;

    it('a group of such appends, of distinct streams, is one INSERT in one transaction, in the order they were made; the function answers the one it could not write', async () => {
      const { store: s, runner: one, calls, close } = await countingStore();
      try {
        const early = `early-${randomUUID()}`;
        const behind = `behind-${randomUUID()}`;
        await s.append(early, [event('A')], 'no_stream');
        await s.append(behind, [event('A')], 'no_stream');
        await s.append(behind, [event('B')], 0n);
        const c0 = await calls();
        // One group on its way at a time: the lead goes alone, the rest queue into the next group.
        const lead = s.append(`lead-${randomUUID()}`, [event('Lead')], 'no_stream');
        const fresh = Array.from({ length: 5 }, () => `fresh-${randomUUID()}`);
        // Data and metadata the statement carries as JSON within JSON: quotes, backslashes, escapes spelled out, other scripts.
        const awkward = (i: number): NewEvent => ({
          ...event('New'),
          data: { text: `"quoted" \\ back\\slash \\u0000 ${i} é 😀`, nested: [{ a: null, b: [1.5, true] }] },
          metadata: { 'key "with" quotes': '\n' },
        });
        const freshEvents = fresh.map((_, i) => awkward(i));
        const grouped = [...fresh.map((stream, i) => s.append(stream, [freshEvents[i]], 'no_stream')), s.append(behind, [event('C')], 1n)];
        await lead;
        const results = await Promise.all(grouped);
        expect(results.map((r) => r.nextRevision)).toEqual([0n, 0n, 0n, 0n, 0n, 2n]);
        for (const [i, stream] of fresh.entries()) {
          const [stored] = await s.readStream(stream);
          expect({ id: stored.id, type: stored.type, data: stored.data, metadata: stored.metadata }).toEqual(freshEvents[i]);
        }
        for (let i = 1; i < results.length; i++) expect(results[i].position > results[i - 1].position).toBe(true);
        expect((await transactionsOf(one, [...fresh, behind])) - 2).toBe(1); // behind's first two appends had their own
        expect(await calls()).toBe(c0);

        // An expected revision the stream has not reached: that append alone goes to the function.
        const next = s.append(`lead-${randomUUID()}`, [event('Lead')], 'no_stream');
        const ahead = s.append(early, [event('Early')], 4n).catch((err: unknown) => err);
        const beside = s.append(behind, [event('D')], 2n);
        await next;
        expect((await beside).nextRevision).toBe(3n);
        const refused = await ahead;
        expect(refused).toBeInstanceOf(WrongExpectedVersionError);
        expect((refused as WrongExpectedVersionError).actual).toBe(0n);
        expect(await calls()).toBe(c0 + 1);
        expect((await s.readStream(early)).map((e) => e.type)).toEqual(['A']);
      } finally {
        await close();
      }
    });

    it('probes the index once per grouped append, never hashing the whole events table, even in a plan made while the table is small', async () => {
      const { store: s, runner: one, close } = await countingStore();
      try {
        await s.append(`small-${randomUUID()}`, [event('A')], 'no_stream');
        // A connection keeps a generic plan once it has one: here it gets one at once.
        const plan = await one.transaction(async (tx) => {
          await tx.query('SET LOCAL plan_cache_mode = force_generic_plan');
          await tx.query(`PREPARE grouped_probe(text) AS ${SINGLES_APPEND}`);
          const { rows } = await tx.query<{ 'QUERY PLAN': string }>("EXPLAIN EXECUTE grouped_probe('[]')");
          await tx.query('DEALLOCATE grouped_probe');
          return rows.map((r) => r['QUERY PLAN']).join('\n');
        });
        expect(plan).toMatch(/SubPlan/);
        expect(plan).not.toMatch(/hashed SubPlan/);
      } finally {
        await close();
      }
    });

    it('a group refused whole for a revision another process took: the function answers each of its appends, and their streams go to it next', async () => {
      const { store: s, runner: one, calls, anotherProcess, close } = await countingStore();
      const elsewhere = await anotherProcess();
      try {
        const [taken, free, added] = [`taken-${randomUUID()}`, `free-${randomUUID()}`, `added-${randomUUID()}`];
        await s.append(taken, [event('A')], 'no_stream');
        await s.append(free, [event('A')], 'no_stream');
        const theirs = event('Theirs');
        await elsewhere.append(taken, [theirs], 0n);
        const c0 = await calls();
        const lead = s.append(`lead-${randomUUID()}`, [event('Lead')], 'no_stream');
        const stale = s.append(taken, [event('Mine')], 0n).catch((err: unknown) => err);
        const others = [s.append(free, [event('B')], 0n), s.append(added, [event('New')], 'no_stream')];
        await lead;
        expect((await Promise.all(others)).map((r) => r.nextRevision)).toEqual([1n, 0n]);
        const refused = await stale;
        expect(refused).toBeInstanceOf(WrongExpectedVersionError);
        expect((refused as WrongExpectedVersionError).newer?.map((e) => e.id)).toEqual([theirs.id]);
        expect(await calls()).toBe(c0 + 1);
        await s.append(free, [event('C')], 1n);
        expect(await calls()).toBe(c0 + 2);
        expect((await one.query<{ n: string }>('SELECT count(*)::text AS n FROM events WHERE stream = ANY($1)', [[taken, free, added]])).rows[0].n).toBe('6');
      } finally {
        await close();
      }
    });

    it('writers racing on one stream from separate connections: contiguous revisions, and the log reads them in revision order', async () => {
      const stream = `race-${randomUUID()}`;
      // A schema of its own: the other tests read the whole log.
      const own = await freshPgRunner('es');
      const reader = await openStore(own);
      const writers = await Promise.all(
        Array.from({ length: 4 }, async () => {
          const pool = await PgSqlRunner.connect({ connectionString: process.env.DATABASE_URL, options: `-c search_path=${own.schema}`, max: 2 });
          return { pool, store: await openStore(pool) };
        }),
      );
      try {
        const written: string[] = [];
        await Promise.all(
          writers.map(async ({ store: w }) => {
            for (let n = 0; n < 25;) {
              const [last] = await w.readStream(stream, { direction: 'backwards', maxCount: 1 });
              const e = event('Raced');
              try {
                await w.append(stream, [e], last ? last.revision : 'no_stream');
                written.push(e.id);
                n++;
              } catch (err) {
                if (!(err instanceof WrongExpectedVersionError)) throw err;
              }
            }
          }),
        );
        const read = await reader.readStream(stream);
        expect(read.map((e) => e.revision)).toEqual(Array.from({ length: 100 }, (_, i) => BigInt(i)));
        expect(new Set(read.map((e) => e.id))).toEqual(new Set(written));
        // Global reads stop below a transaction open anywhere on the server (another suite's).
        await visibleUpTo(own, read[read.length - 1].position);
        const logged = await reader.readAll({ after: START, maxCount: 1000 });
        expect(logged.map((e) => e.id)).toEqual(read.map((e) => e.id));
      } finally {
        for (const { store: w, pool } of writers) {
          await w.close();
          await pool.close();
        }
        await reader.close();
        await own.close();
      }
    });
  });

  it('delivers an event whose transaction commits after a later one (late commit)', async () => {
    const received: RecordedEvent[] = [];
    const subscription = store.subscribeToAll({ after: START }, (e) => {
      received.push(e);
    });
    const w = event('Before');
    await store.append('late-w', [w], 'no_stream');
    await waitFor(() => received.length === 1); // the reader is live and has processed W
    const checkpoint = received[0].position;

    // A takes its transaction id and seq first and stays open, on its own connection.
    const a = event('A');
    const b = event('B');
    const connection = await runner.pool.connect();
    try {
      await connection.query('BEGIN');
      const aResult = await store.appendInTransaction(executorOn(connection), 'late-x', [a], 'no_stream');
      // B starts after A, commits before it.
      const bResult = await store.append('late-y', [b], 'no_stream');

      const { minor: aSeq, major: aTx } = decodePosition(aResult.position);
      const { minor: bSeq, major: bTx } = decodePosition(bResult.position);
      expect(aSeq < bSeq && aTx < bTx).toBe(true);

      // The naive reader ("committed rows with seq > checkpoint") sees B now and moves past A's seq...
      const naive = (after: string) =>
        runner.query<{ id: string; seq: string }>('SELECT id::text AS id, seq::text AS seq FROM events WHERE seq > $1::bigint ORDER BY seq', [after]);
      const naiveBatch = (await naive(decodePosition(checkpoint).minor.toString())).rows;
      expect(naiveBatch.map((r) => r.id)).toEqual([b.id]);

      // ...while ours holds B back as long as an older transaction may still commit.
      expect(await store.readAll({ after: checkpoint })).toEqual([]);
      expect(await store.countEventsAfter(checkpoint)).toBe(0);
      await sleep(6 * POLL_MS);
      expect(received).toHaveLength(1);

      await connection.query('COMMIT');
      await waitFor(() => received.length === 3);
      expect(received.map((e) => e.id)).toEqual([w.id, a.id, b.id]);
      expect(received.map((e) => e.position)).toEqual([checkpoint, aResult.position, bResult.position]);
      expect((await store.readAll({ after: checkpoint })).map((e) => e.id)).toEqual([a.id, b.id]);

      // The naive reader, resuming from its checkpoint, has lost A for good.
      expect((await naive(naiveBatch[0].seq)).rows).toEqual([]);
    } finally {
      await connection.query('ROLLBACK').catch(() => undefined); // only if an assertion failed mid-way
      connection.release();
      await subscription.stop();
    }
  });

  /**
   * A store on one connection, so every statement of it comes from one backend, and the NOTIFYs
   * that backend sends on the append channel as they arrive: the channel is the database's, which
   * other suites share, so only that backend's notifications count.
   */
  async function notifyingStore(options: SqlEventStoreOptions = {}) {
    const single = await PgSqlRunner.connect({ connectionString: process.env.DATABASE_URL, options: `-c search_path=${runner.schema}`, max: 1 });
    const store = new SqlEventStore(single, options);
    const listener = new Client({ connectionString: process.env.DATABASE_URL });
    const [{ pid }] = (await single.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows;
    const received: Array<{ payload: string; at: number }> = [];
    await listener.connect();
    listener.on(
      'notification',
      (n) => n.processId === pid && n.channel === 'eventstore_appended' && received.push({ payload: n.payload ?? '', at: performance.now() }),
    );
    await listener.query('LISTEN eventstore_appended');
    const close = async () => {
      await listener.end();
      await store.close();
      await single.close();
    };
    return { store, received, close };
  }

  it('wakes the other processes after a group of appends with one NOTIFY, sent by the group itself', async () => {
    const { store: grouped, received, close } = await notifyingStore({ maxGroupsInFlight: 1 });
    try {
      // The lead writes nothing (an empty append only checks), so it notifies nobody: only the
      // group that queued behind it can.
      const lead = grouped.append(`group-wake-lead-${randomUUID()}`, [], 'any');
      const appends = Array.from({ length: 5 }, () =>
        grouped.append(`group-wake-${randomUUID()}`, [{ id: randomUUID(), type: 'Tested', data: {} }], 'no_stream'),
      );
      await lead;
      await Promise.all(appends);
      await waitFor(() => received.length > 0);
      await sleep(100); // a second NOTIFY, sent apart after the commit, would have arrived by now
      expect(received.map((r) => r.payload)).toEqual([`appended ${runner.schema}`]);
    } finally {
      await close();
    }
  });

  it("sends a reader's catch-up request to every process as a NOTIFY of its own, at most one per 20 ms", async () => {
    const { store: asking, received, close } = await notifyingStore();
    try {
      // Three readers ask at once: the first request goes now, the other two together once the gap is over.
      // (Measured from the asking: a listener slowed down may take two NOTIFYs in one read.)
      const first = performance.now();
      asking.requestCatchUp();
      asking.requestCatchUp();
      asking.requestCatchUp();
      await waitFor(() => received.length >= 2);
      await sleep(100);
      expect(received.map((r) => r.payload)).toEqual([`catch-up ${runner.schema}`, `catch-up ${runner.schema}`]);
      expect(received[1].at - first).toBeGreaterThanOrEqual(10);
      // After a quiet spell longer than the gap, a request goes at once again.
      const asked = performance.now();
      asking.requestCatchUp();
      await waitFor(() => received.length > 2);
      expect(received[2].at - asked).toBeLessThan(200);
    } finally {
      await close();
    }
  });

  it('sends at most one NOTIFY per gap (NOTIFY_GAP_MS) for lone appends, the last append always covered, and one still waiting on close()', async () => {
    const { store: appending, received: all, close } = await notifyingStore();
    const received = () => all.filter((r) => r.payload === `appended ${runner.schema}`).map((r) => r.at);
    try {
      // Five lone appends one after the other (a request's hold and charge, the next request's):
      // the first wakes the others at once, the rest are covered together after the gap.
      const started = performance.now();
      for (let i = 0; i < 5; i++) await appending.append(`gap-${randomUUID()}`, [event(`n${i}`)], 'no_stream');
      const appended = performance.now();
      await waitFor(() => received().length >= 2);
      await sleep(NOTIFY_GAP_MS + 100);
      const burst = received();
      // One at once, then at most one per gap while the appends went on: five appends in a
      // gap give two; on a machine slow enough that they span several gaps, one more per gap.
      expect(burst.length).toBeLessThanOrEqual(1 + Math.ceil((appended - started) / NOTIFY_GAP_MS));
      // Fewer than the appends, unless each append took a gap or more (a machine that loaded).
      if (appended - started < 4 * NOTIFY_GAP_MS) expect(burst.length).toBeLessThan(5);
      const [first] = burst;
      const last = burst[burst.length - 1];
      expect(first - started).toBeLessThan(appended - started + 50);
      // The second waited for the gap's end. Measured from the first append, not from the first
      // NOTIFY: a listener slowed down may take two NOTIFYs in one read.
      expect(burst[1] - started).toBeGreaterThanOrEqual(NOTIFY_GAP_MS - 5);
      // The last came after the last append committed: it covers it.
      expect(last).toBeGreaterThanOrEqual(appended);
      // After a quiet spell longer than the gap, an append wakes the others at once again.
      const again = performance.now();
      await appending.append(`gap-${randomUUID()}`, [event('quiet')], 'no_stream');
      await waitFor(() => received().length > burst.length);
      expect(received()[burst.length] - again).toBeLessThan(200);
      // Two appends within the gap, then close(): the second's NOTIFY is sent before the store closes.
      await sleep(NOTIFY_GAP_MS + 50);
      await appending.append(`gap-${randomUUID()}`, [event('a')], 'no_stream');
      await appending.append(`gap-${randomUUID()}`, [event('b')], 'no_stream');
      await appending.close();
      await waitFor(() => received().length >= burst.length + 3);
      expect(received()).toHaveLength(burst.length + 3);
    } finally {
      await close();
    }
  });

  it("wakes only the stores of its own schema: another schema's appends and catch-up requests on the same database are not theirs", async () => {
    const other = await freshPgRunner('es_other');
    const otherStore = await openStore(other);
    const watcher = new SqlEventStore(runner);
    const hints: string[] = [];
    const unwatch = watcher.watchAppends((hint) => hints.push(hint));
    try {
      await waitFor(() => hints.length > 0); // the look it takes once its LISTEN is in effect
      hints.length = 0;
      await otherStore.append(`elsewhere-${randomUUID()}`, [event('Elsewhere')], 'no_stream');
      otherStore.requestCatchUp();
      // A notice of its own schema, sent after those: once it has come, the others would have.
      await runner.query("SELECT pg_notify('eventstore_appended', 'catch-up ' || current_schema())");
      await waitFor(() => hints.length > 0);
      expect(hints).toEqual(['catch-up']);
      // A payload without a schema comes from a version before it: it wakes every store.
      await other.query("SELECT pg_notify('eventstore_appended', '')");
      await waitFor(() => hints.length > 1);
      expect(hints).toEqual(['catch-up', 'appended']);
    } finally {
      unwatch();
      await watcher.close();
      await otherStore.close();
      await other.close();
    }
  });

  it('gives the LISTEN connection back when the last watcher leaves and on close()', async () => {
    const watcher = new SqlEventStore(runner);
    const checkedOut = () => runner.sessions.totalCount - runner.sessions.idleCount;
    const unwatch = watcher.watchAppends(() => undefined);
    await waitFor(() => checkedOut() === 1);
    unwatch();
    await waitFor(() => checkedOut() === 0);
    watcher.watchAppends(() => undefined);
    await waitFor(() => checkedOut() === 1);
    await watcher.close();
    expect(checkedOut()).toBe(0);
  });
});

function executorOn(connection: PoolClient): SqlExecutor {
  return {
    query: async <T>(sql: string, params?: unknown[]) => ({ rows: (await connection.query(sql, params)).rows as T[] }),
  };
}
