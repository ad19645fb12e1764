import { START } from '@svc/eventstore';
import { SCHEMA_LOCK, type SqlRunner } from '@svc/platform';
import type { Projection } from './projection';

const CHECKPOINTS = `
CREATE TABLE IF NOT EXISTS projection_checkpoints (
  name text PRIMARY KEY,
  position text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
)`;

/**
 * How many times the projection's rows were changed: every batch that held events of it, and
 * every rebuild. Most batches hold none of a projection's events and only move its checkpoint,
 * so a cache of its rows tells "moved" from "changed" by this count (auth-cache.ts, the lease's
 * renewal). A count rather than a position: a rebuild replays changes at positions already
 * passed, and its changes must be seen too.
 */
const CHANGES = `ALTER TABLE projection_checkpoints ADD COLUMN IF NOT EXISTS changes bigint NOT NULL DEFAULT 0`;

const QUARANTINE = `
CREATE TABLE IF NOT EXISTS projection_quarantine (
  projection text NOT NULL,
  position text NOT NULL,
  event_id text NOT NULL,
  event_type text NOT NULL,
  error text NOT NULL,
  quarantined_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (projection, position)
)`;

/** The runner's tables and every projection's, and a checkpoint at the start for each projection that has none. */
export async function createSchema(sql: SqlRunner, projections: readonly Projection[]): Promise<void> {
  // The gateway and the worker may start together: concurrent CREATE ... IF NOT EXISTS can
  // still collide in the catalog, so one process at a time creates the schema.
  await sql.transaction(async (tx) => {
    await tx.query(SCHEMA_LOCK);
    await tx.query(CHECKPOINTS);
    await tx.query(CHANGES);
    await tx.query(QUARANTINE);
    for (const p of projections) {
      for (const statement of p.schema) await tx.query(statement);
      await tx.query('INSERT INTO projection_checkpoints (name, position) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [p.name, START]);
    }
  });
}
