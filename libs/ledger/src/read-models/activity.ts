import { createHash } from 'node:crypto';
import type { AccountEvent } from '../account';
import { UNIT_METERS, type UnitMeter } from '../pricing';
import type { SqlExecutor } from '@svc/platform';
import { asTable, type Projection } from '@svc/projections';
import type { AccountRecorded } from './account-recorded';
import { ActivityBatch, earlierHolds, type DailySums, type OpenHold } from './activity-batch';

/**
 * Daily usage per (account, key, model, endpoint, end user) for GET /v1/activity (spec 4.20).
 * A request counts on the day it was resolved: billed ones (UsageCharged, on its `charged_at`,
 * the instant the spend windows count it) with their tokens and cost, free ones
 * (FreeGenerationRecorded of a free model) at cost 0, the others (zero completion, error,
 * expired hold) in `requests_not_billed` only.
 *
 * The end user (`safety_identifier` / `user` of the request) is only in HoldPlaced's metadata,
 * and HoldExpired carries neither model nor endpoint, so open holds keep their attribution here.
 * A batch takes the holds of earlier batches it resolves in one statement, then adds its sums
 * in one upsert; holds placed and resolved within it never reach the table.
 */
export const activityProjection: Projection = {
  name: 'activity',
  tables: ['activity_daily', 'activity_open_holds'],
  schema: [
    `CREATE TABLE IF NOT EXISTS activity_open_holds (
      hold_id text NOT NULL,
      account_id text NOT NULL,
      model text NOT NULL,
      endpoint text NOT NULL,
      user_id text,
      PRIMARY KEY (account_id, hold_id)
    )`,
    `ALTER TABLE activity_open_holds ADD COLUMN IF NOT EXISTS released_at timestamptz`,
    `CREATE TABLE IF NOT EXISTS activity_daily (
      account_id text NOT NULL,
      key_id text NOT NULL,
      day date NOT NULL,
      model text NOT NULL,
      endpoint text NOT NULL,
      user_id text,
      requests integer NOT NULL,
      requests_not_billed integer NOT NULL,
      prompt_tokens bigint NOT NULL,
      completion_tokens bigint NOT NULL,
      cached_tokens bigint NOT NULL,
      reasoning_tokens bigint NOT NULL,
      cost_nano bigint NOT NULL
    )`,
    // The meters other than tokens (ARCHITECTURE section 10), added in place to older read models.
    ...UNIT_METERS.map((meter) => `ALTER TABLE activity_daily ADD COLUMN IF NOT EXISTS ${meter} bigint NOT NULL DEFAULT 0`),
    // Issue 41 C: the end user is the caller's text, of any length (spec 4.2 and 4.3 state none),
    // and a btree row holds ~2.7 KB: a longer one in the row's unique index made PostgreSQL
    // refuse the request's charge, which stopped the projection for every account. The index
    // holds its SHA-256 instead; user_id keeps the text, which a filter compares as well.
    `ALTER TABLE activity_daily ADD COLUMN IF NOT EXISTS user_hash text`,
    // Rows of a read model made before were indexed by user_id: they get their hash, once (the
    // condition holds only while that index is there, and is decided before any row is read).
    `UPDATE activity_daily SET user_hash = ${userHashSql('user_id')} WHERE user_id IS NOT NULL AND to_regclass('activity_daily_row') IS NOT NULL`,
    `DROP INDEX IF EXISTS activity_daily_row`,
    // Requests without an end user share one row per day: NULLS NOT DISTINCT (PostgreSQL 15+).
    `CREATE UNIQUE INDEX IF NOT EXISTS activity_daily_slot ON activity_daily (account_id, key_id, day, model, endpoint, user_hash) NULLS NOT DISTINCT`,
    `CREATE INDEX IF NOT EXISTS activity_daily_key_day ON activity_daily (key_id, day)`,
  ],
  eventTypes: new Set<AccountEvent['type']>(['HoldPlaced', 'UsageCharged', 'UsageCorrected', 'HoldReleased', 'HoldExpired', 'FreeGenerationRecorded']),
  apply: async (events: readonly AccountRecorded[], tx) => {
    // First the holds of earlier batches that this one resolves.
    const batch = new ActivityBatch(await takeOpenHolds(tx, earlierHolds(events)));
    for (const e of events) batch.fold(e);
    await insertOpenHolds(tx, batch.open);
    await upsertDaily(tx, batch.daily);
  },
};

async function takeOpenHolds(tx: SqlExecutor, earlier: [string, string][]): Promise<OpenHold[]> {
  if (earlier.length === 0) return [];
  const c = asTable(['text', 'text'], earlier);
  const { rows } = await tx.query<OpenHold>(
    `DELETE FROM activity_open_holds h USING ${c.table} AS d(account_id, hold_id)
          WHERE h.account_id = d.account_id AND h.hold_id = d.hold_id
          RETURNING h.account_id, h.hold_id, h.model, h.endpoint, h.user_id,
                    to_char(h.released_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS released_at`,
    c.params,
  );
  return rows;
}

/**
 * Whatever is still open was placed by this batch (those of earlier batches were deleted by
 * takeOpenHolds only when resolved, and taken at once), or released by the reaper and kept aside.
 */
async function insertOpenHolds(tx: SqlExecutor, open: Map<string, OpenHold>): Promise<void> {
  if (open.size === 0) return;
  const c = asTable(
    ['text', 'text', 'text', 'text', 'text', 'timestamptz'],
    [...open.values()].map((h) => [h.hold_id, h.account_id, h.model, h.endpoint, h.user_id, h.released_at ?? null]),
  );
  await tx.query(`INSERT INTO activity_open_holds (hold_id, account_id, model, endpoint, user_id, released_at) SELECT * FROM ${c.table} AS d`, c.params);
}

