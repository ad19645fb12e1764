import { createHash } from 'node:crypto';
import type { AccountEvent } from '../account';
import { type MeterUsage, UNIT_METERS, type UnitMeter } from '../pricing';
import type { SqlExecutor } from '@svc/platform';
import { asColumns, eventTime, utcDay, type Projection } from '@svc/projections';
import type { AccountRecorded } from './credits';

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
  /** What it adds to the billed and not-billed request counts, when not one request of its kind (a correction). */
  requests?: [billed: number, notBilled: number];
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  reasoningTokens: number;
  costNano: string;
  /** The meters other than tokens (characters, images...), 0 where unused. */
  units: MeterUsage;
}

/** The attribution a request's HoldPlaced gave it, taken (and forgotten) when the hold resolves. */
interface OpenHold {
  account_id: string;
  hold_id: string;
  model: string;
  endpoint: string;
  user_id: string | null;
  /** A hold the hold reaper released: when (ISO), so its gateway's correction moves it to billed on that day (issue 41 D). */
  released_at?: string | null;
}

/** One activity_daily row's key and the sums a batch adds to it. */
type DailySums = [accountId: string, keyId: string, day: string, model: string, endpoint: string, user: string | null, ...sums: bigint[]];

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
    const holdKey = (accountId: string, holdId: string) => `${accountId}\u0000${holdId}`;
    const holdOf = (e: AccountRecorded) => holdKey(e.data.account_id, (e.data as { hold_id: string }).hold_id);
    // First the holds of earlier batches that this one resolves.
    const openHere = new Set<string>();
    const earlier: [string, string][] = [];
    for (const e of events) {
      if (e.type === 'HoldPlaced') openHere.add(holdOf(e));
      else if (
        (e.type === 'UsageCharged' || e.type === 'UsageCorrected' || e.type === 'HoldReleased' || e.type === 'HoldExpired') &&
        !openHere.delete(holdOf(e))
      ) {
        earlier.push([e.data.account_id, e.data.hold_id]);
      }
    }
    const open = new Map<string, OpenHold>();
    if (earlier.length > 0) {
      const c = asColumns(['text', 'text'], earlier);
      const { rows } = await tx.query<OpenHold>(
        `DELETE FROM activity_open_holds h USING ${c.unnest} AS d(account_id, hold_id)
          WHERE h.account_id = d.account_id AND h.hold_id = d.hold_id
          RETURNING h.account_id, h.hold_id, h.model, h.endpoint, h.user_id,
                    to_char(h.released_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS released_at`,
        c.params,
      );
      for (const r of rows) open.set(holdKey(r.account_id, r.hold_id), r);
    }
    const take = (e: AccountRecorded): OpenHold | null => {
      const key = holdOf(e);
      const hold = open.get(key) ?? null;
      open.delete(key);
      return hold;
    };

    const daily = new Map<string, DailySums>();
    const add = (c: Contribution) => {
      const day = utcDay(c.at);
      const slot = JSON.stringify([c.accountId, c.keyId, day, c.model, c.endpoint, c.user]);
      const [billed, notBilled] = c.requests ?? (c.billed ? [1, 0] : [0, 1]);
      const sums = [
        billed,
        notBilled,
        c.promptTokens,
        c.completionTokens,
        c.cachedTokens,
        c.reasoningTokens,
        c.costNano,
        ...UNIT_METERS.map((m) => c.units[m] ?? 0),
      ];
      const row = daily.get(slot) ?? [c.accountId, c.keyId, day, c.model, c.endpoint, c.user, ...sums.map(() => 0n)];
      sums.forEach((value, i) => (row[6 + i] = (row[6 + i] as bigint) + BigInt(value)));
      daily.set(slot, row);
    };
    for (const e of events) {
      switch (e.type) {
        case 'HoldPlaced': {
          const user = e.metadata.user;
          const d = e.data;
          open.set(holdOf(e), {
            account_id: d.account_id,
            hold_id: d.hold_id,
            model: d.model,
            endpoint: d.endpoint,
            user_id: typeof user === 'string' && user !== '' ? user : null,
          });
          break;
        }
        case 'UsageCharged': {
          const d = e.data;
          const hold = take(e);
          add({
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
            units: d.usage ?? {},
          });
          break;
        }
        // Issue 41 D: what a gateway charged beyond the reaper's charge, counted with the request the
        // reaper settled, not as one more. One the reaper released (kept aside for this, below)
        // moves from not billed to billed in its row; the end user is in the metadata otherwise.
        case 'UsageCorrected': {
          const d = e.data;
          const released = take(e);
          const user = e.metadata.user;
          const added = d.usage_added;
          add({
            accountId: d.account_id,
            keyId: d.key_id,
            at: released ? (released.released_at ?? d.charged_at) : d.charged_at,
            model: released?.model ?? d.model,
            endpoint: released?.endpoint ?? d.endpoint,
            user: released ? released.user_id : typeof user === 'string' && user !== '' ? user : null,
            billed: true,
            requests: released ? [1, -1] : [0, 0],
            promptTokens: added.input ?? 0,
            completionTokens: added.output ?? 0,
            cachedTokens: added.cached_input ?? 0,
            reasoningTokens: 0,
            costNano: d.amount_nano,
            units: added,
          });
          break;
        }
        case 'HoldReleased': {
          const d = e.data;
          const hold = take(e);
          const model = d.model ?? hold?.model;
          const endpoint = d.endpoint ?? hold?.endpoint;
          // Only a log whose HoldPlaced is missing lacks both; such a request has nowhere to count.
          if (model === undefined || endpoint === undefined) break;
          add(notBilled(d.account_id, d.key_id, eventTime(e), model, endpoint, hold?.user_id ?? null));
          // Issue 41 D: its gateway may yet charge it (UsageCorrected): where it was counted is kept for that.
          if (d.reaped && hold) open.set(holdOf(e), { ...hold, model, endpoint, released_at: eventTime(e) });
          break;
        }
        case 'HoldExpired': {
          const d = e.data;
          const hold = take(e);
          if (hold) add(notBilled(d.account_id, d.key_id, eventTime(e), hold.model, hold.endpoint, hold.user_id));
          break;
        }
        // Issue 41 item 17: a free call (spec 4.13, moderation) is a request answered, at cost 0,
        // so it counts in `requests` like a billed one. A response cache hit names no model (only
        // the generation it replays) and stays out: its request was counted when first answered.
        case 'FreeGenerationRecorded': {
          const d = e.data;
          if (d.model === undefined || d.source_id !== undefined) break;
          const user = e.metadata.user;
          add({
            accountId: d.account_id,
            keyId: d.key_id,
            at: eventTime(e),
            model: d.model,
            endpoint: d.endpoint,
            user: typeof user === 'string' && user !== '' ? user : null,
            billed: true,
            promptTokens: 0,
            completionTokens: 0,
            cachedTokens: 0,
            reasoningTokens: 0,
            costNano: '0',
            units: {},
          });
          break;
        }
      }
    }

    // Whatever is still in `open` was placed by this batch (those of earlier batches were deleted
    // above only when resolved, and taken here at once), or released by the reaper and kept aside.
    if (open.size > 0) {
      const c = asColumns(
        ['text', 'text', 'text', 'text', 'text', 'timestamptz'],
        [...open.values()].map((h) => [h.hold_id, h.account_id, h.model, h.endpoint, h.user_id, h.released_at ?? null]),
      );
      await tx.query(`INSERT INTO activity_open_holds (hold_id, account_id, model, endpoint, user_id, released_at) SELECT * FROM ${c.unnest}`, c.params);
    }
    if (daily.size > 0) {
      const c = asColumns(
        [
          'text',
          'text',
          'date',
          'text',
          'text',
          'text',
          'text',
          'integer',
          'integer',
          'bigint',
          'bigint',
          'bigint',
          'bigint',
          'bigint',
          ...UNIT_METERS.map(() => 'bigint'),
        ],
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
         SELECT * FROM ${c.unnest}
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
  },
};

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

function notBilled(accountId: string, keyId: string, at: string, model: string, endpoint: string, user: string | null): Contribution {
  return {
    accountId,
    keyId,
    at,
    model,
    endpoint,
    user,
    billed: false,
    promptTokens: 0,
    completionTokens: 0,
    cachedTokens: 0,
    reasoningTokens: 0,
    costNano: '0',
    units: {},
  };
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
      GROUP BY a.day, a.model, a.endpoint
      ORDER BY a.day DESC, a.model COLLATE "C", a.endpoint COLLATE "C"`,
    [f.accountId, f.workspaceId, f.keyId, f.from, f.to, f.user, endUserHash(f.user)],
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
