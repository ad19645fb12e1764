/**
 * The lines of batches and their results: content (ARCHITECTURE section 4), kept sealed under
 * SVC_ENCRYPTION_KEY beside the batch stream, never in events. Each line is also a job of the
 * job table (`(batch-line, <batch id>:<line>)`, ./line-workflow), whose lease says who runs it;
 * the row says how far it got:
 *
 *   pending -> running (an attempt begun, numbered by its lease's epoch) -> answered (result and settlement kept) -> done
 *                      \-> done (failed: the endpoint's error is the result)
 *
 * Every write is conditional on the attempt it is for, so a worker that lost its lease (its
 * attempt is no longer the line's) can neither keep an answer nor settle one.
 */
import { SealedContent } from '@svc/conversations';
import { JOBS_TABLE, moveLeasesToJobs, scheduleJob, scheduleJobs } from '@svc/jobs';
import { createSchema, DomainError, type SqlRunner } from '@svc/platform';
import { BATCH_JOB, type LineProgress } from './batch-workflow';
import { BATCH_LINE_JOB, lineJobKey, type BatchResultLine, type LineOutcome, type LineRow, type LineStatus } from './line-workflow';

export const BATCH_LINES_TABLE = 'batch_lines';

const requestContext = (batchId: string, line: number) => `batch-line:${batchId}:${line}`;
const resultContext = (batchId: string, line: number) => `batch-result:${batchId}:${line}`;

/** Rows written per statement when a batch's lines are stored. */
const INSERT_CHUNK = 500;

export class BatchLines {
  private readonly sealed: SealedContent;

  constructor(
    private readonly sql: SqlRunner,
    key: () => Buffer | null,
  ) {
    this.sealed = new SealedContent(key, () => DomainError.unavailable('Batches need SVC_ENCRYPTION_KEY to keep their lines.', 'storage_unavailable'));
  }

  static async init(sql: SqlRunner): Promise<void> {
    await createSchema(
      sql,
      `
      CREATE TABLE IF NOT EXISTS ${BATCH_LINES_TABLE} (
        batch_id text NOT NULL,
        line integer NOT NULL,
        request text NOT NULL,
        status text NOT NULL DEFAULT 'pending',
        attempt integer NOT NULL DEFAULT 0,
        kept jsonb,
        outcome text,
        result text,
        PRIMARY KEY (batch_id, line)
      );
      CREATE INDEX IF NOT EXISTS ${BATCH_LINES_TABLE}_open ON ${BATCH_LINES_TABLE} (batch_id, line) WHERE status <> 'done';
    `,
    );
    // Issue "one job runner": a database of before keeps each line's lease here. Every line without
    // an outcome becomes a job, once, due at once, and the columns go: a line held by a worker of
    // the old version keeps its holder until its lease runs out, and its epoch starts at the
    // line's attempt, so the next holder's attempt is a new one (and releases that one's hold).
    await moveLeasesToJobs(sql, {
      table: BATCH_LINES_TABLE,
      probeColumn: 'lease_until',
      columns: ['kind', 'key', 'due_at', 'owner', 'lease_until', 'epoch'],
      select: `SELECT '${BATCH_LINE_JOB}', batch_id || ':' || line, to_timestamp(0), owner, lease_until, attempt FROM ${BATCH_LINES_TABLE} WHERE status <> 'done'`,
      dropColumns: ['owner', 'lease_until'],
    });
  }

  /** Stores a batch's lines and makes each one's job due at `at` (again, after a crash: what is there stays as it is). */
  async add(batchId: string, lines: readonly { line: number; customId: string; body: Record<string, unknown> }[], at: Date): Promise<void> {
    for (let i = 0; i < lines.length; i += INSERT_CHUNK) {
      const chunk = lines.slice(i, i + INSERT_CHUNK);
      await this.sql.transaction(async (tx) => {
        await tx.query(
          `INSERT INTO ${BATCH_LINES_TABLE} (batch_id, line, request) SELECT $1, * FROM unnest($2::integer[], $3::text[]) ON CONFLICT (batch_id, line) DO NOTHING`,
          [
            batchId,
            chunk.map((l) => l.line),
            chunk.map((l) => this.sealed.seal(JSON.stringify({ custom_id: l.customId, body: l.body }), requestContext(batchId, l.line))),
          ],
        );
        await scheduleJobs(
          tx,
          BATCH_LINE_JOB,
          chunk.map((l) => ({ key: lineJobKey(batchId, l.line), at: at.toISOString() })),
        );
      });
    }
  }

