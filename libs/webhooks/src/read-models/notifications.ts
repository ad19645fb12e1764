import type { RecordedEvent } from '@svc/eventstore';
import type { SettingsEvent } from '@svc/identity';
import type { SqlExecutor } from '@svc/platform';
import { JOBS_SCHEMA, scheduleJob, scheduleJobs } from '@svc/jobs';
import type { DeliveryEvent } from '../delivery';
import { WEBHOOK_DELIVERY_JOB, type OutboxEvent } from '../delivery-workflow';
import { subscribes, webhookEventId, webhookEventOf, WEBHOOK_SOURCE_TYPES } from '../outbox';
import { createHash } from 'node:crypto';
import type { ModelDeprecated } from '@svc/catalog';
import { asTable, eventTime, type Projection } from '@svc/projections';

type Settings<T extends SettingsEvent['type']> = RecordedEvent<T, Extract<SettingsEvent, { type: T }>['data']>;
type Delivery<T extends DeliveryEvent['type']> = RecordedEvent<T, Extract<DeliveryEvent, { type: T }>['data']>;
type Handler = (event: RecordedEvent<any, any>, tx: SqlExecutor) => Promise<void>;

/** Spec 9: a deprecation is announced to the accounts that used the model in the last 30 days. */
const DEPRECATION_AUDIENCE_MS = 30 * 24 * 3600_000;

/**
 * A domain event that maps to a webhook type becomes an outbox row when the account has an
 * endpoint subscribed to that type at that point of the log. The subscription is this
 * projection's own copy of the settings, so a rebuild decides exactly as the live run did.
 */
async function enqueue(event: RecordedEvent, tx: SqlExecutor): Promise<void> {
  const draft = webhookEventOf(event);
  if (draft) await insertEvent(tx, event, draft.accountId, draft.type, draft.data);
}

async function insertEvent(tx: SqlExecutor, cause: RecordedEvent, accountId: string, type: string, data: object): Promise<void> {
  const { rows } = await tx.query<{ events: string[] | null; webhook_id: string }>(
    'SELECT events, webhook_id FROM webhook_subscriptions WHERE account_id = $1',
    [accountId],
  );
  if (rows.length === 0 || !subscribes(rows[0].events, type)) return;
  const at = eventTime(cause);
  // Issue 41 item 19: the event belongs to the endpoint it was made for, never to a later one.
  const eventId = webhookEventId(cause.id, accountId);
  const inserted = await tx.query(
    `INSERT INTO webhook_events (event_id, account_id, type, created_at, data, state, attempts, next_attempt_at, webhook_id)
     VALUES ($1, $2, $3, $4, $5, 'pending', 0, $4, $6) ON CONFLICT (event_id) DO NOTHING RETURNING event_id`,
    [eventId, accountId, type, at, JSON.stringify(data), rows[0].webhook_id],
  );
  // ARCHITECTURE section 11: the job table is scheduled from the log, in the same transaction as the outbox row.
  if (inserted.rows.length > 0) await scheduleJob(tx, WEBHOOK_DELIVERY_JOB, eventId, at);
}

/**
 * `model.deprecated` (spec 6.1, 9), at once and a week before the sunset: to every subscribed
 * account that used the model in the 30 days before the notice, as this projection's own
 * record of model use says (another projection's tables could be ahead or behind it).
 */
async function announceDeprecation(event: RecordedEvent<'ModelDeprecated', ModelDeprecated['data']>, tx: SqlExecutor): Promise<void> {
  const d = event.data;
  const since = new Date(new Date(d.noticed_at).getTime() - DEPRECATION_AUDIENCE_MS).toISOString();
  const { rows } = await tx.query<{ account_id: string }>(
    'SELECT account_id FROM webhook_model_use WHERE model = $1 AND last_used_at >= $2 ORDER BY account_id',
    [d.model, since],
  );
  const data = { model: d.model, name: d.name, notice: d.kind, sunset: d.sunset, replacement: d.replacement };
  const sunset = d.sunset.slice(0, 10);
  const title = d.kind === 'final' ? `${d.name} retires on ${sunset}` : `${d.name} will be retired on ${sunset}`;
  const message =
    `${d.name} (${d.model}), which this account used in the last 30 days, is deprecated and stops answering on ${sunset}. ` +
    (d.replacement
      ? `Requests for it will then be answered by ${d.replacement}; switch to it before then.`
      : 'It has no replacement: requests for it will then fail with 410 model_retired.');
  for (const { account_id } of rows) {
    await insertEvent(tx, event, account_id, 'model.deprecated', data);
    await tx.query(
      `INSERT INTO notices (notice_id, account_id, type, title, message, data, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (notice_id) DO NOTHING`,
      [noticeId(event.id, account_id), account_id, 'model.deprecated', title, message, JSON.stringify(data), eventTime(event)],
    );
  }
}

