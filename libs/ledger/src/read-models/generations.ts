import type { AccountEvent, GuardrailFinding } from '../account';
import type { CostLine, MeterUsage } from '../pricing';
import type { SqlExecutor } from '@svc/platform';
import { asTable, type Projection } from '@svc/projections';
import type { AccountRecorded } from './account-recorded';
import { GenerationsBatch, type GenerationStatus, type Outcome, type Placed } from './generations-batch';

export type { GenerationStatus } from './generations-batch';

/**
 * One row per request, keyed by the service's own id (GET /v1/generation). A batch inserts the
 * requests it placed with their outcome, and updates those of earlier batches it settled, one
 * statement each.
 */
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
    // What a charge billed, by meter (ARCHITECTURE section 10); null for a request not billed.
    `ALTER TABLE generations ADD COLUMN IF NOT EXISTS meters jsonb`,
    // A cache hit's row names the generation whose answer it replayed (spec 4.2).
    `ALTER TABLE generations ADD COLUMN IF NOT EXISTS cache_source_id text`,
    // The preset and version a request ran with (spec 2.5), from the hold's metadata.
    `ALTER TABLE generations ADD COLUMN IF NOT EXISTS preset text`,
    `ALTER TABLE generations ADD COLUMN IF NOT EXISTS preset_version integer`,
    // Issue 23: the lines of a charge, and what the provider charged the operator (null: unknown).
    `ALTER TABLE generations ADD COLUMN IF NOT EXISTS cost_lines jsonb`,
    `ALTER TABLE generations ADD COLUMN IF NOT EXISTS provider_cost_nano bigint`,
    // Issue 44: what the guardrails' content filters found in the prompt (counts by guardrail and filter, never text).
    `ALTER TABLE generations ADD COLUMN IF NOT EXISTS guardrail_findings jsonb`,
    `CREATE INDEX IF NOT EXISTS generations_account ON generations (account_id, created_at)`,
  ],
  eventTypes: new Set<AccountEvent['type']>(['HoldPlaced', 'UsageCharged', 'UsageCorrected', 'HoldReleased', 'HoldExpired', 'FreeGenerationRecorded']),
  apply: async (events: readonly AccountRecorded[], tx) => {
    const batch = new GenerationsBatch();
    for (const e of events) batch.fold(e);
    await insertPlaced(tx, batch.placed);
    await updateSettled(tx, batch.settled);
    await insertFree(tx, batch.free);
  },
};

async function insertPlaced(tx: SqlExecutor, placed: Map<string, Placed>): Promise<void> {
  if (placed.size === 0) return;
  const rows = [...placed.values()].map((g) => {
    const u = g.outcome?.usage;
    return [
      g.id,
      g.account_id,
      g.key_id,
      u?.model ?? g.model,
      g.endpoint,
      u?.provider ?? null,
      g.outcome?.status ?? 'in_progress',
      u?.prompt_tokens ?? 0,
      u?.completion_tokens ?? 0,
      u?.cached_tokens ?? 0,
      u?.reasoning_tokens ?? 0,
      g.outcome?.cost_nano ?? '0',
      u?.latency_ms ?? null,
      u?.ttft_ms ?? null,
      u?.error_code ?? null,
      g.client_request_id,
      g.created_at,
      g.outcome?.finished_at ?? null,
      u?.meters ?? null,
      g.preset,
      g.preset_version,
      u?.cost_lines ?? null,
      u?.provider_cost_nano ?? null,
      g.guardrail_findings ?? null,
    ];
  });
  const c = asTable(INSERTED, rows);
  await tx.query(
    `INSERT INTO generations (id, account_id, key_id, model, endpoint, provider, status, prompt_tokens, completion_tokens, cached_tokens,
                                  reasoning_tokens, cost_nano, latency_ms, ttft_ms, error_code, client_request_id, created_at, finished_at, meters,
                                  preset, preset_version, cost_lines, provider_cost_nano, guardrail_findings)
         SELECT * FROM ${c.table} AS d`,
    c.params,
  );
}