const DAILY_COLUMNS = ['text', 'text', 'date', 'text', 'text', 'text', 'text', 'integer', 'integer', 'bigint', 'bigint', 'bigint', 'bigint', 'bigint'];

async function upsertDaily(tx: SqlExecutor, daily: Map<string, DailySums>): Promise<void> {
  if (daily.size === 0) return;
  const c = asTable(
    [...DAILY_COLUMNS, ...UNIT_METERS.map(() => 'bigint')],
    [...daily.values()].map(([accountId, keyId, rowDay, model, endpoint, user, ...sums]) => [
      accountId,
      keyId,
      rowDay,
      model,
      endpoint,
      user,
      endUserHash(user),
      ...sums.map((v) => v.toString()),
    ]),
  );
  await tx.query(
    `INSERT INTO activity_daily (account_id, key_id, day, model, endpoint, user_id, user_hash, requests, requests_not_billed,
                                     prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost_nano, ${UNIT_METERS.join(', ')})
         SELECT * FROM ${c.table} AS d
         ON CONFLICT (account_id, key_id, day, model, endpoint, user_hash) DO UPDATE SET
           requests = activity_daily.requests + EXCLUDED.requests,
           requests_not_billed = activity_daily.requests_not_billed + EXCLUDED.requests_not_billed,
           prompt_tokens = activity_daily.prompt_tokens + EXCLUDED.prompt_tokens,
           completion_tokens = activity_daily.completion_tokens + EXCLUDED.completion_tokens,
           cached_tokens = activity_daily.cached_tokens + EXCLUDED.cached_tokens,
           reasoning_tokens = activity_daily.reasoning_tokens + EXCLUDED.reasoning_tokens,
           cost_nano = activity_daily.cost_nano + EXCLUDED.cost_nano,
           ${UNIT_METERS.map((m) => `${m} = activity_daily.${m} + EXCLUDED.${m}`).join(',\n           ')}`,
    c.params,
  );
}

/**
 * What indexes an end user's rows: SHA-256 of its UTF-8 bytes, hex, which is what
 * userHashSql computes in PostgreSQL. Fixed-size whatever the caller sent, and no two end
 * users share one in practice (a shorter digest such as MD5 can be made to collide on purpose).
 */
export function endUserHash(user: string | null): string | null {
  return user === null ? null : createHash('sha256').update(user, 'utf8').digest('hex');
}

/** endUserHash in SQL, of the text column `column`. */
function userHashSql(column: string): string {
  return `encode(sha256(convert_to(${column}, 'UTF8')), 'hex')`;
}

export interface ActivityFilter {
  accountId: string;
  /** Only keys of this workspace count (a management key's view is its whole workspace). */
  workspaceId: string;
  /** One key only, or every key of the workspace when null. */
  keyId: string | null;
  /** Inclusive UTC days, `YYYY-MM-DD`. */
  from: string;
  to: string;
  /** One end user only, or all (with and without one) when null. */
  user: string | null;
  /** Only these keys (a guardrail's, issue 44), besides `keyId`; absent or null: no such narrowing. */
  keyIds?: readonly string[] | null;
}

export interface ActivityRow {
  /** `YYYY-MM-DD`, UTC. */
  date: string;
  model: string;
  endpoint: string;
  requests: number;
  requestsNotBilled: number;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  reasoningTokens: number;
  costNano: bigint;
  /** The meters other than tokens, summed; 0 where unused. */
  units: Record<UnitMeter, number>;
}

/** Usage per day, model and endpoint; newest day first, then by model and endpoint (bytewise, whatever the database's collation). */
export async function getActivity(sql: SqlExecutor, f: ActivityFilter): Promise<ActivityRow[]> {
  const { rows } = await sql.query<Record<string, string>>(
    `SELECT to_char(a.day, 'YYYY-MM-DD') AS date, a.model, a.endpoint,
            SUM(a.requests)::text AS requests, SUM(a.requests_not_billed)::text AS requests_not_billed,
            SUM(a.prompt_tokens)::text AS prompt_tokens, SUM(a.completion_tokens)::text AS completion_tokens,
            SUM(a.cached_tokens)::text AS cached_tokens, SUM(a.reasoning_tokens)::text AS reasoning_tokens,
            SUM(a.cost_nano)::text AS cost_nano,
            ${UNIT_METERS.map((m) => `SUM(a.${m})::text AS ${m}`).join(', ')}
       FROM activity_daily a
       JOIN api_keys k ON k.key_id = a.key_id
      WHERE a.account_id = $1 AND k.workspace_id = $2 AND ($3::text IS NULL OR a.key_id = $3)
        AND a.day BETWEEN $4::date AND $5::date AND ($6::text IS NULL OR (a.user_hash = $7 AND a.user_id = $6))
        AND ($8::text[] IS NULL OR a.key_id = ANY($8::text[]))
      GROUP BY a.day, a.model, a.endpoint
      ORDER BY a.day DESC, a.model COLLATE "C", a.endpoint COLLATE "C"`,
    [f.accountId, f.workspaceId, f.keyId, f.from, f.to, f.user, endUserHash(f.user), f.keyIds ?? null],
  );
  return rows.map((r) => ({
    date: r.date,
    model: r.model,
    endpoint: r.endpoint,
    requests: Number(r.requests),
    requestsNotBilled: Number(r.requests_not_billed),
    promptTokens: Number(r.prompt_tokens),
    completionTokens: Number(r.completion_tokens),
    cachedTokens: Number(r.cached_tokens),
    reasoningTokens: Number(r.reasoning_tokens),
    costNano: BigInt(r.cost_nano),
    units: Object.fromEntries(UNIT_METERS.map((m) => [m, Number(r[m])])) as Record<UnitMeter, number>,
  }));
}
