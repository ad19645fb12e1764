import { Client } from 'pg';
import { freshPgRunner } from './testing/pg';
import { PgSqlRunner } from './sql';

/**
 * Behind a pooler in transaction mode (DATABASE_SESSION_URL set): statements keep no state in a
 * server session, and what must be a session (LISTEN) is taken from the session server, never
 * from the statements' pool.
 */
describe('PgSqlRunner with sessions of their own', () => {
  let other: PgSqlRunner & { schema: string };
  let mine: PgSqlRunner & { schema: string };
  const inSchema = (schema: string) => ({ connectionString: process.env.DATABASE_URL, options: `-c search_path=${schema}` });

  beforeAll(async () => {
    mine = await freshPgRunner('sessions');
    other = await freshPgRunner('sessions_other');
  });
  afterAll(async () => {
    await mine?.close();
    await other?.close();
  });

  const preparedOn = async (runner: PgSqlRunner) => {
    // One connection, so the statement and the catalog read share a server session.
    await runner.query('SELECT $1::int AS n', [1], { prepare: 'sessions_spec_probe' });
    return (await runner.query<{ name: string }>('SELECT name FROM pg_prepared_statements')).rows.map((r) => r.name);
  };

  it('names a prepared statement by default, and not with namedStatements off', async () => {
    const named = await PgSqlRunner.connect({ ...inSchema(mine.schema), max: 1 });
    const unnamed = await PgSqlRunner.connect({ ...inSchema(mine.schema), max: 1 }, { namedStatements: false });
    try {
      expect(await preparedOn(named)).toEqual(['sessions_spec_probe']);
      expect(await preparedOn(unnamed)).toEqual([]);
      // Inside a transaction too.
      expect(await unnamed.transaction((tx) => tx.query<{ n: number }>('SELECT $1::int AS n', [2], { prepare: 'sessions_spec_tx' }))).toEqual({
        rows: [{ n: 2 }],
      });
      expect((await unnamed.query('SELECT name FROM pg_prepared_statements')).rows).toEqual([]);
    } finally {
      await named.close();
      await unnamed.close();
    }
  });

  it('opens sessions on the session server, outside the statement pool, and tells which database and schema each reaches', async () => {
    const sessionName = `sessions-spec-${process.pid}`;
    const runner = await PgSqlRunner.connect({ ...inSchema(mine.schema), max: 1 }, { session: { ...inSchema(other.schema), application_name: sessionName } });
    const killer = new Client({ connectionString: process.env.DATABASE_URL });
    await killer.connect();
    try {
      const database = (await runner.query<{ db: string }>('SELECT current_database() AS db')).rows[0].db;
      expect(await runner.targets()).toEqual({ statements: `${database}.${mine.schema}`, session: `${database}.${other.schema}` });
      const held = await runner.sessions.connect();
      try {
        expect((await held.query<{ schema: string }>('SELECT current_schema() AS schema')).rows[0].schema).toBe(other.schema);
        // The statement pool's one connection is still free for statements.
        expect((await runner.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
        const { rows } = await killer.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [sessionName]);
        expect(rows[0].n).toBe(1);
      } finally {
        held.release(true);
      }
      const lease = runner.session('sessions-spec-lease');
      await lease.connect();
      expect((await lease.query<{ schema: string }>('SELECT current_schema() AS schema')).rows[0].schema).toBe(other.schema);
      await lease.end();
    } finally {
      await killer.end();
      await runner.close();
    }
  });
});
