import { SqlEventStore } from '@svc/eventstore';
import { PgSqlRunner } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import { ProjectionRunner } from '@svc/projections';
import { initAuthCacheLeases } from '@svc/identity';
import { ALL_PROJECTIONS, initContentTables } from '@svc/runtime';

/** What a process creates at start on PostgreSQL before it serves or works, in @svc/runtime's order. */
async function startUp(sql: PgSqlRunner): Promise<void> {
  const store = new SqlEventStore(sql);
  await store.init();
  await new ProjectionRunner(sql, store, ALL_PROJECTIONS).init();
  await initAuthCacheLeases(sql);
  await initContentTables(sql);
}

/**
 * Issue 21: a gateway and a worker started together on an empty database, and the gateway
 * crashed in 3 of 7 tries: two CREATE TABLE IF NOT EXISTS of one table at once both pass the
 * check, and the second fails on the catalog's unique index.
 */
describe('the start-up schema, created by several processes at once on one empty PostgreSQL schema (issue 21)', () => {
  const PROCESSES = 6;
  let fresh: Awaited<ReturnType<typeof freshPgRunner>>;
  const runners: PgSqlRunner[] = [];

  beforeEach(async () => {
    fresh = await freshPgRunner('schema_race');
    // One pool each, as separate processes have.
    for (let i = 0; i < PROCESSES; i++) {
      runners.push(await PgSqlRunner.connect({ connectionString: process.env.DATABASE_URL!, options: `-c search_path=${fresh.schema}`, max: 2 }));
    }
  });

  afterEach(async () => {
    for (const r of runners.splice(0)) await r.close();
    await fresh?.close();
  });

  it.each([1, 2, 3])('is created by every one of them without an error (round %i)', async () => {
    const results = await Promise.allSettled(runners.map((sql) => startUp(sql)));
    const failures = results.flatMap((r) => (r.status === 'rejected' ? [String(r.reason)] : []));
    expect(failures).toEqual([]);
    // And it is the whole schema: a later start finds everything there.
    await expect(startUp(fresh)).resolves.toBeUndefined();
    const { rows } = await fresh.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = $1', [fresh.schema]);
    expect(rows[0].n).toBeGreaterThan(20);
  });
});