async function updateSettled(tx: SqlExecutor, settled: Map<string, Outcome>): Promise<void> {
  if (settled.size === 0) return;
  const rows = [...settled].map(([id, o]) => {
    const u = o.usage;
    return [
      id,
      o.status,
      o.cost_nano,
      o.finished_at,
      u !== undefined,
      u?.error_code ?? null,
      u?.model ?? null,
      u?.provider ?? null,
      u?.prompt_tokens ?? 0,
      u?.completion_tokens ?? 0,
      u?.cached_tokens ?? 0,
      u?.reasoning_tokens ?? 0,
      u?.latency_ms ?? null,
      u?.ttft_ms ?? null,
      u?.meters ?? null,
      u?.cost_lines ?? null,
      u?.provider_cost_nano ?? null,
    ];
  });
  const c = asTable(SETTLED, rows);
  await tx.query(
    `UPDATE generations g SET status = d.status, cost_nano = d.cost_nano, finished_at = d.finished_at,
                model = COALESCE(d.model, g.model),
                error_code = CASE WHEN d.known THEN d.error_code ELSE g.error_code END,
                provider = CASE WHEN d.known THEN d.provider ELSE g.provider END,
                prompt_tokens = CASE WHEN d.known THEN d.prompt_tokens ELSE g.prompt_tokens END,
                completion_tokens = CASE WHEN d.known THEN d.completion_tokens ELSE g.completion_tokens END,
                cached_tokens = CASE WHEN d.known THEN d.cached_tokens ELSE g.cached_tokens END,
                reasoning_tokens = CASE WHEN d.known THEN d.reasoning_tokens ELSE g.reasoning_tokens END,
                latency_ms = CASE WHEN d.known THEN d.latency_ms ELSE g.latency_ms END,
                ttft_ms = CASE WHEN d.known THEN d.ttft_ms ELSE g.ttft_ms END,
                meters = CASE WHEN d.known THEN d.meters ELSE g.meters END,
                cost_lines = CASE WHEN d.known THEN d.cost_lines ELSE g.cost_lines END,
                provider_cost_nano = CASE WHEN d.known THEN d.provider_cost_nano ELSE g.provider_cost_nano END
           FROM ${c.table} AS d(id, status, cost_nano, finished_at, known, error_code, model, provider,
                                 prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, latency_ms, ttft_ms, meters,
                                 cost_lines, provider_cost_nano)
          WHERE g.id = d.id`,
    c.params,
  );
}

async function insertFree(tx: SqlExecutor, free: unknown[][]): Promise<void> {
  if (free.length === 0) return;
  // Written last, so a cache hit's source placed in this same batch is already a row to read the model from.
  const c = asTable(FREE, free);
  await tx.query(
    `INSERT INTO generations (id, account_id, key_id, model, endpoint, provider, status, client_request_id, created_at, finished_at, cache_source_id, latency_ms)
         SELECT d.id, d.account_id, d.key_id, COALESCE(d.model, s.model, ''), d.endpoint, d.provider,
                CASE WHEN d.source_id IS NULL THEN 'completed' ELSE 'cached' END, d.client_request_id, d.at, d.at, d.source_id, d.latency_ms
           FROM ${c.table} AS d(id, account_id, key_id, model, endpoint, provider, client_request_id, at, source_id, latency_ms)
           LEFT JOIN generations s ON s.id = d.source_id`,
    c.params,
  );
}

const FREE = ['text', 'text', 'text', 'text', 'text', 'text', 'text', 'timestamptz', 'text', 'integer'];

const INSERTED = [
  'text',
  'text',
  'text',
  'text',
  'text',
  'text',
  'text',
  'integer',
  'integer',
  'integer',
  'integer',
  'bigint',
  'integer',
  'integer',
  'text',
  'text',
  'timestamptz',
  'timestamptz',
  'jsonb',
  'text',
  'integer',
  'jsonb',
  'bigint',
  'jsonb',
];
const SETTLED = [
  'text',
  'text',
  'bigint',
  'timestamptz',
  'boolean',
  'text',
  'text',
  'text',
  'integer',
  'integer',
  'integer',
  'integer',
  'integer',
  'integer',
  'jsonb',
  'jsonb',
  'bigint',
];

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
  /** The preset and version the request ran with; null without one. */
  preset: { slug: string; version: number } | null;
  /** A cache hit (status `cached`): the generation whose answer it replayed. */
  cacheSourceId: string | null;
  /** What a charge billed, by meter; null when nothing was billed. */
  meters: MeterUsage | null;
  /** Issue 23: the charge's lines; null when it was recorded without them (before issue 23, or by the hold reaper). */
  costLines: CostLine[] | null;
  /** What the provider charged the operator; null when unknown (or not billed). Never shown to the account. */
  providerCostNano: bigint | null;
  /** Issue 44: what the guardrails' content filters found in the prompt; null when nothing was. */
  guardrailFindings: GuardrailFinding[] | null;
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
    preset: r.preset ? { slug: r.preset, version: r.preset_version } : null,
    cacheSourceId: r.cache_source_id ?? null,
    meters: r.meters ?? null,
    costLines: r.cost_lines ?? null,
    providerCostNano: r.provider_cost_nano === null || r.provider_cost_nano === undefined ? null : BigInt(r.provider_cost_nano),
    guardrailFindings: r.guardrail_findings ?? null,
    createdAt: new Date(r.created_at),
    finishedAt: r.finished_at === null ? null : new Date(r.finished_at),
  };
}
