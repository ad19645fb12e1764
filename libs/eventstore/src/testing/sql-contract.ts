/**
 * Rules of the SQL design (ARCHITECTURE section 3) beyond the port's contract, for both
 * SqlEventStore dialects. EventStoreDB does not share them: it does not keep event ids unique
 * within a stream, for instance, so they are not part of ./contract.ts.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Client } from 'pg';
import type { SqlRunner } from '@svc/platform';
import { AppendTooLargeError, WrongExpectedVersionError, type NewEvent } from '../port';
import { SqlEventStore } from '../sql-event-store';

export interface SqlContractFixture {
  store: SqlEventStore;
  runner: SqlRunner;
  cleanup: () => Promise<void>;
}

export function sqlEventStoreContract(name: string, create: () => Promise<SqlContractFixture>): void {
  describe(`SqlEventStore rules: ${name}`, () => {
    let fixture: SqlContractFixture | undefined;
    let store: SqlEventStore;
    let runner: SqlRunner;
    beforeAll(async () => {
      fixture = await create();
      ({ store, runner } = fixture);
    });
    afterAll(async () => {
      await fixture?.cleanup();
    });

    const run = randomBytes(4).toString('hex');
    let counter = 0;
    const uniqueStream = () => `sql${run}-${++counter}`;
    const event = (data: unknown = {}): NewEvent => ({ id: randomUUID(), type: 'Tested', data });
    const count = async (stream: string) =>
      Number((await runner.query<{ n: string }>('SELECT count(*)::text AS n FROM events WHERE stream = $1', [stream])).rows[0].n);

    it('init() can run again', async () => {
      await store.init();
      await expect(store.readStream(uniqueStream())).resolves.toEqual([]);
    });

    it('keeps the latest snapshot of a stream: an older one does not replace it, one of another version does (issue 45)', async () => {
      const stream = uniqueStream();
      await expect(store.readSnapshot(stream)).resolves.toBeNull();
      // Kept as written, its keys in their order (a jsonb column would sort them).
      const state = { zeta: { $bigint: '12345678901234567890' }, alpha: [1, 'two', null] };
      const eventId = randomUUID();
      await store.writeSnapshot(stream, { revision: 10n, eventId, version: 'v1', state });
      await store.writeSnapshot(stream, { revision: 7n, eventId: randomUUID(), version: 'v1', state: { older: true } });
      const kept = await store.readSnapshot(stream);
      expect(kept).toEqual({ revision: 10n, eventId, version: 'v1', state });
      expect(Object.keys(kept!.state as object)).toEqual(['zeta', 'alpha']);
      const newer = { revision: 12n, eventId: randomUUID(), version: 'v1', state: { newer: true } };
      await store.writeSnapshot(stream, newer);
      expect(await store.readSnapshot(stream)).toEqual(newer);
      // After an upgrade the writers' version replaces the kept one, whatever its revision.
      const upgraded = { revision: 3n, eventId: randomUUID(), version: 'v2', state: { upgraded: true } };
      await store.writeSnapshot(stream, upgraded);
      expect(await store.readSnapshot(stream)).toEqual(upgraded);
      // Another stream's snapshot is its own.
      await expect(store.readSnapshot(uniqueStream())).resolves.toBeNull();
    });

    it('an event id is unique within a stream: ids already elsewhere in it conflict', async () => {
      const stream = uniqueStream();
      const a = event();
      await store.append(stream, [a], 'no_stream');
      await store.append(stream, [event()], 0n);
      // The stream is at revision 1 as expected, but `a` is at revision 0, not 2.
      await expect(store.append(stream, [a], 1n)).rejects.toMatchObject({
        name: 'WrongExpectedVersionError',
        actual: 1n,
      });
      await expect(store.append(stream, [event(), a], 'any')).rejects.toBeInstanceOf(WrongExpectedVersionError);
      expect(await count(stream)).toBe(2);
      // The same event id in another stream is a different event.
      await expect(store.append(uniqueStream(), [a], 'no_stream')).resolves.toMatchObject({ nextRevision: 0n });
    });

    it('an append behind the stream is refused with the events written since its expected revision, in order (issue 45)', async () => {
      const stream = uniqueStream();
      await store.append(stream, [event({ n: 0 })], 'no_stream');
      await store.append(stream, [event({ n: 1 }), event({ n: 2 })], 0n);
      const refused = await store.append(stream, [event({ n: 'late' })], 0n).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(WrongExpectedVersionError);
      const { actual, newer } = refused as WrongExpectedVersionError;
      expect(actual).toBe(2n);
      expect(newer?.map((e) => [e.revision, e.data, e.stream])).toEqual([
        [1n, { n: 1 }, stream],
        [2n, { n: 2 }, stream],
      ]);
      // Each as a read gives it: the same id, type, metadata and position.
      expect(newer).toEqual((await store.readStream(stream)).slice(1));
      expect(await count(stream)).toBe(3);
    });

    it('a refusal carries no events when the append is more than 64 behind, nor for an expectation that is not a revision', async () => {
      const stream = uniqueStream();
      await store.append(stream, [event()], 'no_stream');
      await store.append(
        stream,
        Array.from({ length: 65 }, () => event()),
        0n,
      );
      const farBehind = (await store.append(stream, [event()], 0n).catch((err: unknown) => err)) as WrongExpectedVersionError;
      expect(farBehind).toMatchObject({ name: 'WrongExpectedVersionError', actual: 65n });
      expect(farBehind.newer).toBeUndefined();
      const exists = (await store.append(stream, [event()], 'no_stream').catch((err: unknown) => err)) as WrongExpectedVersionError;
      expect(exists).toMatchObject({ name: 'WrongExpectedVersionError', actual: 65n });
      expect(exists.newer).toBeUndefined();
    });

    it("a retry with 'stream_exists' or 'no_stream' finds its events wherever they were appended", async () => {
      const stream = uniqueStream();
      await store.append(stream, [event()], 'no_stream');
      const batch = [event(), event()];
      const original = await store.append(stream, batch, 0n);
      await store.append(stream, [event()], 2n);
      await expect(store.append(stream, batch, 'stream_exists')).resolves.toEqual(original);
      await expect(store.append(stream, batch, 'no_stream')).resolves.toEqual(original);
      await expect(store.append(stream, [batch[1], batch[0]], 'any')).rejects.toBeInstanceOf(WrongExpectedVersionError);
      expect(await count(stream)).toBe(4);
    });

    it('refuses an append that repeats an event id', async () => {
      const stream = uniqueStream();
      const a = event();
      await expect(store.append(stream, [a, { ...a }], 'no_stream')).rejects.toThrow('repeats an event id');
      expect(await count(stream)).toBe(0);
    });

    it('the size limit is exact: type + JSON data + JSON metadata, in bytes', async () => {
      const small = new SqlEventStore(runner, { maxAppendBytes: 100 });
      const stream = uniqueStream();
      // 'Tested' (6) + '{"s":"…"}' (8 + 2 per 'é') + '{}' (2) = 16 + 2n bytes.
      const sized = (n: number) => event({ s: 'é'.repeat(n) });
      await expect(small.append(stream, [sized(43)], 'no_stream')).rejects.toMatchObject({
        name: 'AppendTooLargeError',
        bytes: 102,
        limit: 100,
      });
      await expect(small.append(stream, [sized(42)], 'no_stream')).resolves.toMatchObject({ nextRevision: 0n });
      await expect(small.append(stream, [sized(0), sized(40)], 'any')).rejects.toBeInstanceOf(AppendTooLargeError);
      await small.close();
    });

    it('appendInTransaction refuses a transaction that has already written or is not READ COMMITTED', async () => {
      const stream = uniqueStream();
      await expect(
        runner.transaction(async (tx) => {
          await tx.query('SELECT pg_current_xact_id()'); // takes a transaction id, as a write would
          return store.appendInTransaction(tx, stream, [event()], 'no_stream');
        }),
      ).rejects.toThrow('already written');
      await expect(
        runner.transaction(async (tx) => {
          await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
          return store.appendInTransaction(tx, stream, [event()], 'no_stream');
        }),
      ).rejects.toThrow('READ COMMITTED');
      expect(await count(stream)).toBe(0);
      // Used properly, the events appear once the caller commits.
      const result = await runner.transaction((tx) => store.appendInTransaction(tx, stream, [event()], 'no_stream'));
      expect(result.nextRevision).toBe(0n);
      expect((await store.readStream(stream))[0].position).toBe(result.position);
    });

    it('positions are (transaction id, sequence) of the writing transaction', async () => {
      const stream = uniqueStream();
      const result = await store.append(stream, [event(), event()], 'no_stream');
      const { rows } = await runner.query<{ tx: string; seq: string }>(
        'SELECT tx::text AS tx, seq::text AS seq FROM events WHERE stream = $1 ORDER BY revision',
        [stream],
      );
      expect(rows[0].tx).toBe(rows[1].tx);
      expect(BigInt(rows[1].seq) > BigInt(rows[0].seq)).toBe(true);
      expect(result.position).toBe(`${rows[1].tx.padStart(20, '0')}/${rows[1].seq.padStart(20, '0')}`);
    });

    it('the last committed position is the last append, visible to global reads or not yet', async () => {
      const first = await store.append(uniqueStream(), [event()], 'no_stream');
      expect(await store.lastCommittedPosition()).toBe(first.position);
      if (runner.dialect !== 'postgres') return; // PGlite has one connection: nothing is held back there
      // A transaction open elsewhere on the server holds every later append back from global reads.
      const blocker = new Client({ connectionString: process.env.DATABASE_URL });
      await blocker.connect();
      try {
        await blocker.query('BEGIN');
        await blocker.query('SELECT pg_current_xact_id()');
        const held = await store.append(uniqueStream(), [event()], 'no_stream');
        expect(await store.readAll({ after: first.position })).toEqual([]);
        expect(await store.lastCommittedPosition()).toBe(held.position);
      } finally {
        await blocker.query('ROLLBACK');
        await blocker.end();
      }
    });

    describe('group commit: the appends that queue while a group is on its way go together', () => {
      // One group in flight: the first append goes alone, and every append made while it is on
      // its way waits and goes in the next group.
      const grouped = () => new SqlEventStore(runner, { maxGroupsInFlight: 1 });
      const transactionsOf = async (streams: string[]) =>
        (await runner.query<{ tx: string }>('SELECT DISTINCT tx::text AS tx FROM events WHERE stream = ANY($1)', [streams])).rows;

      it('share one transaction, each append with its own revision and position, in the order they were made', async () => {
        const g = grouped();
        const lead = g.append(uniqueStream(), [event()], 'no_stream');
        const streams = Array.from({ length: 20 }, uniqueStream);
        const batches = streams.map(() => [event({ n: 1 }), event({ n: 2 })]);
        const results = Promise.all(streams.map((s, i) => g.append(s, batches[i], 'no_stream')));
        await lead;
        const appended = await results;
        expect(appended.map((r) => r.nextRevision)).toEqual(streams.map(() => 1n));
        expect(await transactionsOf(streams)).toHaveLength(1);
        for (let i = 1; i < appended.length; i++) expect(appended[i].position > appended[i - 1].position).toBe(true);
        for (const [i, s] of streams.entries()) {
          const read = await store.readStream(s);
          expect(read.map((e) => e.id)).toEqual(batches[i].map((e) => e.id));
          expect(read[1].position).toBe(appended[i].position);
        }
        await g.close();
      });

      it('by default one group is on its way at a time: the first append made meanwhile does not go alone', async () => {
        const g = new SqlEventStore(runner);
        const lead = uniqueStream();
        const pending = g.append(lead, [event()], 'no_stream');
        const followers = [uniqueStream(), uniqueStream()];
        const appended = Promise.all(followers.map((s) => g.append(s, [event()], 'no_stream')));
        await pending;
        await appended;
        expect(await transactionsOf(followers)).toHaveLength(1);
        expect((await transactionsOf([lead, ...followers])).length).toBe(2);
        await g.close();
      });

      it('an append whose expectation fails fails alone, and the rest of its group is written', async () => {
        const g = grouped();
        const [before, behind, after] = [uniqueStream(), uniqueStream(), uniqueStream()];
        await store.append(behind, [event()], 'no_stream');
        const lead = g.append(uniqueStream(), [event()], 'no_stream');
        const outcomes = Promise.allSettled([
          g.append(before, [event()], 'no_stream'),
          g.append(behind, [event()], 5n),
          g.append(after, [event()], 'no_stream'),
        ]);
        await lead;
        const [a, b, c] = await outcomes;
        expect(a.status).toBe('fulfilled');
        expect(c.status).toBe('fulfilled');
        expect(b).toMatchObject({ status: 'rejected', reason: { name: 'WrongExpectedVersionError', actual: 0n } });
        expect([await count(before), await count(behind), await count(after)]).toEqual([1, 1, 1]);
        expect(await transactionsOf([before, after])).toHaveLength(1);
        await g.close();
      });

      it('an append the database refuses fails alone: its group goes again one append at a time', async () => {
        const g = grouped();
        const [first, refused, last] = [uniqueStream(), uniqueStream(), uniqueStream()];
        const lead = g.append(uniqueStream(), [event()], 'no_stream');
        const outcomes = Promise.allSettled([
          g.append(first, [event()], 'no_stream'),
          // Not a uuid: the store's column refuses it, which nothing before the database checks.
          g.append(refused, [{ id: 'not-a-uuid', type: 'Tested', data: {} }], 'no_stream'),
          g.append(last, [event()], 'no_stream'),
        ]);
        await lead;
        const [a, b, c] = await outcomes;
        expect([a.status, b.status, c.status]).toEqual(['fulfilled', 'rejected', 'fulfilled']);
        expect(String((b as PromiseRejectedResult).reason)).toMatch(/uuid/);
        expect([await count(first), await count(refused), await count(last)]).toEqual([1, 0, 1]);
        await g.close();
      });

      it('appends to one stream in one group are written in order, each checked against those before it', async () => {
        const g = grouped();
        const stream = uniqueStream();
        const [e1, e2, e3] = [event(), event(), event()];
        const lead = g.append(uniqueStream(), [event()], 'no_stream');
        const outcomes = Promise.allSettled([
          g.append(stream, [e1], 'no_stream'),
          g.append(stream, [e2], 0n),
          g.append(stream, [e3], 'no_stream'),
          // A retry of the first, in the same group: its original result, nothing written.
          g.append(stream, [e1], 'no_stream'),
        ]);
        await lead;
        const [a, b, c, retry] = await outcomes;
        expect(a).toMatchObject({ status: 'fulfilled', value: { nextRevision: 0n } });
        expect(b).toMatchObject({ status: 'fulfilled', value: { nextRevision: 1n } });
        expect(c).toMatchObject({ status: 'rejected', reason: { name: 'WrongExpectedVersionError', actual: 1n } });
        expect(retry).toEqual(a);
        expect((await store.readStream(stream)).map((e) => e.id)).toEqual([e1.id, e2.id]);
        await g.close();
      });

      it('groups that name the same streams in opposite orders lock them in one order, and never deadlock', async () => {
        if (runner.dialect !== 'postgres') return; // PGlite has one connection: nothing runs beside a group
        const [s1, s2] = [uniqueStream(), uniqueStream()];
        const [g1, g2] = [grouped(), grouped()];
        // A third session holds both streams' locks, so that both groups are sent and wait;
        // locking in the order of each group's appends, each would get one lock and wait for
        // the other's (PostgreSQL would end one with a deadlock error after a second).
        let release!: () => void;
        const released = new Promise<void>((resolve) => (release = resolve));
        let held!: () => void;
        const holding = new Promise<void>((resolve) => (held = resolve));
        const gate = runner.transaction(async (tx) => {
          await tx.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0)), pg_advisory_xact_lock(hashtextextended($2, 0))', [s1, s2]);
          held();
          await released;
        });
        await holding;
        const leads = [g1.append(uniqueStream(), [event()], 'no_stream'), g2.append(uniqueStream(), [event()], 'no_stream')];
        const [first, second] = [
          [event(), event()],
          [event(), event()],
        ];
        const appends = Promise.all([
          g1.append(s1, [first[0]], 'any'),
          g1.append(s2, [first[1]], 'any'),
          g2.append(s2, [second[0]], 'any'),
          g2.append(s1, [second[1]], 'any'),
        ]);
        await Promise.all(leads);
        const waiting = async () =>
          Number((await runner.query<{ n: string }>(`SELECT count(*)::text AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`)).rows[0].n);
        for (let i = 0; i < 200 && (await waiting()) < 2; i++) await new Promise((r) => setTimeout(r, 10));
        expect(await waiting()).toBeGreaterThanOrEqual(2);
        release();
        await gate;
        await expect(appends).resolves.toHaveLength(4);
        expect([await count(s1), await count(s2)]).toEqual([2, 2]);
        // Each group committed as one: after a deadlock, its appends would have gone again one
        // at a time, in transactions of their own.
        const transactionOfIds = async (ids: string[]) =>
          (await runner.query<{ tx: string }>('SELECT DISTINCT tx::text AS tx FROM events WHERE id = ANY($1::uuid[])', [ids])).rows;
        expect(await transactionOfIds(first.map((e) => e.id))).toHaveLength(1);
        expect(await transactionOfIds(second.map((e) => e.id))).toHaveLength(1);
        await Promise.all([g1.close(), g2.close()]);
      });
    });
  });
}
