/**
 * The webhook dispatcher (spec 6.1, ARCHITECTURE section 11): the delivery workflow
 * (./delivery-workflow) on the job table, run by every worker. What it decides is carried out
 * here: a signed POST, the attempt recorded on the event's stream, the outcome reported to the
 * settings stream.
 *
 * Several workers share the work without sending one attempt twice: an attempt is sent only by
 * the holder of the event's job. A worker killed after its claim leaves the attempt to another
 * once the lease ends; one killed after sending but before recording causes a second send of
 * that attempt, under the same event id, which receivers deduplicate (spec 6.1): delivery is at
 * least once, as every webhook sender's is.
 */
import { performance } from 'node:perf_hooks';
import { WorkflowProcessor, type JobQueue, type ProcessorOptions } from '@svc/jobs';
import { createSchema, type Clock, type SqlRunner } from '@svc/platform';
import type { DeliveryCommand, DeliveryEvent, DeliveryState, AttemptResult } from './delivery';
import {
  deliveryWorkflow,
  WEBHOOK_DELIVERY_JOB,
  type DeliveryEffect,
  type DeliveryInput,
  type DeliveryWorkflowCommand,
  type DeliveryWorkflowState,
  type OutboxEvent,
  type WebhookEndpoint,
} from './delivery-workflow';
import { SIGNATURE_HEADER, signWebhook } from './signature';

/** Longer than a delivery can take (the outbound timeout), so a live worker's lease never lapses mid-send. */
export const DELIVERY_LEASE_MS = 60_000;

export interface DispatcherDeps {
  clock: Clock;
  queue: Pick<JobQueue, 'claim' | 'reschedule' | 'complete'>;
  /** The event's delivery stream (`webhook-event-<id>`). */
  delivery(eventId: string): Promise<DeliveryState>;
  /** The event in the outbox read model, or null. */
  event(eventId: string): Promise<OutboxEvent | null>;
  endpoint(accountId: string): Promise<WebhookEndpoint | null>;
  /** The outbound client: guarded, no redirects, a timeout and a response cap. */
  post(url: string, init: { headers: Record<string, string>; body: string }): Promise<{ status: number; latencyMs: number }>;
  /** Records on the event's workflow stream; resolves with what was recorded. */
  record(command: DeliveryCommand): Promise<DeliveryEvent[]>;
  /** Reports the outcome to the settings stream, which pauses the endpoint after 20 consecutive failures. */
  report(accountId: string, webhookId: string, eventId: string, delivered: boolean): Promise<void>;
  /** This worker's name in the leases. */
  owner: string;
  warn(message: string): void;
}

export type WebhookDispatcher = WorkflowProcessor<DeliveryInput, DeliveryWorkflowState, DeliveryWorkflowCommand, DeliveryEffect, DeliveryEvent>;

/** The JSON body of a delivery (spec 2.7): `created` in unix seconds, as Stripe and OpenAI send it. */
export function webhookBody(event: Pick<OutboxEvent, 'id' | 'type' | 'created' | 'data'>): string {
  return JSON.stringify({ id: event.id, type: event.type, created: Math.floor(new Date(event.created).getTime() / 1000), data: event.data });
}

/**
 * Issue "one job runner": deliveries were claimed in a table of their own (`webhook_claims`,
 * one row per attempt sent); now they are jobs. That table held claims only, never work: what
 * was due is the outbox read model's, so each event it still has due becomes a job here, once,
 * and the old table goes. A claim in flight at the upgrade at worst sends its attempt again,
 * under the same event id, and the stream records it once.
 */
export async function upgradeWebhookClaims(sql: SqlRunner): Promise<void> {
  const { rows } = await sql.query<{ claims: string | null; events: string | null }>(
    `SELECT to_regclass('webhook_claims')::text AS claims, to_regclass('webhook_events')::text AS events`,
  );
  if (rows[0].claims === null) return;
  await createSchema(
    sql,
    `
    ${
      rows[0].events === null
        ? ''
        : `INSERT INTO jobs (kind, key, due_at)
             SELECT '${WEBHOOK_DELIVERY_JOB}', event_id, next_attempt_at FROM webhook_events WHERE next_attempt_at IS NOT NULL AND state <> 'cancelled'
           ON CONFLICT (kind, key) DO NOTHING;`
    }
    DROP TABLE IF EXISTS webhook_claims;
  `,
  );
}

export function webhookDispatcher(deps: DispatcherDeps, options: Pick<ProcessorOptions, 'concurrency'> = { concurrency: 50 }): WebhookDispatcher {
  return new WorkflowProcessor(
    deliveryWorkflow,
    {
      load: async (job) => {
        const [delivery, event] = await Promise.all([deps.delivery(job.key), deps.event(job.key)]);
        return { delivery, event, endpoint: event === null ? null : await deps.endpoint(event.accountId) };
      },
      send: async (_job, command) => {
        if (command.type === 'Record') return deps.record(command.command);
        await deps.report(command.accountId, command.webhookId, command.eventId, command.delivered);
        return [];
      },
      call: async (_job, effect) => ({ type: 'Posted', attempt: effect.attempt, webhookId: effect.endpoint.id, result: await post(deps, effect) }),
    },
    { clock: deps.clock, queue: deps.queue, owner: deps.owner, leaseMs: DELIVERY_LEASE_MS, concurrency: options.concurrency, warn: deps.warn },
  );
}

async function post(deps: DispatcherDeps, { endpoint, event }: DeliveryEffect): Promise<AttemptResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  if (endpoint.secret === null) return { statusCode: null, latencyMs: 0, error: 'the signing secret cannot be opened; rotate it' };
  const body = webhookBody(event);
  // Signed at sending time: a retry half an hour later must still pass the receiver's freshness check.
  const t = Math.floor(deps.clock.now().getTime() / 1000);
  try {
    const response = await deps.post(endpoint.url, {
      headers: { 'content-type': 'application/json', 'user-agent': 'svc-gateway-webhooks/1', [SIGNATURE_HEADER]: signWebhook(endpoint.secret, t, body) },
      body,
    });
    return { statusCode: response.status, latencyMs: Math.round(response.latencyMs), error: null };
  } catch (err) {
    return { statusCode: null, latencyMs: elapsed(), error: err instanceof Error ? err.message : String(err) };
  }
}