/** Derived from its cause, as webhook event ids are: the same notice after a rebuild. */
const noticeId = (sourceEventId: string, accountId: string) =>
  `ntc_${createHash('sha256').update(`notice:${sourceEventId}:${accountId}`).digest('hex').slice(0, 24)}`;

/**
 * What the service tells accounts (spec 6.1, 9): the webhook outbox and its scheduler
 * (ARCHITECTURE section 11; each event with its delivery state, the time its next attempt is
 * due, and every attempt made), and the in-app notices, which the worker also mails.
 */
const HANDLERS: Readonly<Record<string, Handler>> = {
  ...Object.fromEntries(WEBHOOK_SOURCE_TYPES.map((type) => [type, enqueue])),
  ModelDeprecated: announceDeprecation,
  WebhookSaved: async (e: Settings<'WebhookSaved'>, tx) => {
    // Issue 41 item 19: an endpoint saved in place of another (a new id) does not inherit its
    // pending deliveries: they are cancelled, as on a deletion.
    await tx.query(
      `UPDATE webhook_events e SET state = 'cancelled', next_attempt_at = NULL
         FROM webhook_subscriptions s
        WHERE s.account_id = $1 AND s.webhook_id <> $2 AND e.account_id = $1 AND e.state = 'pending'`,
      [e.data.account_id, e.data.webhook_id],
    );
    await tx.query(
      `INSERT INTO webhook_subscriptions (account_id, webhook_id, events) VALUES ($1, $2, $3)
       ON CONFLICT (account_id) DO UPDATE SET webhook_id = EXCLUDED.webhook_id, events = EXCLUDED.events`,
      [e.data.account_id, e.data.webhook_id, e.data.events === null ? null : JSON.stringify(e.data.events)],
    );
  },
  WebhookDeleted: async (e: Settings<'WebhookDeleted'>, tx) => {
    await tx.query('DELETE FROM webhook_subscriptions WHERE account_id = $1', [e.data.account_id]);
    // Issue 41 item 19: deliveries still due to the deleted endpoint are dropped with it, not kept
    // for whichever endpoint comes next; a redelivery waiting on an event already delivered ends too.
    await tx.query(
      `UPDATE webhook_events SET state = CASE WHEN state = 'pending' THEN 'cancelled' ELSE state END, next_attempt_at = NULL
        WHERE account_id = $1 AND next_attempt_at IS NOT NULL`,
      [e.data.account_id],
    );
  },
  WebhookAttemptRecorded: async (e: Delivery<'WebhookAttemptRecorded'>, tx) => {
    const d = e.data;
    await tx.query(
      `INSERT INTO webhook_attempts (event_id, attempt, at, webhook_id, status_code, latency_ms, error, delivered)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (event_id, attempt) DO NOTHING`,
      [d.event_id, d.attempt, d.at, d.webhook_id, d.status_code, d.latency_ms, d.error, d.delivered],
    );
    // Issue 41 item 19: an event once delivered stays delivered; a failed redelivery is one more
    // attempt in its list, not a change of state.
    await tx.query(
      `UPDATE webhook_events SET attempts = $2,
              state = CASE WHEN state = 'delivered' OR $6::boolean THEN 'delivered' WHEN $3::timestamptz IS NOT NULL THEN 'pending' ELSE 'failed' END,
              next_attempt_at = $3, last_status_code = $4, last_error = $5
        WHERE event_id = $1`,
      [d.event_id, d.attempt, d.next_attempt_at, d.status_code, d.error, d.delivered],
    );
    if (d.next_attempt_at !== null) await scheduleJob(tx, WEBHOOK_DELIVERY_JOB, d.event_id, d.next_attempt_at);
  },
  // A delivered event keeps its state while its redelivery is due; a cancelled one (its endpoint
  // deleted) is not redelivered to another endpoint.
  WebhookRedeliveryRequested: async (e: Delivery<'WebhookRedeliveryRequested'>, tx) => {
    const { rows } = await tx.query(
      `UPDATE webhook_events SET state = CASE WHEN state = 'delivered' THEN 'delivered' ELSE 'pending' END, next_attempt_at = $2
        WHERE event_id = $1 AND state <> 'cancelled' RETURNING event_id`,
      [e.data.event_id, e.data.requested_at],
    );
    if (rows.length > 0) await scheduleJob(tx, WEBHOOK_DELIVERY_JOB, e.data.event_id, e.data.requested_at);
  },
  // A paused endpoint's deliveries wait without a job (the workflow lets them go): resumed, each is looked at again.
  WebhookResumed: async (e: Settings<'WebhookResumed'>, tx) => {
    const { rows } = await tx.query<{ event_id: string; next_attempt_at: string | Date }>(
      `SELECT event_id, next_attempt_at FROM webhook_events WHERE account_id = $1 AND next_attempt_at IS NOT NULL AND state <> 'cancelled'`,
      [e.data.account_id],
    );
    await scheduleJobs(
      tx,
      WEBHOOK_DELIVERY_JOB,
      rows.map((r) => ({ key: r.event_id, at: new Date(r.next_attempt_at).toISOString() })),
    );
  },
};