  /**
   * Where the line stands (null once its batch ended and its lines are gone) and, while it has
   * still to run, its request (null when it no longer opens: SVC_ENCRYPTION_KEY changed).
   */
  async line(batchId: string, line: number): Promise<{ row: LineRow | null; request: { custom_id: string; body: Record<string, unknown> } | null }> {
    const { rows } = await this.sql.query<{ status: LineStatus; attempt: number; kept: unknown; request: string }>(
      `SELECT status, attempt, kept, CASE WHEN status IN ('pending', 'running') THEN request END AS request FROM ${BATCH_LINES_TABLE} WHERE batch_id = $1 AND line = $2`,
      [batchId, line],
    );
    if (rows.length === 0) return { row: null, request: null };
    const r = rows[0];
    const plain = r.request === null ? null : this.sealed.open(r.request, requestContext(batchId, line));
    return {
      row: { status: r.status, attempt: Number(r.attempt), kept: typeof r.kept === 'string' ? JSON.parse(r.kept) : r.kept },
      request: plain === null ? null : JSON.parse(plain),
    };
  }

  /** Begins attempt `attempt` of a line not answered yet; false when a later attempt began already. */
  async begin(batchId: string, line: number, attempt: number): Promise<boolean> {
    const { rows } = await this.sql.query(
      `UPDATE ${BATCH_LINES_TABLE} SET status = 'running', attempt = $3
        WHERE batch_id = $1 AND line = $2 AND attempt < $3 AND status IN ('pending', 'running') RETURNING line`,
      [batchId, line, attempt],
    );
    return rows.length === 1;
  }

  /**
   * Keeps an answer and its settlement before the settlement is made; false when the line is no
   * longer at this attempt (its lease ran out and another worker took it): the answer is then not
   * this worker's to bill.
   */
  async keepAnswer(batchId: string, line: number, attempt: number, result: BatchResultLine, kept: unknown): Promise<boolean> {
    const { rows } = await this.sql.query(
      `UPDATE ${BATCH_LINES_TABLE} SET status = 'answered', result = $4, kept = $5
        WHERE batch_id = $1 AND line = $2 AND attempt = $3 AND status = 'running' RETURNING line`,
      [batchId, line, attempt, this.sealed.seal(JSON.stringify(result), resultContext(batchId, line)), JSON.stringify(kept)],
    );
    return rows.length === 1;
  }

  /** The line has its outcome: settled, or failed with `result` (an answer kept already stays). */
  async finish(batchId: string, line: number, attempt: number, outcome: LineOutcome, result?: BatchResultLine): Promise<boolean> {
    const { rows } = await this.sql.query(
      `UPDATE ${BATCH_LINES_TABLE} SET status = 'done', outcome = $4, result = COALESCE($5, result)
        WHERE batch_id = $1 AND line = $2 AND attempt = $3 AND status IN ('running', 'answered') RETURNING line`,
      [batchId, line, attempt, outcome, result === undefined ? null : this.sealed.seal(JSON.stringify(result), resultContext(batchId, line))],
    );
    return rows.length === 1;
  }

  /** How the batch's lines stand, their rows and their jobs together. */
  async progress(batchId: string, now: Date): Promise<LineProgress> {
    const { rows } = await this.sql.query<Record<keyof LineProgress, string>>(
      `SELECT count(*) AS total,
              count(*) FILTER (WHERE l.status <> 'done') AS open,
              count(*) FILTER (WHERE l.status = 'answered') AS answered,
              count(j.key) FILTER (WHERE j.lease_until >= $2) AS held,
              count(j.key) FILTER (WHERE (j.lease_until IS NULL OR j.lease_until < $2) AND l.status <> 'answered') AS queued
         FROM ${BATCH_LINES_TABLE} l LEFT JOIN ${JOBS_TABLE} j ON j.kind = $3 AND j.key = l.batch_id || ':' || l.line
        WHERE l.batch_id = $1`,
      [batchId, now.toISOString(), BATCH_LINE_JOB],
    );
    const r = rows[0];
    return { total: Number(r.total), open: Number(r.open), answered: Number(r.answered), held: Number(r.held), queued: Number(r.queued) };
  }

