import { randomBytes } from 'node:crypto';
import { comparePositions, START, type EventStore, type Position } from '@svc/eventstore';
import type { SqlExecutor, SqlRunner, TransactionOptions } from '@svc/platform';
import { BatchApplier } from './batches';
import { CheckpointCache, readCheckpoints } from './checkpoints';
import type { Projection } from './projection';
import { createSchema } from './schema';

/** Events per read when rebuilding: large batches let the set-based projections write in bulk. */
const REBUILD_BATCH = 5000;

/**
 * The replay of `projections` from position 0 into a schema of their own, then the switch into
 * the live one (see ProjectionRunner.rebuild); returns the events read.
 */
export async function rebuildBeside(
  sql: SqlRunner,
  store: EventStore,
  projections: readonly Projection[],
  /** The live runner's view of the checkpoints: it goes on from the rebuilt positions. */
  live: CheckpointCache,
  batchSize = REBUILD_BATCH,
  onProgress?: (done: number, total: number) => void,
): Promise<number> {
  const liveSchema = (await sql.query<{ schema: string }>('SELECT current_schema() AS schema')).rows[0].schema;
  const beside = `rebuild_${randomBytes(6).toString('hex')}`;
  await sql.query(`CREATE SCHEMA ${beside}`);
  try {
    // The schema statements see the new schema alone, so that none can reach a live table;
    // the replay reads through to the live schema, as handlers may read other read models.
    await createSchema(inSchema(sql, beside), projections);
    const shadowSql = inSchema(sql, `${beside}, ${quoteIdent(liveSchema)}`);
    const shadow = new BatchApplier(shadowSql, store, new CheckpointCache(shadowSql));
    const total = await store.countEventsAfter(START);
    let done = 0;
    onProgress?.(0, total);
    for (;;) {
      await shadow.catchUpMany(projections, batchSize, (n) => {
        done += n;
        onProgress?.(done, Math.max(total, done));
      });
      const rebuilt = await readCheckpoints(shadowSql);
      const switched = await switchIn(sql, projections, rebuilt, liveSchema, beside).catch((err: unknown) => {
        // The live runner locks checkpoint rows too: a deadlock between the two is tried again.
        if ((err as { code?: unknown })?.code === '40P01') return false;
        throw err;
      });
      if (!switched) continue;
      // This runner, following the log, goes on from the rebuilt positions.
      for (const p of projections) live.reset(p.name, rebuilt.get(p.name) ?? START);
      return done;
    }
  } finally {
    await sql.query(`DROP SCHEMA IF EXISTS ${beside} CASCADE`).catch(() => undefined);
  }
}

/** The rebuilt tables in place of the live ones, in one transaction; false when the live ones have gone further. */
function switchIn(sql: SqlRunner, projections: readonly Projection[], rebuilt: Map<string, Position>, live: string, beside: string): Promise<boolean> {
  return sql.transaction(async (tx) => {
    const { rows } = await tx.query<{ name: string; position: string }>(
      'SELECT name, position FROM projection_checkpoints WHERE name = ANY($1::text[]) ORDER BY name FOR UPDATE',
      [projections.map((p) => p.name)],
    );
    if (rows.some((r) => comparePositions(r.position, rebuilt.get(r.name) ?? START) > 0)) return false;
    for (const p of projections) {
      for (const table of p.tables) {
        await tx.query(`DROP TABLE IF EXISTS ${quoteIdent(live)}.${table}`);
        await tx.query(`ALTER TABLE ${beside}.${table} SET SCHEMA ${quoteIdent(live)}`);
      }
      await tx.query('DELETE FROM projection_quarantine WHERE projection = $1', [p.name]);
      await tx.query(`INSERT INTO projection_quarantine SELECT * FROM ${beside}.projection_quarantine WHERE projection = $1`, [p.name]);
      await tx.query('UPDATE projection_checkpoints SET position = $2, changes = changes + 1, updated_at = now() WHERE name = $1', [
        p.name,
        rebuilt.get(p.name) ?? START,
      ]);
    }
    return true;
  });
}

/** A PostgreSQL identifier, quoted. */
const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;

/**
 * `sql` with every statement run under `search_path` (a rebuild's own schema first): each one
 * in a transaction of its own that sets it locally, so the pool's connections keep theirs.
 */
function inSchema(sql: SqlRunner, searchPath: string): SqlRunner {
  const set = `SET LOCAL search_path TO ${searchPath}`;
  const transaction = <T>(fn: (tx: SqlExecutor) => Promise<T>, options?: TransactionOptions) =>
    sql.transaction(async (tx) => {
      await tx.query(set);
      return fn({ query: (text, params) => tx.query(text, params) });
    }, options);
  return {
    dialect: sql.dialect,
    // A named statement is planned once per connection: not under a search_path it would outlive.
    query: (text, params) => transaction((tx) => tx.query(text, params)),
    exec: (text) => transaction(async (tx) => void (await tx.query(text))),
    transaction,
    close: async () => undefined,
  };
}
