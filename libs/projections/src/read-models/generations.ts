import type { AccountEvent } from '../../../ledger/src/account';
import type { RecordedEvent } from '../../../eventstore/src/port';
import type { SqlExecutor } from '../../../platform/src/sql';
import { eventTime, type Projection } from '../projection';

type Ev<T extends AccountEvent['type']> = RecordedEvent<T, Extract<AccountEvent, { type: T }>['data']>;

/** One row per request, keyed by the service's own id (GET /v1/generation). */
export const generationsProjection: Projection = {
  name: 'generations',
  tables: ['generations'],
  schema: [
    `CREATE TABLE IF NOT EXISTS generations (
      id text PRIMARY KEY,
      account_id text NOT NULL,
      key_id text NOT NULL,
      model text NOT NULL,
      endpoint text NOT NULL,
      provider text,
      status text NOT NULL,
      prompt_tokens integer NOT NULL DEFAULT 0,
      completion_tokens integer NOT NULL DEFAULT 0,
      cached_tokens integer NOT NULL DEFAULT 0,
      reasoning_tokens integer NOT NULL DEFAULT 0,
      cost_nano bigint NOT NULL DEFAULT 0,
      latency_ms integer,
      ttft_ms integer,
      error_code text,
      client_request_id text,
      created_at timestamptz NOT NULL,
      finished_at timestamptz
    )`,
    // Read models created before X-Client-Request-Id was recorded gain the column in place.
    `ALTER TABLE generations ADD COLUMN IF NOT EXISTS client_request_id text`,
    `CREATE INDEX IF NOT EXISTS generations_account ON generations (account_id, created_at)`,
  ],
  handlers: {
    HoldPlaced: async (e: Ev<'HoldPlaced'>, tx) => {
      const d = e.data;
      // The client's X-Client-Request-Id travels in the metadata: it is the caller's, not the ledger's.
      const clientRequestId = e.metadata.client_request_id;
      await tx.query(
        `INSERT INTO generations (id, account_id, key_id, model, endpoint, status, client_request_id, created_at)
         VALUES ($1, $2, $3, $4, $5, 'in_progress', $6, $7)`,
        [d.hold_id, d.account_id, d.key_id, d.model, d.endpoint, typeof clientRequestId === 'string' ? clientRequestId : null, eventTime(e)],
      );
    },
    UsageCharged: async (e: Ev<'UsageCharged'>, tx) => finish(tx, e, 'completed', e.data.amount_nano, null),
    HoldReleased: async (e: Ev<'HoldReleased'>, tx) =>
      finish(tx, e, e.data.reason === 'zero_completion' ? 'not_billed' : 'failed', '0', e.data.error_code ?? null),
    // Never settled (the process died mid-request): nothing is known of its usage, nothing is charged.
    HoldExpired: async (e: Ev<'HoldExpired'>, tx) => {
      await tx.query(`UPDATE generations SET status = 'expired', cost_nano = 0, finished_at = $2 WHERE id = $1`, [e.data.hold_id, eventTime(e)]);
    },
  },
};

async function finish(
  tx: SqlExecutor,
  e: Ev<'UsageCharged' | 'HoldReleased'>,
  status: string,
  costNano: string,
  errorCode: string | null,
): Promise<void> {
  const d = e.data;
  await tx.query(
    `UPDATE generations SET status = $2, cost_nano = $3, error_code = $4, finished_at = $5,
       model = COALESCE($6, model), provider = $7, prompt_tokens = $8, completion_tokens = $9,
       cached_tokens = $10, reasoning_tokens = $11, latency_ms = $12, ttft_ms = $13
     WHERE id = $1`,
    [
      d.hold_id,
      status,
      costNano,
      errorCode,
      eventTime(e),
      d.model ?? null,
      d.provider ?? null,
      d.prompt_tokens ?? 0,
      d.completion_tokens ?? 0,
      d.cached_tokens ?? 0,
      d.reasoning_tokens ?? 0,
      d.latency_ms ?? null,
      d.ttft_ms ?? null,
    ],
  );
}

export type GenerationStatus = 'in_progress' | 'completed' | 'not_billed' | 'failed' | 'expired';

export interface GenerationRow {
  id: string;
  accountId: string;
  keyId: string;
  model: string;
  endpoint: string;
  provider: string | null;
  status: GenerationStatus;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  reasoningTokens: number;
  costNano: bigint;
  latencyMs: number | null;
  ttftMs: number | null;
  errorCode: string | null;
  clientRequestId: string | null;
  createdAt: Date;
  finishedAt: Date | null;
}

/**
 * The generations among `ids` made with a key of the workspace (issue: ledger, lookup is
 * scoped to the caller's workspace); the others are simply absent.
 */
export async function getWorkspaceGenerations(sql: SqlExecutor, workspaceId: string, ids: readonly string[]): Promise<GenerationRow[]> {
  const { rows } = await sql.query<Record<string, any>>(
    'SELECT g.* FROM generations g JOIN api_keys k ON k.key_id = g.key_id WHERE k.workspace_id = $1 AND g.id = ANY($2::text[])',
    [workspaceId, ids],
  );
  return rows.map(toRow);
}

function toRow(r: Record<string, any>): GenerationRow {
  return {
    id: r.id,
    accountId: r.account_id,
    keyId: r.key_id,
    model: r.model,
    endpoint: r.endpoint,
    provider: r.provider,
    status: r.status,
    promptTokens: r.prompt_tokens,
    completionTokens: r.completion_tokens,
    cachedTokens: r.cached_tokens,
    reasoningTokens: r.reasoning_tokens,
    costNano: BigInt(r.cost_nano),
    latencyMs: r.latency_ms,
    ttftMs: r.ttft_ms,
    errorCode: r.error_code,
    clientRequestId: r.client_request_id,
    createdAt: new Date(r.created_at),
    finishedAt: r.finished_at === null ? null : new Date(r.finished_at),
  };
}