/** Each account's last use of each model, one statement per batch whatever its number of charges. */
async function recordModelUse(used: Map<string, [string, string, string]>, tx: SqlExecutor): Promise<void> {
  if (used.size === 0) return;
  const c = asTable(['text', 'text', 'timestamptz'], [...used.values()]);
  await tx.query(
    `INSERT INTO webhook_model_use (account_id, model, last_used_at) SELECT * FROM ${c.table} AS d
     ON CONFLICT (account_id, model) DO UPDATE SET last_used_at = GREATEST(webhook_model_use.last_used_at, EXCLUDED.last_used_at)`,
    c.params,
  );
  used.clear();
}

export const notificationsProjection: Projection = {
  name: 'notifications',
  tables: ['webhook_subscriptions', 'webhook_events', 'webhook_attempts', 'webhook_model_use', 'notices'],
  eventTypes: new Set([...Object.keys(HANDLERS), 'UsageCharged', 'UsageCorrected']),
  apply: async (events, tx) => {
    const used = new Map<string, [string, string, string]>();
    for (const event of events) {
      if (event.type === 'UsageCharged' || event.type === 'UsageCorrected') {
        const { account_id, model } = event.data as { account_id: string; model: string };
        used.set(`${account_id}\n${model}`, [account_id, model, eventTime(event)]);
        continue;
      }
      // Use recorded before what follows it in the log is handled: a rebuild decides as the live run did.
      await recordModelUse(used, tx);
      await HANDLERS[event.type](event, tx);
    }
    await recordModelUse(used, tx);
  },
  schema: [
    ...JOBS_SCHEMA,
    `CREATE TABLE IF NOT EXISTS webhook_subscriptions (account_id text PRIMARY KEY, webhook_id text NOT NULL, events jsonb)`,
    `CREATE TABLE IF NOT EXISTS webhook_events (
      event_id text PRIMARY KEY,
      account_id text NOT NULL,
      type text NOT NULL,
      created_at timestamptz NOT NULL,
      data jsonb NOT NULL,
      state text NOT NULL,
      attempts integer NOT NULL,
      next_attempt_at timestamptz,
      last_status_code integer,
      last_error text
    )`,
    `CREATE INDEX IF NOT EXISTS webhook_events_due ON webhook_events (next_attempt_at) WHERE state = 'pending'`,
    // Issue 41 item 19: the endpoint an event was made for (null on rows made before: theirs is the account's current one).
    `ALTER TABLE webhook_events ADD COLUMN IF NOT EXISTS webhook_id text`,
    `CREATE INDEX IF NOT EXISTS webhook_events_next ON webhook_events (next_attempt_at) WHERE next_attempt_at IS NOT NULL`,
    `CREATE INDEX IF NOT EXISTS webhook_events_account ON webhook_events (account_id, created_at DESC, event_id DESC)`,
    `CREATE TABLE IF NOT EXISTS webhook_attempts (
      event_id text NOT NULL,
      attempt integer NOT NULL,
      at timestamptz NOT NULL,
      webhook_id text NOT NULL,
      status_code integer,
      latency_ms integer NOT NULL,
      error text,
      delivered boolean NOT NULL,
      PRIMARY KEY (event_id, attempt)
    )`,
    `CREATE TABLE IF NOT EXISTS webhook_model_use (account_id text NOT NULL, model text NOT NULL, last_used_at timestamptz NOT NULL, PRIMARY KEY (account_id, model))`,
    `CREATE INDEX IF NOT EXISTS webhook_model_use_model ON webhook_model_use (model, last_used_at)`,
    `CREATE TABLE IF NOT EXISTS notices (
      notice_id text PRIMARY KEY,
      account_id text NOT NULL,
      type text NOT NULL,
      title text NOT NULL,
      message text NOT NULL,
      data jsonb NOT NULL,
      created_at timestamptz NOT NULL
    )`,
    `CREATE INDEX IF NOT EXISTS notices_account ON notices (account_id, created_at DESC, notice_id DESC)`,
  ],
};

export interface WebhookEventRow {
  id: string;
  accountId: string;
  type: string;
  created: string;
  data: Record<string, unknown>;
  /** `cancelled`: its endpoint was deleted (or replaced) before it was delivered (issue 41 item 19). */
  state: 'pending' | 'delivered' | 'failed' | 'cancelled';
  attempts: number;
  nextAttemptAt: string | null;
  lastStatusCode: number | null;
  lastError: string | null;
}

