import type { Position, RecordedEvent } from '@svc/eventstore';
import { isConnectionFailure, type SqlRunner } from '@svc/platform';
import { moveCheckpoints } from './checkpoints';
import type { Projection } from './projection';

/** An event a projection could not apply, set aside so the projection goes on. */
export interface QuarantinedEvent {
  projection: string;
  position: Position;
  event_id: string;
  event_type: string;
  error: string;
  quarantined_at: string;
}

/**
 * SQLSTATE classes that speak of the server or of the statement, never of the values bound into
 * it: connection (08), transaction state (25: a read-only standby after a failover), rollback
 * (40: serialization failure, deadlock), the SQL or schema itself (42: a missing table while a
 * newer or older process changes it), insufficient resources (53), object state (55: a lock not
 * available), operator intervention (57: shutdown, crash, cancelled statement), system (58:
 * I/O), configuration (F0) and internal errors (XX).
 */
const NOT_THE_EVENT = new Set(['08', '25', '40', '42', '53', '55', '57', '58', 'F0', 'XX']);

/** The runner's own database closed under it (shutting down), or its pool misbehaving: not a fault of the event. */
const CLOSED = /PGlite is closed|Cannot use a pool after calling end|Transaction is closed|pool\.connect returned no client/;

/**
 * Issue 41 C: whether an error applying events says something about the events rather than the
 * moment, so that retrying cannot help and the event is set aside. The cut is by what the
 * moment can cause, not by what an event can: every failure of the database's availability (a
 * lost or refused connection, isConnectionFailure; the classes of NOT_THE_EVENT; a socket's
 * system error; the runner's database closed) is retried, however long it lasts, so no event is
 * ever skipped because the database was down. Anything else the event's content caused: a value
 * PostgreSQL refuses (22, 23), one it cannot hold (54: a caller's text too long for an index
 * row), a handler meeting a shape it cannot read (TypeError, or any error it throws).
 */
export function isPoisonError(err: unknown): boolean {
  if (err instanceof AggregateError) return err.errors.length > 0 && err.errors.every(isPoisonError);
  if (isConnectionFailure(err)) return false;
  const e = err as { code?: unknown; errno?: unknown; syscall?: unknown; message?: unknown } | null;
  // Node's system errors (a socket's ECONNABORTED, ENETUNREACH...) name the call that failed.
  if (typeof e?.syscall === 'string' || typeof e?.errno === 'number') return false;
  if (typeof e?.message === 'string' && CLOSED.test(e.message)) return false;
  const code = e?.code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return !NOT_THE_EVENT.has(code.slice(0, 2));
  return true;
}

/** Records `event` as set aside by `projection` and moves its checkpoint past it, in one transaction. */
export async function quarantine(sql: SqlRunner, projection: Projection, event: RecordedEvent, from: Position, err: unknown): Promise<boolean> {
  const error = (err instanceof Error ? `${err.name}: ${err.message}` : String(err)).slice(0, 500);
  const moved = await sql.transaction(async (tx) => {
    if ((await moveCheckpoints(tx, [projection.name], from, event.position)).length === 0) return false;
    await tx.query(
      `INSERT INTO projection_quarantine (projection, position, event_id, event_type, error) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (projection, position) DO NOTHING`,
      [projection.name, event.position, event.id, event.type, error],
    );
    return true;
  });
  // Once per event: the checkpoint is past it, so it is never met again (short of a rebuild).
  if (moved) console.error(`projection ${projection.name} set aside event ${event.id} (${event.type}) at ${event.position}: ${error}`);
  return moved;
}

/** How many events each projection has set aside. */
export async function quarantineCounts(sql: SqlRunner): Promise<Map<string, number>> {
  const { rows: counts } = await sql.query<{ projection: string; n: number }>(
    'SELECT projection, count(*)::int AS n FROM projection_quarantine GROUP BY projection',
  );
  return new Map(counts.map((r) => [r.projection, r.n]));
}

/** The events set aside, oldest first (all projections, or one). */
export async function quarantinedEvents(sql: SqlRunner, name?: string): Promise<QuarantinedEvent[]> {
  const { rows } = await sql.query<QuarantinedEvent & { quarantined_at: Date | string }>(
    `SELECT projection, position, event_id, event_type, error, quarantined_at FROM projection_quarantine
      WHERE $1::text IS NULL OR projection = $1 ORDER BY position, projection`,
    [name ?? null],
  );
  return rows.map((r) => ({ ...r, quarantined_at: new Date(r.quarantined_at).toISOString() }));
}
