/**
 * The one job table (ARCHITECTURE section 11): what is due, of every workflow kind, and who
 * holds it. A job is (kind, key): a video, a batch, a webhook event. Workers claim due jobs with
 * `FOR UPDATE SKIP LOCKED` (PostgreSQL and PGlite alike), each under a lease: an owner, an epoch
 * and an expiry. A worker killed at any point holds its jobs only until the lease runs out; the
 * next claim takes them with a new epoch, and every later write of the dead one, fenced by its
 * epoch, changes nothing.
 *
 * The table says when to look, never what to do: a workflow decides that from its streams, so
 * a job due too early, or twice, costs a look and nothing else.
 */
import { createSchema, type SqlExecutor, type SqlRunner } from '@svc/platform';

export const JOBS_TABLE = 'jobs';

/** A job a worker holds: valid while `epoch` is the job's and its lease has not run out. */
export interface Lease {
  kind: string;
  key: string;
  owner: string;
  epoch: number;
  /** Claims since the job last moved on (rescheduled or completed): above 1, earlier holders died or failed mid-step. */
  attempts: number;
  dueAt: Date;
  leaseUntil: Date;
}

/**
 * Asks for `(kind, key)` to be looked at by `at` at the latest, from outside any lease: a new
 * video, an outbox row, a cancel asked from the API. A job leased meanwhile keeps the request
 * (`wake_at`) and is due again when its holder lets it go, whatever that holder decided.
 */
export async function scheduleJob(sql: SqlExecutor, kind: string, key: string, at: Date | string): Promise<void> {
  await sql.query(
    `INSERT INTO ${JOBS_TABLE} (kind, key, due_at) VALUES ($1, $2, $3)
     ON CONFLICT (kind, key) DO UPDATE SET
       due_at = LEAST(${JOBS_TABLE}.due_at, EXCLUDED.due_at),
       wake_at = CASE WHEN ${JOBS_TABLE}.owner IS NULL THEN NULL ELSE LEAST(COALESCE(${JOBS_TABLE}.wake_at, EXCLUDED.due_at), EXCLUDED.due_at) END`,
    [kind, key, typeof at === 'string' ? at : at.toISOString()],
  );
}

/** The same for many keys of one kind at once (a resumed webhook endpoint's pending events). */
export async function scheduleJobs(sql: SqlExecutor, kind: string, due: readonly { key: string; at: string }[]): Promise<void> {
  if (due.length === 0) return;
  await sql.query(
    `INSERT INTO ${JOBS_TABLE} (kind, key, due_at) SELECT $1, k, a FROM unnest($2::text[], $3::timestamptz[]) AS d(k, a)
     ON CONFLICT (kind, key) DO UPDATE SET
       due_at = LEAST(${JOBS_TABLE}.due_at, EXCLUDED.due_at),
       wake_at = CASE WHEN ${JOBS_TABLE}.owner IS NULL THEN NULL ELSE LEAST(COALESCE(${JOBS_TABLE}.wake_at, EXCLUDED.due_at), EXCLUDED.due_at) END`,
    [kind, due.map((d) => d.key), due.map((d) => d.at)],
  );
}

/**
 * The table's DDL, also in the schema of the read models that schedule jobs from the log (the
 * webhook outbox): their rebuild, replayed into a schema of its own, then schedules into a
 * table of its own and leaves the live jobs alone.
 */
export const JOBS_SCHEMA: readonly string[] = [
  `CREATE TABLE IF NOT EXISTS ${JOBS_TABLE} (
    kind text NOT NULL,
    key text NOT NULL,
    due_at timestamptz NOT NULL,
    owner text,
    epoch integer NOT NULL DEFAULT 0,
    lease_until timestamptz,
    attempts integer NOT NULL DEFAULT 0,
    wake_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, key)
  )`,
  // In the claim's order, so a claim reads the first due jobs of its kind and stops, rather than
  // sorting them all (a batch's 5,000 lines are due at one time and told apart by key).
  `CREATE INDEX IF NOT EXISTS ${JOBS_TABLE}_due_key ON ${JOBS_TABLE} (kind, due_at, key)`,
  `DROP INDEX IF EXISTS ${JOBS_TABLE}_due`,
];

export class JobQueue {
  constructor(private readonly sql: SqlRunner) {}

  static async init(sql: SqlRunner): Promise<void> {
    await createSchema(sql, JOBS_SCHEMA.join(';\n'));
  }

  schedule(kind: string, key: string, at: Date): Promise<void> {
    return scheduleJob(this.sql, kind, key, at);
  }

  /**
   * Makes a job of each key that has none, due at `at`; a job there already stays as it is. For
   * a kind whose subjects are listed elsewhere (a read model): one whose first ask was lost is
   * looked at all the same.
   */
  async ensure(kind: string, keys: readonly string[], at: Date): Promise<void> {
    if (keys.length === 0) return;
    await this.sql.query(`INSERT INTO ${JOBS_TABLE} (kind, key, due_at) SELECT $1, k, $3 FROM unnest($2::text[]) AS d(k) ON CONFLICT (kind, key) DO NOTHING`, [
      kind,
      keys,
      at.toISOString(),
    ]);
  }

