/**
 * The webhook dispatcher (spec 6.1, ARCHITECTURE section 11): run by every worker, it claims
 * due events, POSTs each signed, and records the attempt on the event's workflow stream.
 *
 * Several workers share the work without sending one attempt twice: an attempt is sent only by
 * the worker whose claim on (event, attempt number) is in the claims table, taken atomically
 * with `INSERT ... ON CONFLICT DO UPDATE ... WHERE lease ran out`. A worker killed after its
 * claim leaves the attempt to another once the lease ends; one killed after sending but before
 * recording causes a second send of that attempt, under the same event id, which receivers
 * deduplicate (spec 6.1): delivery is at least once, as every webhook sender's is.
 */
import { performance } from 'node:perf_hooks';
import { DomainError } from '@svc/eventstore';
import { createSchema, type Clock, type SqlRunner } from '@svc/platform';
import { type AttemptResult, type DeliveryCommand, isDelivered } from './delivery';
import { SIGNATURE_HEADER, signWebhook } from './signature';

export const WEBHOOK_CLAIMS_TABLE = 'webhook_claims';

/** Longer than a delivery can take (the outbound timeout), so a live worker's claim never lapses mid-send. */
export const CLAIM_LEASE_MS = 60_000;

export interface DueWebhookEvent {
  id: string;
  accountId: string;
  type: string;
  /** ISO time. */
  created: string;
  data: Record<string, unknown>;
  attempts: number;
}

export interface WebhookEndpoint {
  id: string;
  url: string;
  paused: boolean;
  /** The signing secret, opened; null when it no longer opens (sealed under an earlier SVC_ENCRYPTION_KEY). */
  secret: string | null;
}

export interface DispatcherDeps {
  clock: Clock;
  sql: SqlRunner;
  /** Events due at `now` of endpoints that are not paused. */
  due(now: Date, limit: number): Promise<DueWebhookEvent[]>;
  endpoint(accountId: string): Promise<WebhookEndpoint | null>;
  /** The outbound client: guarded, no redirects, a timeout and a response cap. */
  post(url: string, init: { headers: Record<string, string>; body: string }): Promise<{ status: number; latencyMs: number }>;
  /** Records on the event's workflow stream (`webhook-event-<id>`). */
  record(command: DeliveryCommand): Promise<void>;
  /** Reports the outcome to the settings stream, which pauses the endpoint after 20 consecutive failures. */
  report(accountId: string, webhookId: string, eventId: string, delivered: boolean): Promise<void>;
  /** This worker's name in the claims table. */
  owner: string;
}

/** The JSON body of a delivery (spec 2.7): `created` in unix seconds, as Stripe and OpenAI send it. */
export function webhookBody(event: Pick<DueWebhookEvent, 'id' | 'type' | 'created' | 'data'>): string {
  return JSON.stringify({ id: event.id, type: event.type, created: Math.floor(new Date(event.created).getTime() / 1000), data: event.data });
}

export class WebhookDispatcher {
  constructor(
    private readonly deps: DispatcherDeps,
    private readonly batchSize = 50,
  ) {}

  static async init(sql: SqlRunner): Promise<void> {
    await createSchema(
      sql,
      `
      CREATE TABLE IF NOT EXISTS ${WEBHOOK_CLAIMS_TABLE} (
        event_id text NOT NULL,
        attempt integer NOT NULL,
        owner text NOT NULL,
        lease_until timestamptz NOT NULL,
        PRIMARY KEY (event_id, attempt)
      );
      CREATE INDEX IF NOT EXISTS ${WEBHOOK_CLAIMS_TABLE}_lease ON ${WEBHOOK_CLAIMS_TABLE} (lease_until);
    `,
    );
  }

  /** One pass: every event due now gets its next attempt; resolves with how many attempts were recorded. */
  async runOnce(): Promise<number> {
    const now = this.deps.clock.now();
    const due = await this.deps.due(now, this.batchSize);
    let recorded = 0;
    for (const event of due) {
      if (await this.deliver(event, now)) recorded++;
    }
    // Claims matter only while the schedule could still offer the same attempt: a day is far beyond that.
    await this.deps.sql.query(`DELETE FROM ${WEBHOOK_CLAIMS_TABLE} WHERE lease_until < $1`, [new Date(now.getTime() - 24 * 3600_000).toISOString()]);
    return recorded;
  }

  private async deliver(event: DueWebhookEvent, now: Date): Promise<boolean> {
    const attempt = event.attempts + 1;
    if (!(await this.claim(event.id, attempt, now))) return false;
    const endpoint = await this.deps.endpoint(event.accountId);
    if (!endpoint || endpoint.paused) return false;
    const result = await this.send(endpoint, event);
    try {
      await this.deps.record({ type: 'RecordAttempt', eventId: event.id, accountId: event.accountId, webhookId: endpoint.id, attempt, result });
    } catch (err) {
      if (err instanceof DomainError && err.code === 'attempt_already_recorded') return false;
      throw err;
    }
    await this.deps.report(event.accountId, endpoint.id, event.id, isDelivered(result));
    return true;
  }

  private async claim(eventId: string, attempt: number, now: Date): Promise<boolean> {
    const { rows } = await this.deps.sql.query<{ owner: string }>(
      `INSERT INTO ${WEBHOOK_CLAIMS_TABLE} (event_id, attempt, owner, lease_until) VALUES ($1, $2, $3, $4)
       ON CONFLICT (event_id, attempt) DO UPDATE SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until
       WHERE ${WEBHOOK_CLAIMS_TABLE}.lease_until < $5
       RETURNING owner`,
      [eventId, attempt, this.deps.owner, new Date(now.getTime() + CLAIM_LEASE_MS).toISOString(), now.toISOString()],
    );
    return rows.length === 1;
  }

  private async send(endpoint: WebhookEndpoint, event: DueWebhookEvent): Promise<AttemptResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    if (endpoint.secret === null) return { statusCode: null, latencyMs: 0, error: 'the signing secret cannot be opened; rotate it' };
    const body = webhookBody(event);
    // Signed at sending time: a retry half an hour later must still pass the receiver's freshness check.
    const t = Math.floor(this.deps.clock.now().getTime() / 1000);
    try {
      const response = await this.deps.post(endpoint.url, {
        headers: { 'content-type': 'application/json', 'user-agent': 'svc-gateway-webhooks/1', [SIGNATURE_HEADER]: signWebhook(endpoint.secret, t, body) },
        body,
      });
      return { statusCode: response.status, latencyMs: Math.round(response.latencyMs), error: null };
    } catch (err) {
      return { statusCode: null, latencyMs: elapsed(), error: err instanceof Error ? err.message : String(err) };
    }
  }
}
