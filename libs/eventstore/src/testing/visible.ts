import type { SqlRunner } from '@svc/platform';
import { until } from '../../../../test/support/until';
import { decodePosition } from '../position';
import type { Position } from '../port';

/**
 * Resolves once the SQL store's global reads (readAll, countEventsAfter, the projection runners)
 * see the log up to `position`. On a server they stop below the oldest transaction still open
 * anywhere on it (VISIBLE_AFTER), another suite's in another database included: an append is not
 * always readable there the moment it returns, and on a slow host running suites side by side
 * often is not. A test that appends, catches up at once and checks what was applied waits here
 * first. PGlite has one connection: there it resolves at once.
 */
export async function visibleUpTo(sql: SqlRunner, position: Position, timeoutMs = 15_000): Promise<void> {
  const tx = decodePosition(position).major.toString();
  await until(
    `the log up to ${position} to be visible to global reads`,
    async () => (await sql.query<{ visible: boolean }>('SELECT $1::text::xid8 < pg_snapshot_xmin(pg_current_snapshot()) AS visible', [tx])).rows[0].visible,
    timeoutMs,
    10,
  );
}