export interface WebhookAttemptRow {
  attempt: number;
  at: string;
  webhookId: string;
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  delivered: boolean;
}

const iso = (v: unknown) => (v === null || v === undefined ? null : new Date(v as string).toISOString());

function eventRow(r: Record<string, any>): WebhookEventRow {
  return {
    id: r.event_id,
    accountId: r.account_id,
    type: r.type,
    created: iso(r.created_at)!,
    data: typeof r.data === 'string' ? JSON.parse(r.data) : r.data,
    state: r.state,
    attempts: r.attempts,
    nextAttemptAt: iso(r.next_attempt_at),
    lastStatusCode: r.last_status_code,
    lastError: r.last_error,
  };
}

/** An account's webhook events, newest first, after the cursor `after` (an event id) when given. */
export async function listWebhookEvents(sql: SqlExecutor, accountId: string, limit: number, after: string | null): Promise<WebhookEventRow[]> {
  const { rows } = await sql.query<Record<string, any>>(
    `SELECT * FROM webhook_events e WHERE account_id = $1
       AND ($3::text IS NULL OR (created_at, event_id) < (SELECT created_at, event_id FROM webhook_events WHERE event_id = $3 AND account_id = $1))
     ORDER BY created_at DESC, event_id DESC LIMIT $2`,
    [accountId, limit, after],
  );
  return rows.map(eventRow);
}

export async function getWebhookEvent(
  sql: SqlExecutor,
  accountId: string,
  eventId: string,
): Promise<{ event: WebhookEventRow; attempts: WebhookAttemptRow[] } | null> {
  const { rows } = await sql.query<Record<string, any>>('SELECT * FROM webhook_events WHERE event_id = $1 AND account_id = $2', [eventId, accountId]);
  if (!rows[0]) return null;
  const attempts = await sql.query<Record<string, any>>('SELECT * FROM webhook_attempts WHERE event_id = $1 ORDER BY attempt', [eventId]);
  return {
    event: eventRow(rows[0]),
    attempts: attempts.rows.map((a) => ({
      attempt: a.attempt,
      at: iso(a.at)!,
      webhookId: a.webhook_id,
      statusCode: a.status_code,
      latencyMs: a.latency_ms,
      error: a.error,
      delivered: a.delivered,
    })),
  };
}

/** One event of the outbox as the delivery workflow reads it; null when the read model does not have it. */
export async function outboxEvent(sql: SqlExecutor, eventId: string): Promise<OutboxEvent | null> {
  const { rows } = await sql.query<Record<string, any>>('SELECT * FROM webhook_events WHERE event_id = $1', [eventId]);
  if (rows.length === 0) return null;
  const row = eventRow(rows[0]);
  return {
    id: row.id,
    accountId: row.accountId,
    type: row.type,
    created: row.created,
    data: row.data,
    cancelled: row.state === 'cancelled',
    nextAttemptAt: row.nextAttemptAt,
    webhookId: rows[0].webhook_id ?? null,
  };
}

export interface NoticeRow {
  id: string;
  accountId: string;
  type: string;
  title: string;
  message: string;
  data: Record<string, unknown>;
  created: string;
}

const noticeRow = (r: Record<string, any>): NoticeRow => ({
  id: r.notice_id,
  accountId: r.account_id,
  type: r.type,
  title: r.title,
  message: r.message,
  data: typeof r.data === 'string' ? JSON.parse(r.data) : r.data,
  created: iso(r.created_at)!,
});

/** An account's in-app notices, newest first. */
export async function listNotices(sql: SqlExecutor, accountId: string, limit: number): Promise<NoticeRow[]> {
  const { rows } = await sql.query<Record<string, any>>('SELECT * FROM notices WHERE account_id = $1 ORDER BY created_at DESC, notice_id DESC LIMIT $2', [
    accountId,
    limit,
  ]);
  return rows.map(noticeRow);
}

/** Notices not yet mailed (or whose mailing was claimed before `staleBefore` and never finished), oldest first. */
export async function noticesToMail(sql: SqlExecutor, staleBefore: Date, limit: number): Promise<NoticeRow[]> {
  const { rows } = await sql.query<Record<string, any>>(
    `SELECT n.* FROM notices n LEFT JOIN notice_mail m ON m.notice_id = n.notice_id
      WHERE m.notice_id IS NULL OR (m.state = 'claimed' AND m.claimed_at < $1)
      ORDER BY n.created_at, n.notice_id LIMIT $2`,
    [staleBefore.toISOString(), limit],
  );
  return rows.map(noticeRow);
}
