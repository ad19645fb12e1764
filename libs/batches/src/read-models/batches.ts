import type { RecordedEvent } from '@svc/eventstore';
import type { BatchError, BatchEvent, BatchStatus } from '../batch';
import type { SqlExecutor } from '@svc/platform';
import { perEvent, type Projection } from '@svc/projections';

type B<T extends BatchEvent['type']> = RecordedEvent<T, Extract<BatchEvent, { type: T }>['data']>;

/**
 * Each workspace's batches (spec 4.11; OpenAI's batch object): what the batch stream decided,
 * with its timestamps. The counts of a running batch are its lines' (libs/batches), read live;
 * the row has them once the batch has ended.
 */
export const batchesProjection: Projection = perEvent({
  name: 'batches',
  tables: ['batches'],
  schema: [
    `CREATE TABLE IF NOT EXISTS batches (
      batch_id text PRIMARY KEY,
      account_id text NOT NULL,
      workspace_id text NOT NULL,
      key_id text NOT NULL,
      endpoint text NOT NULL,
      input_file_id text NOT NULL,
      completion_window text NOT NULL,
      metadata jsonb,
      status text NOT NULL,
      errors jsonb,
      total integer NOT NULL DEFAULT 0,
      completed integer NOT NULL DEFAULT 0,
      failed integer NOT NULL DEFAULT 0,
      output_file_id text,
      error_file_id text,
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      in_progress_at timestamptz,
      finalizing_at timestamptz,
      completed_at timestamptz,
      failed_at timestamptz,
      expired_at timestamptz,
      cancelling_at timestamptz,
      cancelled_at timestamptz
    )`,
    `CREATE INDEX IF NOT EXISTS batches_workspace ON batches (workspace_id, created_at DESC, batch_id DESC)`,
    `CREATE INDEX IF NOT EXISTS batches_active ON batches (status) WHERE status IN ('validating', 'in_progress', 'cancelling', 'finalizing')`,
  ],
  handlers: {
    BatchCreated: async (e: B<'BatchCreated'>, tx) => {
      const d = e.data;
      await tx.query(
        `INSERT INTO batches (batch_id, account_id, workspace_id, key_id, endpoint, input_file_id, completion_window, metadata, status, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'validating', $9, $10) ON CONFLICT (batch_id) DO NOTHING`,
        [
          d.batch_id,
          d.account_id,
          d.workspace_id,
          d.key_id,
          d.endpoint,
          d.input_file_id,
          d.completion_window,
          d.metadata === null ? null : JSON.stringify(d.metadata),
          d.created_at,
          d.expires_at,
        ],
      );
    },
    // A cancel asked while validating stays asked: the status moves on only from validating.
    BatchStarted: async (e: B<'BatchStarted'>, tx) => {
      await tx.query(
        `UPDATE batches SET total = $2, in_progress_at = $3, status = CASE WHEN status = 'validating' THEN 'in_progress' ELSE status END WHERE batch_id = $1`,
        [e.data.batch_id, e.data.total, e.data.in_progress_at],
      );
    },
    BatchValidationFailed: async (e: B<'BatchValidationFailed'>, tx) => {
      await tx.query(`UPDATE batches SET status = 'failed', errors = $2, failed_at = $3 WHERE batch_id = $1`, [
        e.data.batch_id,
        JSON.stringify(e.data.errors),
        e.data.failed_at,
      ]);
    },
    BatchCancelRequested: async (e: B<'BatchCancelRequested'>, tx) => {
      await tx.query(`UPDATE batches SET status = 'cancelling', cancelling_at = $2 WHERE batch_id = $1`, [e.data.batch_id, e.data.cancelling_at]);
    },
    BatchFinalizing: async (e: B<'BatchFinalizing'>, tx) => {
      await tx.query(`UPDATE batches SET status = 'finalizing', finalizing_at = $2 WHERE batch_id = $1`, [e.data.batch_id, e.data.finalizing_at]);
    },
    BatchCompleted: (e: B<'BatchCompleted'>, tx) => ended(tx, e.data, 'completed', e.data.completed_at),
    BatchExpired: (e: B<'BatchExpired'>, tx) => ended(tx, e.data, 'expired', e.data.expired_at),
    BatchCancelled: (e: B<'BatchCancelled'>, tx) => ended(tx, e.data, 'cancelled', e.data.cancelled_at),
  },
});

