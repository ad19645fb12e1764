/**
 * Rules of the SQL design (ARCHITECTURE section 3) beyond the port's contract, for both
 * SqlEventStore dialects. EventStoreDB does not share them: it does not keep event ids unique
 * within a stream, for instance, so they are not part of ./contract.ts.
 */
import { randomBytes, randomUUID } from 'node:crypto';
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
      Number(
        (await runner.query<{ n: string }>('SELECT count(*)::text AS n FROM events WHERE stream = $1', [stream]))
          .rows[0].n,
      );

    it('init() can run again', async () => {
      await store.init();
      await expect(store.readStream(uniqueStream())).resolves.toEqual([]);
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

    it("a retry with 'stream_exists' or 'no_stream' finds its events wherever they were appended", async () => {
      const stream = uniqueStream();
      await store.append(stream, [event()], 'no_stream');
      const batch = [event(), event()];
      const original = await store.append(stream, batch, 0n);
      await store.append(stream, [event()], 2n);
      await expect(store.append(stream, batch, 'stream_exists')).resolves.toEqual(original);
      await expect(store.append(stream, batch, 'no_stream')).resolves.toEqual(original);
      await expect(store.append(stream, [batch[1], batch[0]], 'any')).rejects.toBeInstanceOf(
        WrongExpectedVersionError,
      );
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
  });
}
