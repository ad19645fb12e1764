import { randomUUID } from 'node:crypto';
import { AggregateStore, type Position, SqlEventStore } from '@svc/eventstore';
import { accountDecider, accountStream, creditsProjection } from '@svc/ledger';
import { ManualClock, PgSqlRunner, type SqlRunner } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import type { ReadSource } from './read-source';
import { type AccountWrites, ReadYourWrites, type ReplicaReads } from './read-your-writes';
import { ProjectionRunner } from './runner';

/**
 * ReadYourWrites.readFrom against PostgreSQL: the primary holds the log and the credits
 * projection; a second database stands in for the standby, its checkpoint moved by the test as
 * replay would move it (the real replication is test/e2e/pg-replica-reads.e2e.ts).
 */
describe('ReadYourWrites.readFrom: the standby once it has the account’s own writes, else the primary', () => {
  let primary: SqlRunner;
  let standby: SqlRunner;
  let store: SqlEventStore;
  let runner: ProjectionRunner;
  let last: Position;
  let answered: ReadSource[];
  let nudges: number;

  const standbyAt = (position: Position) =>
    standby.query(`INSERT INTO projection_checkpoints (name, position) VALUES ('credits', $1) ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position`, [
      position,
    ]);
  // The account's last event in the log, whichever process appended it.
  const log: AccountWrites = {
    lastWrite: async (accountId) => (await store.readStream(accountStream(accountId), { direction: 'backwards', maxCount: 1 }))[0]?.position,
  };
  const replicaOn = (replica: SqlRunner, maxWaitMs = 100): ReplicaReads => ({
    replica,
    nudge: () => nudges++,
    answered: (source) => answered.push(source),
    maxWaitMs,
  });
  const timed = async <T>(run: () => Promise<T>): Promise<{ value: T; ms: number }> => {
    const started = performance.now();
    const value = await run();
    return { value, ms: performance.now() - started };
  };

  beforeAll(async () => {
    primary = await freshPgRunner('rywprimary');
    standby = await freshPgRunner('rywstandby');
    store = new SqlEventStore(primary);
    await store.init();
    runner = new ProjectionRunner(primary, store, [creditsProjection]);
    await runner.init();
    await standby.exec('CREATE TABLE projection_checkpoints (name text PRIMARY KEY, position text NOT NULL)');
    const aggregates = new AggregateStore(store, new ManualClock());
    await aggregates.handle(accountDecider, accountStream('acme'), { type: 'OpenAccount', accountId: 'acme' });
    await aggregates.handle(accountDecider, accountStream('acme'), { type: 'AddCredits', amountNano: 1000n, reason: 'signup' });
    last = (await store.readStream(accountStream('acme'), { direction: 'backwards', maxCount: 1 }))[0].position;
    await runner.catchUpAll();
  });

  beforeEach(() => {
    answered = [];
    nudges = 0;
  });

  afterAll(async () => {
    await runner.stop();
    await store.close();
    await primary.close();
    await standby.close();
  });

  it('given a standby at the account’s last event, when a read comes through another gateway, then the standby answers at once', async () => {
    await standbyAt(last);
    const reads = new ReadYourWrites(runner, replicaOn(standby), log);
    expect(await reads.readFrom('acme', 'credits')).toBe('replica');
    expect(answered).toEqual(['replica']);
    expect(nudges).toBe(0);
  });

  it('given a standby one event behind, when it replays within the budget, then the read waits for it and the standby answers', async () => {
    await standbyAt('');
    const reads = new ReadYourWrites(runner, replicaOn(standby, 2_000), log);
    const replayed = new Promise((resolve) => setTimeout(resolve, 60)).then(() => standbyAt(last));
    const { value, ms } = await timed(() => reads.readFrom('acme', 'credits'));
    await replayed;
    expect(value).toBe('replica');
    expect(ms).toBeGreaterThanOrEqual(50);
    expect(ms).toBeLessThan(1_500);
    expect(nudges).toBe(1);
  });

  it('given a standby that stays behind, when the budget is spent, then the primary answers', async () => {
    await standbyAt('');
    const reads = new ReadYourWrites(runner, replicaOn(standby, 100), log);
    const { value, ms } = await timed(() => reads.readFrom('acme', 'credits'));
    expect(value).toBe('primary');
    expect(ms).toBeGreaterThanOrEqual(100);
    expect(answered).toEqual(['primary']);
  });

  it('given this process wrote past what the log of the account shows, when the standby has only the log’s position, then it is not enough', async () => {
    await standbyAt(last);
    const reads = new ReadYourWrites(runner, replicaOn(standby, 50), log);
    // A later position this process remembers for the account (a write it made after the last one the stream shows).
    const later = (await store.append('elsewhere', [{ id: randomUUID(), type: 'Noted', data: {} }], 'any')).position;
    await runner.catchUpAll();
    reads.wrote('acme', later);
    expect(await reads.readFrom('acme', 'credits')).toBe('primary');
    await standbyAt(later);
    expect(await reads.readFrom('acme', 'credits')).toBe('replica');
  });

  it('given a standby that cannot be reached, when reads come, then the primary answers without waiting, and the standby is left alone a while', async () => {
    const down = await PgSqlRunner.connect({ connectionString: 'postgres://postgres@127.0.0.1:1/none', connectionTimeoutMillis: 500 });
    let asked = 0;
    const counted = { query: <T>(sql: string, params?: unknown[]) => (asked++, down.query<T>(sql, params)) };
    let now = 0;
    try {
      const reads = new ReadYourWrites(runner, { ...replicaOn(standby, 5_000), replica: counted, elapsed: () => now }, log);
      const first = await timed(() => reads.readFrom('acme', 'credits'));
      expect(first.value).toBe('primary');
      expect(first.ms).toBeLessThan(2_000);
      expect(asked).toBe(1);
      // Within the 5 s it is left alone, then asked again.
      now = 4_999;
      expect(await reads.readFrom('acme', 'credits')).toBe('primary');
      expect(asked).toBe(1);
      now = 5_000;
      expect(await reads.readFrom('acme', 'credits')).toBe('primary');
      expect(asked).toBe(2);
      expect(answered).toEqual(['primary', 'primary', 'primary']);
    } finally {
      await down.close();
    }
  });

  it('given no standby, when another gateway wrote the account last, then the read waits for the projection to reach that write', async () => {
    const reads = new ReadYourWrites(runner, null, log);
    // Another process's write: this ReadYourWrites has not seen it, and the projection has not applied it.
    await new AggregateStore(store, new ManualClock()).handle(accountDecider, accountStream('acme'), { type: 'AddCredits', amountNano: 5n, reason: 'top-up' });
    let answeredAt: number | null = null;
    const read = reads.readFrom('acme', 'credits').then((source) => {
      answeredAt = performance.now();
      return source;
    });
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(answeredAt).toBeNull();
    const caughtUpAt = performance.now();
    await runner.catchUpAll();
    expect(await read).toBe('primary');
    expect(answeredAt!).toBeGreaterThanOrEqual(caughtUpAt);
    last = (await store.readStream(accountStream('acme'), { direction: 'backwards', maxCount: 1 }))[0].position;
  });

  it('given no standby, when a read comes, then the primary answers and nothing is counted', async () => {
    const reads = new ReadYourWrites(runner, null);
    expect(await reads.readFrom('acme', 'credits')).toBe('primary');
    expect(answered).toEqual([]);
  });
});