  /** Removes the jobs of the batch's lines that no worker holds and that have no answer to settle: they will not run. */
  async dropUnrun(batchId: string, now: Date): Promise<void> {
    await this.sql.query(
      `DELETE FROM ${JOBS_TABLE} j USING ${BATCH_LINES_TABLE} l
        WHERE l.batch_id = $1 AND j.kind = $3 AND j.key = l.batch_id || ':' || l.line
          AND l.status <> 'answered' AND (j.lease_until IS NULL OR j.lease_until < $2)`,
      [batchId, now.toISOString(), BATCH_LINE_JOB],
    );
  }

  /** Makes the batch's job due at `at` at the latest: it was created or cancelled, or one of its lines moved on. */
  async wake(batchId: string, at: Date): Promise<void> {
    await scheduleJob(this.sql, BATCH_JOB, batchId, at);
  }

  /** The outcomes of many batches at once (a list page of running batches). */
  async counts(batchIds: readonly string[]): Promise<Map<string, { completed: number; failed: number }>> {
    if (batchIds.length === 0) return new Map();
    const { rows } = await this.sql.query<{ batch_id: string; completed: string; failed: string }>(
      `SELECT batch_id, count(*) FILTER (WHERE outcome = 'completed') AS completed, count(*) FILTER (WHERE outcome = 'failed') AS failed
         FROM ${BATCH_LINES_TABLE} WHERE batch_id = ANY($1::text[]) GROUP BY batch_id`,
      [batchIds],
    );
    return new Map(rows.map((r) => [r.batch_id, { completed: Number(r.completed), failed: Number(r.failed) }]));
  }

  /**
   * The lines in order, a page at a time, each with its result (null when it never ran) and,
   * for one left `running` by a worker that is gone, the attempt whose hold may still be open.
   */
  async *results(batchId: string): AsyncIterable<{
    line: number;
    status: LineStatus;
    outcome: LineOutcome | null;
    attempt: number;
    result: BatchResultLine | null;
    customId: string | null;
  }> {
    let after = 0;
    for (;;) {
      const { rows } = await this.sql.query<Record<string, any>>(
        `SELECT line, status, outcome, attempt, result, request FROM ${BATCH_LINES_TABLE} WHERE batch_id = $1 AND line > $2 ORDER BY line LIMIT 500`,
        [batchId, after],
      );
      for (const r of rows) {
        const sealedResult = r.result === null ? null : this.sealed.open(r.result, resultContext(batchId, r.line));
        const result: BatchResultLine | null = sealedResult === null ? null : JSON.parse(sealedResult);
        // A line that never ran has no result: its custom_id is in its request.
        const request = result === null ? this.sealed.open(r.request, requestContext(batchId, r.line)) : null;
        const customId = result !== null ? result.custom_id : request === null ? null : (JSON.parse(request) as { custom_id: string }).custom_id;
        yield { line: r.line, status: r.status, outcome: r.outcome, attempt: r.attempt, result, customId };
      }
      if (rows.length < 500) return;
      after = rows[rows.length - 1].line;
    }
  }

  /** Removes an ended batch's lines and their jobs once its files are written (the files are what is kept). */
  async remove(batchId: string): Promise<void> {
    await this.sql.transaction(async (tx) => {
      await tx.query(`DELETE FROM ${JOBS_TABLE} WHERE kind = $1 AND split_part(key, ':', 1) = $2`, [BATCH_LINE_JOB, batchId]);
      await tx.query(`DELETE FROM ${BATCH_LINES_TABLE} WHERE batch_id = $1`, [batchId]);
    });
  }
}
