import { createSchema, type SqlRunner } from '@svc/platform';
import { JOBS_TABLE } from './queue';

/** A column of the job table that an old table's rows can fill. */
export type JobColumn = 'kind' | 'key' | 'due_at' | 'owner' | 'lease_until' | 'epoch';

export interface LeaseMove {
  /** The table that kept its own due times and leases before the job table existed. */
  table: string;
  /** A column of `table` that only a database of before has: once it is gone, there is nothing to move. */
  probeColumn: string;
  /** The job columns `select` fills, in its order. */
  columns: readonly JobColumn[];
  /** The rows of `table` that become jobs, as a SELECT of `columns`. */
  select: string;
  /** The columns of `table` that go once their rows are jobs. */
  dropColumns: readonly string[];
}

/**
 * Issue "one job runner": a table that kept its own leases hands them to the job table at
 * start-up, once. The rows `select` picks become jobs (a job there already stays as it is) and
 * the old columns go, in one statement under the schema lock, which looks for `probeColumn`
 * again: of two processes starting together, the second finds the move done. A database of
 * today pays one catalog query.
 */
export async function moveLeasesToJobs(sql: SqlRunner, move: LeaseMove): Promise<void> {
  const probe = `SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = '${move.table}' AND column_name = '${move.probeColumn}'`;
  const { rows } = await sql.query(probe);
  if (rows.length === 0) return;
  await createSchema(
    sql,
    `
      DO $$ BEGIN
        IF EXISTS (${probe}) THEN
          INSERT INTO ${JOBS_TABLE} (${move.columns.join(', ')})
            ${move.select}
            ON CONFLICT (kind, key) DO NOTHING;
          ALTER TABLE ${move.table} ${move.dropColumns.map((column) => `DROP COLUMN ${column}`).join(', ')};
        END IF;
      END $$;
    `,
  );
}
