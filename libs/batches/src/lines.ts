/**
 * The lines of batches and their results: content (ARCHITECTURE section 4), kept sealed under
 * SVC_ENCRYPTION_KEY beside the batch stream, never in events. The table is also the work queue
 * of the workers (issue 19: leases in PostgreSQL with `FOR UPDATE SKIP LOCKED`):
 *
 *   pending -> running (claimed: owner, lease, attempt + 1) -> answered (result and settlement kept) -> done
 *                      \-> done (failed: the endpoint's error is the result)
 *
 * A line's hold is named after its attempt (`lineHoldId`), so a worker that lost its lease (its
 * attempt is no longer the line's) can neither keep an answer nor settle one: every write below
 * is conditional on the attempt it was claimed for. What a killed worker left is taken over once
 * its lease ends: a `running` line is tried again under a new attempt (the old attempt's hold is
 * released), an `answered` one is settled from what was kept, so it is billed exactly once.
 */
import { createHash } from 'node:crypto';
import { SealedContent } from '@svc/conversations';
import { ApiError, createSchema, type SqlRunner } from '@svc/platform';

export const BATCH_LINES_TABLE = 'batch_lines';

export type LineStatus = 'pending' | 'running' | 'answered' | 'done';
export type LineOutcome = 'completed' | 'failed';

/** A line a worker holds: what it may do with it depends on `status` and is valid for `attempt` only. */
export interface ClaimedLine {
  batchId: string;
  line: number;
  status: 'running' | 'answered';
  attempt: number;
  /** The settlement kept with an answer (status `answered`): ids, counts and costs, no content. */
  kept: unknown;
}

/** One line of an output or error file, as OpenAI writes it (WIRE-FORMATS 1.2 `BatchRequestOutput`). */
export interface BatchResultLine {
  id: string;
  custom_id: string;
  response: { status_code: number; request_id: string; body: unknown } | null;
  error: { code: string; message: string } | null;
}

/** The hold (and generation) id of one attempt of one line: the same in every process. */
export function lineHoldId(batchId: string, line: number, attempt: number): string {
  return `gen-${createHash('sha256').update(`${batchId}:${line}:${attempt}`).digest('hex').slice(0, 24)}`;
}