async function ended(
  tx: SqlExecutor,
  d: { batch_id: string; completed: number; failed: number; output_file_id: string | null; error_file_id: string | null },
  status: 'completed' | 'expired' | 'cancelled',
  at: string,
): Promise<void> {
  await tx.query(
    `UPDATE batches SET status = $2, ${status}_at = $3, completed = $4, failed = $5, output_file_id = $6, error_file_id = $7 WHERE batch_id = $1`,
    [d.batch_id, status, at, d.completed, d.failed, d.output_file_id, d.error_file_id],
  );
}

export interface BatchRow {
  batchId: string;
  accountId: string;
  workspaceId: string;
  keyId: string;
  endpoint: string;
  inputFileId: string;
  completionWindow: string;
  metadata: Record<string, string> | null;
  status: BatchStatus;
  errors: BatchError[] | null;
  total: number;
  completed: number;
  failed: number;
  outputFileId: string | null;
  errorFileId: string | null;
  createdAt: Date;
  expiresAt: Date;
  inProgressAt: Date | null;
  finalizingAt: Date | null;
  completedAt: Date | null;
  failedAt: Date | null;
  expiredAt: Date | null;
  cancellingAt: Date | null;
  cancelledAt: Date | null;
}

const json = <T>(v: unknown): T | null => (v === null || v === undefined ? null : ((typeof v === 'string' ? JSON.parse(v) : v) as T));
const time = (v: unknown): Date | null => (v === null || v === undefined ? null : new Date(v as string));

const batchRow = (r: Record<string, any>): BatchRow => ({
  batchId: r.batch_id,
  accountId: r.account_id,
  workspaceId: r.workspace_id,
  keyId: r.key_id,
  endpoint: r.endpoint,
  inputFileId: r.input_file_id,
  completionWindow: r.completion_window,
  metadata: json(r.metadata),
  status: r.status,
  errors: json(r.errors),
  total: r.total,
  completed: r.completed,
  failed: r.failed,
  outputFileId: r.output_file_id,
  errorFileId: r.error_file_id,
  createdAt: new Date(r.created_at),
  expiresAt: new Date(r.expires_at),
  inProgressAt: time(r.in_progress_at),
  finalizingAt: time(r.finalizing_at),
  completedAt: time(r.completed_at),
  failedAt: time(r.failed_at),
  expiredAt: time(r.expired_at),
  cancellingAt: time(r.cancelling_at),
  cancelledAt: time(r.cancelled_at),
});

export async function getBatch(sql: SqlExecutor, workspaceId: string, batchId: string): Promise<BatchRow | null> {
  const { rows } = await sql.query<Record<string, any>>('SELECT * FROM batches WHERE batch_id = $1 AND workspace_id = $2', [batchId, workspaceId]);
  return rows[0] ? batchRow(rows[0]) : null;
}

/** OpenAI's list: newest first, `limit` of them after the batch `after`. */
export async function listBatches(sql: SqlExecutor, workspaceId: string, after: string | null, limit: number): Promise<BatchRow[]> {
  const { rows } = await sql.query<Record<string, any>>(
    `SELECT * FROM batches WHERE workspace_id = $1
       AND ($2::text IS NULL OR (created_at, batch_id) < (SELECT created_at, batch_id FROM batches WHERE batch_id = $2 AND workspace_id = $1))
     ORDER BY created_at DESC, batch_id DESC LIMIT $3`,
    [workspaceId, after, limit],
  );
  return rows.map(batchRow);
}

/** The batches a worker has something to do for, oldest first. */
export async function activeBatches(sql: SqlExecutor): Promise<BatchRow[]> {
  const { rows } = await sql.query<Record<string, any>>(
    `SELECT * FROM batches WHERE status IN ('validating', 'in_progress', 'cancelling', 'finalizing') ORDER BY created_at, batch_id`,
  );
  return rows.map(batchRow);
}
