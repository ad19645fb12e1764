import type { RecordedEvent } from '@svc/eventstore';
import type { SettingsEvent } from '@svc/identity';
import type { SqlExecutor } from '@svc/platform';
import { subscribes, webhookEventId, webhookEventOf, WEBHOOK_SOURCE_TYPES, type DeliveryEvent } from '@svc/webhooks';
import { eventTime, perEvent, type Projection } from '../projection';

type Settings<T extends SettingsEvent['type']> = RecordedEvent<T, Extract<SettingsEvent, { type: T }>['data']>;
type Delivery<T extends DeliveryEvent['type']> = RecordedEvent<T, Extract<DeliveryEvent, { type: T }>['data']>;

/**
 * A domain event that maps to a webhook type becomes an outbox row when the account has an
 * endpoint subscribed to that type at that point of the log. The subscription is this
 * projection's own copy of the settings, so a rebuild decides exactly as the live run did.
 */
async function enqueue(event: RecordedEvent, tx: SqlExecutor): Promise<void> {
  const draft = webhookEventOf(event);
  if (!draft) return;
  const { rows } = await tx.query<{ events: string[] | null }>('SELECT events FROM webhook_subscriptions WHERE account_id = $1', [draft.accountId]);
  if (rows.length === 0 || !subscribes(rows[0].events, draft.type)) return;
  const at = eventTime(event);
  await tx.query(
    `INSERT INTO webhook_events (event_id, account_id, type, created_at, data, state, attempts, next_attempt_at)
     VALUES ($1, $2, $3, $4, $5, 'pending', 0, $4) ON CONFLICT (event_id) DO NOTHING`,
    [webhookEventId(event.id, draft.accountId), draft.accountId, draft.type, at, JSON.stringify(draft.data)],
  );
}

/**
 * The webhook outbox and its scheduler (ARCHITECTURE section 11, spec 6.1): each event with
 * its delivery state and the time its next attempt is due, and every attempt made.
 */
export const webhookEventsProjection: Projection = perEvent({
  name: 'webhook_events',
  tables: ['webhook_subscriptions', 'webhook_events', 'webhook_attempts'],
  schema: [
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
  ],
  handlers: {
    ...Object.fromEntries(WEBHOOK_SOURCE_TYPES.map((type) => [type, enqueue])),
    WebhookSaved: async (e: Settings<'WebhookSaved'>, tx) => {
      await tx.query(
        `INSERT INTO webhook_subscriptions (account_id, webhook_id, events) VALUES ($1, $2, $3)
         ON CONFLICT (account_id) DO UPDATE SET webhook_id = EXCLUDED.webhook_id, events = EXCLUDED.events`,
        [e.data.account_id, e.data.webhook_id, e.data.events === null ? null : JSON.stringify(e.data.events)],
      );
    },
    WebhookDeleted: async (e: Settings<'WebhookDeleted'>, tx) => {
      await tx.query('DELETE FROM webhook_subscriptions WHERE account_id = $1', [e.data.account_id]);
    },
    WebhookAttemptRecorded: async (e: Delivery<'WebhookAttemptRecorded'>, tx) => {
      const d = e.data;
      await tx.query(
        `INSERT INTO webhook_attempts (event_id, attempt, at, webhook_id, status_code, latency_ms, error, delivered)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (event_id, attempt) DO NOTHING`,
        [d.event_id, d.attempt, d.at, d.webhook_id, d.status_code, d.latency_ms, d.error, d.delivered],
      );
      await tx.query(
        `UPDATE webhook_events SET attempts = $2, state = $3, next_attempt_at = $4, last_status_code = $5, last_error = $6 WHERE event_id = $1`,
        [d.event_id, d.attempt, d.delivered ? 'delivered' : d.next_attempt_at ? 'pending' : 'failed', d.next_attempt_at, d.status_code, d.error],
      );
    },
    WebhookRedeliveryRequested: async (e: Delivery<'WebhookRedeliveryRequested'>, tx) => {
      await tx.query(`UPDATE webhook_events SET state = 'pending', next_attempt_at = $2 WHERE event_id = $1`, [e.data.event_id, e.data.requested_at]);
    },
  },
});

export interface WebhookEventRow {
  id: string;
  accountId: string;
  type: string;
  created: string;
  data: Record<string, unknown>;
  state: 'pending' | 'delivered' | 'failed';
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

export async function getWebhookEvent(sql: SqlExecutor, accountId: string, eventId: string): Promise<{ event: WebhookEventRow; attempts: WebhookAttemptRow[] } | null> {
  const { rows } = await sql.query<Record<string, any>>('SELECT * FROM webhook_events WHERE event_id = $1 AND account_id = $2', [eventId, accountId]);
  if (!rows[0]) return null;
  const attempts = await sql.query<Record<string, any>>('SELECT * FROM webhook_attempts WHERE event_id = $1 ORDER BY attempt', [eventId]);
  return {
    event: eventRow(rows[0]),
    attempts: attempts.rows.map((a) => ({ attempt: a.attempt, at: iso(a.at)!, webhookId: a.webhook_id, statusCode: a.status_code, latencyMs: a.latency_ms, error: a.error, delivered: a.delivered })),
  };
}

/** Events due for an attempt at `now`, of endpoints that are not paused, oldest due first. */
export async function dueWebhookEvents(sql: SqlExecutor, now: Date, limit: number): Promise<WebhookEventRow[]> {
  const { rows } = await sql.query<Record<string, any>>(
    `SELECT e.* FROM webhook_events e JOIN account_settings s ON s.account_id = e.account_id
      WHERE e.state = 'pending' AND e.next_attempt_at <= $1 AND s.webhook_id IS NOT NULL AND NOT s.webhook_paused
      ORDER BY e.next_attempt_at, e.event_id LIMIT $2`,
    [now.toISOString(), limit],
  );
  return rows.map(eventRow);
}
