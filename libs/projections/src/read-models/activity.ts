import type { RecordedEvent } from '../../../eventstore/src/port';
import type { AccountEvent } from '../../../ledger/src/account';
import type { SqlExecutor } from '../../../platform/src/sql';
import { eventTime, type Projection } from '../projection';

type Ev<T extends AccountEvent['type']> = RecordedEvent<T, Extract<AccountEvent, { type: T }>['data']>;

/** What a resolved request adds to its day's row. */
interface Contribution {
  accountId: string;
  keyId: string;
  /** ISO date-time; its UTC day is the row's. */
  at: string;
  model: string;
  endpoint: string;
  user: string | null;
  billed: boolean;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  reasoningTokens: number;
  costNano: string;
}

/** The attribution a request's HoldPlaced gave it, taken (and forgotten) when the hold resolves. */
interface OpenHold {
  model: string;
  endpoint: string;
  user_id: string | null;
}

/**
 * Daily usage per (account, key, model, endpoint, end user) for GET /v1/activity (spec 4.20).
 * A request counts on the day it was resolved: billed ones (UsageCharged, on its `charged_at`,
 * the instant the spend windows count it) with their tokens and cost, the others (zero
 * completion, error, expired hold) in `requests_not_billed` only.
 *
 * The end user (`safety_identifier` / `user` of the request) is only in HoldPlaced's metadata,
 * and HoldExpired carries neither model nor endpoint, so open holds keep their attribution here.
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
    // Requests without an end user share one row per day: NULLS NOT DISTINCT (PostgreSQL 15+).
    `CREATE UNIQUE INDEX IF NOT EXISTS activity_daily_row ON activity_daily (account_id, key_id, day, model, endpoint, user_id) NULLS NOT DISTINCT`,
    `CREATE INDEX IF NOT EXISTS activity_daily_key_day ON activity_daily (key_id, day)`,
  ],
  handlers: {
    HoldPlaced: async (e: Ev<'HoldPlaced'>, tx) => {
      const user = e.metadata.user;
      await tx.query('INSERT INTO activity_open_holds (hold_id, account_id, model, endpoint, user_id) VALUES ($1, $2, $3, $4, $5)', [
        e.data.hold_id,
        e.data.account_id,
        e.data.model,
        e.data.endpoint,
        typeof user === 'string' && user !== '' ? user : null,
      ]);
    },
    UsageCharged: async (e: Ev<'UsageCharged'>, tx) => {
      const d = e.data;
      const hold = await takeHold(tx, d.account_id, d.hold_id);
      await add(tx, {
        accountId: d.account_id,
        keyId: d.key_id,
        at: d.charged_at ?? eventTime(e),
        // The model and endpoint that answered, which the charge names.
        model: d.model,
        endpoint: d.endpoint,
        user: hold?.user_id ?? null,
        billed: true,
        promptTokens: d.prompt_tokens,
        completionTokens: d.completion_tokens,
        cachedTokens: d.cached_tokens,
        reasoningTokens: d.reasoning_tokens,
        costNano: d.amount_nano,
      });
    },
    HoldReleased: async (e: Ev<'HoldReleased'>, tx) => {
      const d = e.data;
      const hold = await takeHold(tx, d.account_id, d.hold_id);
      const model = d.model ?? hold?.model;
      const endpoint = d.endpoint ?? hold?.endpoint;
      // Only a log whose HoldPlaced is missing lacks both; such a request has nowhere to count.
      if (model === undefined || endpoint === undefined) return;
      await add(tx, notBilled(d.account_id, d.key_id, eventTime(e), model, endpoint, hold?.user_id ?? null));
    },
    HoldExpired: async (e: Ev<'HoldExpired'>, tx) => {
      const d = e.data;
      const hold = await takeHold(tx, d.account_id, d.hold_id);
      if (!hold) return;
      await add(tx, notBilled(d.account_id, d.key_id, eventTime(e), hold.model, hold.endpoint, hold.user_id));
    },
  },
};

function notBilled(accountId: string, keyId: string, at: string, model: string, endpoint: string, user: string | null): Contribution {
  return { accountId, keyId, at, model, endpoint, user, billed: false, promptTokens: 0, completionTokens: 0, cachedTokens: 0, reasoningTokens: 0, costNano: '0' };
}

async function takeHold(tx: SqlExecutor, accountId: string, holdId: string): Promise<OpenHold | null> {
  const { rows } = await tx.query<OpenHold>('DELETE FROM activity_open_holds WHERE account_id = $1 AND hold_id = $2 RETURNING model, endpoint, user_id', [
    accountId,
    holdId,
  ]);
  return rows[0] ?? null;
}

async function add(tx: SqlExecutor, c: Contribution): Promise<void> {
  await tx.query(
    `INSERT INTO activity_daily (account_id, key_id, day, model, endpoint, user_id, requests, requests_not_billed,
                                 prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost_nano)
     VALUES ($1, $2, ($3::timestamptz AT TIME ZONE 'UTC')::date, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
     ON CONFLICT (account_id, key_id, day, model, endpoint, user_id) DO UPDATE SET
       requests = activity_daily.requests + EXCLUDED.requests,
       requests_not_billed = activity_daily.requests_not_billed + EXCLUDED.requests_not_billed,
       prompt_tokens = activity_daily.prompt_tokens + EXCLUDED.prompt_tokens,
       completion_tokens = activity_daily.completion_tokens + EXCLUDED.completion_tokens,
       cached_tokens = activity_daily.cached_tokens + EXCLUDED.cached_tokens,
       reasoning_tokens = activity_daily.reasoning_tokens + EXCLUDED.reasoning_tokens,
       cost_nano = activity_daily.cost_nano + EXCLUDED.cost_nano`,
    [
      c.accountId,
      c.keyId,
      c.at,
      c.model,
      c.endpoint,
      c.user,
      c.billed ? 1 : 0,
      c.billed ? 0 : 1,
      c.promptTokens,
      c.completionTokens,
      c.cachedTokens,
      c.reasoningTokens,
      c.costNano,
    ],
  );
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
}

/** Usage per day, model and endpoint; newest day first, then by model and endpoint (bytewise, whatever the database's collation). */
export async function getActivity(sql: SqlExecutor, f: ActivityFilter): Promise<ActivityRow[]> {
  const { rows } = await sql.query<Record<string, string>>(
    `SELECT to_char(a.day, 'YYYY-MM-DD') AS date, a.model, a.endpoint,
            SUM(a.requests)::text AS requests, SUM(a.requests_not_billed)::text AS requests_not_billed,
            SUM(a.prompt_tokens)::text AS prompt_tokens, SUM(a.completion_tokens)::text AS completion_tokens,
            SUM(a.cached_tokens)::text AS cached_tokens, SUM(a.reasoning_tokens)::text AS reasoning_tokens,
            SUM(a.cost_nano)::text AS cost_nano
       FROM activity_daily a
       JOIN api_keys k ON k.key_id = a.key_id
      WHERE a.account_id = $1 AND k.workspace_id = $2 AND ($3::text IS NULL OR a.key_id = $3)
        AND a.day BETWEEN $4::date AND $5::date AND ($6::text IS NULL OR a.user_id = $6)
      GROUP BY a.day, a.model, a.endpoint
      ORDER BY a.day DESC, a.model COLLATE "C", a.endpoint COLLATE "C"`,
    [f.accountId, f.workspaceId, f.keyId, f.from, f.to, f.user],
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
  }));
}
