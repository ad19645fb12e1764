import type { SqlRunner } from './sql';

/**
 * Issue 21: every process (gateway, worker, CLI) creates the tables it needs at start with
 * CREATE ... IF NOT EXISTS, which is not safe against itself: two sessions creating one table at
 * once both find it missing, and the second fails on the catalog's unique index (a gateway and
 * a worker started together on an empty database crashed so). Every start-up DDL statement, of
 * whichever library, runs holding this one transaction-scoped lock: one process at a time
 * creates or changes the schema, and the others then find it there.
 */
export const SCHEMA_LOCK = `SELECT pg_advisory_xact_lock(hashtextextended('svc.schema', 0))`;

/** Runs `ddl` (one statement or several) under SCHEMA_LOCK. */
export async function createSchema(sql: SqlRunner, ddl: string): Promise<void> {
  // One message of the simple query protocol: PostgreSQL runs its statements as one
  // transaction, which holds the lock until the last of them is done.
  await sql.exec(`${SCHEMA_LOCK};\n${ddl}`);
}