/** The `id` of a line in the result files, stable across attempts. */
export function resultLineId(batchId: string, line: number): string {
  return `batch_req_${createHash('sha256').update(`${batchId}:${line}`).digest('hex').slice(0, 24)}`;
}

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
    this.sealed = new SealedContent(
      key,
      () => new ApiError(503, 'service_unavailable', 'Batches need SVC_ENCRYPTION_KEY to keep their lines.', 'storage_unavailable'),
    );
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
        owner text,
        lease_until timestamptz,
        kept jsonb,
        outcome text,
        result text,
        PRIMARY KEY (batch_id, line)
      );
      CREATE INDEX IF NOT EXISTS ${BATCH_LINES_TABLE}_open ON ${BATCH_LINES_TABLE} (batch_id, line) WHERE status <> 'done';
    `,
    );
  }

  /** Stores a batch's lines (again, after a crash: what is there stays as it is). */
  async add(batchId: string, lines: readonly { line: number; customId: string; body: Record<string, unknown> }[]): Promise<void> {
    for (let i = 0; i < lines.length; i += INSERT_CHUNK) {
      const chunk = lines.slice(i, i + INSERT_CHUNK);
      await this.sql.query(
        `INSERT INTO ${BATCH_LINES_TABLE} (batch_id, line, request) SELECT $1, * FROM unnest($2::integer[], $3::text[]) ON CONFLICT (batch_id, line) DO NOTHING`,
        [
          batchId,
          chunk.map((l) => l.line),
          chunk.map((l) => this.sealed.seal(JSON.stringify({ custom_id: l.customId, body: l.body }), requestContext(batchId, l.line))),
        ],
      );
    }
  }

  /**
   * Claims up to `limit` lines of `batchIds` for `owner` until `leaseUntil`: lines never tried,
   * and lines whose worker's lease ran out. `answeredOnly` takes only answers left unsettled
   * (a batch being cancelled or expiring runs nothing new, but keeps what finished).
   */
  async claim(batchIds: readonly string[], owner: string, now: Date, leaseUntil: Date, limit: number, answeredOnly = false): Promise<ClaimedLine[]> {
    if (batchIds.length === 0 || limit <= 0) return [];
    const { rows } = await this.sql.query<Record<string, any>>(
      `UPDATE ${BATCH_LINES_TABLE} l SET
          status = CASE WHEN l.status = 'answered' THEN 'answered' ELSE 'running' END,
          attempt = CASE WHEN l.status = 'answered' THEN l.attempt ELSE l.attempt + 1 END,
          owner = $1, lease_until = $2
        FROM (SELECT batch_id, line FROM ${BATCH_LINES_TABLE}
               WHERE batch_id = ANY($3::text[])
                 AND ((status = 'pending' AND NOT $6::boolean) OR (status IN ('running', 'answered') AND lease_until < $4 AND (status = 'answered' OR NOT $6::boolean)))
               ORDER BY line, batch_id LIMIT $5 FOR UPDATE SKIP LOCKED) c
       WHERE l.batch_id = c.batch_id AND l.line = c.line
       RETURNING l.batch_id, l.line, l.status, l.attempt, l.kept`,
      [owner, leaseUntil.toISOString(), batchIds, now.toISOString(), limit, answeredOnly],
    );
    return rows.map((r) => ({
      batchId: r.batch_id,
      line: r.line,
      status: r.status,
      attempt: r.attempt,
      kept: typeof r.kept === 'string' ? JSON.parse(r.kept) : r.kept,
    }));
  }

  /** The request of a claimed line; null when it no longer opens (SVC_ENCRYPTION_KEY changed). */
  async request(batchId: string, line: number): Promise<{ custom_id: string; body: Record<string, unknown> } | null> {
    const { rows } = await this.sql.query<{ request: string }>(`SELECT request FROM ${BATCH_LINES_TABLE} WHERE batch_id = $1 AND line = $2`, [batchId, line]);
    const plain = rows[0] ? this.sealed.open(rows[0].request, requestContext(batchId, line)) : null;
    return plain === null ? null : JSON.parse(plain);
  }

  /**
   * Keeps an answer and its settlement before the settlement is made; false when the line is no
   * longer this attempt's (its lease ran out and another worker took it): the answer is then not
   * this worker's to bill.
   */
  async keepAnswer(claimed: ClaimedLine, owner: string, leaseUntil: Date, result: BatchResultLine, kept: unknown): Promise<boolean> {
    const { rows } = await this.sql.query(
      `UPDATE ${BATCH_LINES_TABLE} SET status = 'answered', result = $5, kept = $6, lease_until = $7
        WHERE batch_id = $1 AND line = $2 AND attempt = $3 AND owner = $4 AND status = 'running' RETURNING line`,
      [
        claimed.batchId,
        claimed.line,
        claimed.attempt,
        owner,
        this.sealed.seal(JSON.stringify(result), resultContext(claimed.batchId, claimed.line)),
        JSON.stringify(kept),
        leaseUntil.toISOString(),
      ],
    );
    return rows.length === 1;
  }

  /** The line has its outcome: settled, or failed with `result` (an answer kept already stays). */
  async finish(claimed: ClaimedLine, owner: string, outcome: LineOutcome, result?: BatchResultLine): Promise<boolean> {
    const { rows } = await this.sql.query(
      `UPDATE ${BATCH_LINES_TABLE} SET status = 'done', outcome = $5, owner = NULL, lease_until = NULL,
              result = COALESCE($6, result)
        WHERE batch_id = $1 AND line = $2 AND attempt = $3 AND owner = $4 AND status IN ('running', 'answered') RETURNING line`,
      [
        claimed.batchId,
        claimed.line,
        claimed.attempt,
        owner,
        outcome,
        result === undefined ? null : this.sealed.seal(JSON.stringify(result), resultContext(claimed.batchId, claimed.line)),
      ],
    );
    return rows.length === 1;
  }

  /** Lets a line go back to the queue at once (this worker is stopping), for its attempt only. */
  async unclaim(claimed: ClaimedLine, owner: string): Promise<void> {
    await this.sql.query(`UPDATE ${BATCH_LINES_TABLE} SET lease_until = $5 WHERE batch_id = $1 AND line = $2 AND attempt = $3 AND owner = $4`, [
      claimed.batchId,
      claimed.line,
      claimed.attempt,
      owner,
      new Date(0).toISOString(),
    ]);
  }

  /** How the batch's lines stand: outcomes so far, lines still to run, and lines some worker holds now. */
  async progress(batchId: string, now: Date): Promise<{ completed: number; failed: number; waiting: number; held: number; total: number }> {
    const { rows } = await this.sql.query<{ completed: string; failed: string; waiting: string; held: string; total: string }>(
      `SELECT count(*) FILTER (WHERE outcome = 'completed') AS completed,
              count(*) FILTER (WHERE outcome = 'failed') AS failed,
              count(*) FILTER (WHERE status <> 'done' AND (lease_until IS NULL OR lease_until < $2)) AS waiting,
              count(*) FILTER (WHERE status <> 'done' AND lease_until >= $2) AS held,
              count(*) AS total
         FROM ${BATCH_LINES_TABLE} WHERE batch_id = $1`,
      [batchId, now.toISOString()],
    );
    const r = rows[0];
    return { completed: Number(r.completed), failed: Number(r.failed), waiting: Number(r.waiting), held: Number(r.held), total: Number(r.total) };
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

  /** Removes an ended batch's lines once its files are written (the files are what is kept). */
  async remove(batchId: string): Promise<void> {
    await this.sql.query(`DELETE FROM ${BATCH_LINES_TABLE} WHERE batch_id = $1`, [batchId]);
  }
}