  /**
   * Claims up to `limit` jobs of `kind` due by `now` and not held (or whose lease ran out), for `owner` until `leaseUntil`.
   * `parents` narrows the claim to keys `<parent>:<...>` of those parents (the lines of some batches): a kind whose work
   * is shared out per owner of the parents (an account) claims each share on its own.
   */
  async claim(kind: string, owner: string, now: Date, leaseUntil: Date, limit: number, parents?: readonly string[]): Promise<Lease[]> {
    if (limit <= 0 || parents?.length === 0) return [];
    const { rows } = await this.sql.query<Record<string, any>>(
      `UPDATE ${JOBS_TABLE} j SET owner = $2, lease_until = $3, epoch = j.epoch + 1, attempts = j.attempts + 1, wake_at = NULL
         FROM (SELECT kind, key FROM ${JOBS_TABLE}
                WHERE kind = $1 AND due_at <= $4 AND (lease_until IS NULL OR lease_until < $4)
                  AND ($6::text[] IS NULL OR split_part(key, ':', 1) = ANY($6::text[]))
                ORDER BY due_at, key LIMIT $5 FOR UPDATE SKIP LOCKED) c
        WHERE j.kind = c.kind AND j.key = c.key
        RETURNING j.kind, j.key, j.owner, j.epoch, j.attempts, j.due_at, j.lease_until`,
      [kind, owner, leaseUntil.toISOString(), now.toISOString(), limit, parents ?? null],
    );
    return rows.map((r) => ({
      kind: r.kind,
      key: r.key,
      owner: r.owner,
      epoch: Number(r.epoch),
      attempts: Number(r.attempts),
      dueAt: new Date(r.due_at),
      leaseUntil: new Date(r.lease_until),
    }));
  }

  /**
   * Lets the job go, due at `at` (or earlier, if someone asked for it meanwhile); false when the
   * lease was lost (another worker holds the job now, and this one's decision is not written).
   */
  async reschedule(lease: Lease, at: Date): Promise<boolean> {
    const { rows } = await this.sql.query(
      `UPDATE ${JOBS_TABLE} SET due_at = LEAST($4::timestamptz, COALESCE(wake_at, $4::timestamptz)), owner = NULL, lease_until = NULL, wake_at = NULL, attempts = 0
        WHERE kind = $1 AND key = $2 AND epoch = $3 RETURNING key`,
      [lease.kind, lease.key, lease.epoch, at.toISOString()],
    );
    return rows.length === 1;
  }

  /** The job is done: removed, unless someone asked for it meanwhile (then it is due again then). */
  async complete(lease: Lease): Promise<boolean> {
    const { rows } = await this.sql.query(`DELETE FROM ${JOBS_TABLE} WHERE kind = $1 AND key = $2 AND epoch = $3 AND wake_at IS NULL RETURNING key`, [
      lease.kind,
      lease.key,
      lease.epoch,
    ]);
    if (rows.length === 1) return true;
    const woken = await this.sql.query(
      `UPDATE ${JOBS_TABLE} SET due_at = wake_at, owner = NULL, lease_until = NULL, wake_at = NULL, attempts = 0
        WHERE kind = $1 AND key = $2 AND epoch = $3 RETURNING key`,
      [lease.kind, lease.key, lease.epoch],
    );
    return woken.rows.length === 1;
  }

  /** Whether `lease` is still the job's (its holder may write what only the holder may). */
  async holds(lease: Lease, now: Date): Promise<boolean> {
    const { rows } = await this.sql.query(`SELECT 1 FROM ${JOBS_TABLE} WHERE kind = $1 AND key = $2 AND epoch = $3 AND lease_until >= $4`, [
      lease.kind,
      lease.key,
      lease.epoch,
      now.toISOString(),
    ]);
    return rows.length === 1;
  }

  /** Removes a job whatever holds it (its subject is gone: a deleted video). */
  async remove(kind: string, key: string): Promise<void> {
    await this.sql.query(`DELETE FROM ${JOBS_TABLE} WHERE kind = $1 AND key = $2`, [kind, key]);
  }

  /** When `(kind, key)` is due, or null when there is no such job. */
  async dueAt(kind: string, key: string): Promise<Date | null> {
    const { rows } = await this.sql.query<{ due_at: string | Date }>(`SELECT due_at FROM ${JOBS_TABLE} WHERE kind = $1 AND key = $2`, [kind, key]);
    return rows.length === 0 ? null : new Date(rows[0].due_at);
  }

  /** Whether any job of `kind` waits or runs, due now or later: a worker that finds none may look less often. */
  async hasAny(kind: string): Promise<boolean> {
    const { rows } = await this.sql.query(`SELECT 1 FROM ${JOBS_TABLE} WHERE kind = $1 LIMIT 1`, [kind]);
    return rows.length > 0;
  }

  /** Jobs of `kind` waiting or running (the queue depth of the metrics). */
  async depth(kind: string): Promise<number> {
    const { rows } = await this.sql.query<{ n: string }>(`SELECT count(*) AS n FROM ${JOBS_TABLE} WHERE kind = $1`, [kind]);
    return Number(rows[0].n);
  }
}
