/**
 * What the workers do for one webhook event (spec 6.1), as a workflow on the job table
 * (ARCHITECTURE section 11): a pure decider over the event's delivery stream, its outbox row and
 * the account's endpoint. The job is `(webhook-delivery, <event id>)`; the outbox projection
 * asks for it when the event is made, when an attempt sets a timer, when a redelivery is asked
 * for and when a paused endpoint resumes, so the decider lets the job go (completes it)
 * whenever nothing can be sent now, and the next of those asks again.
 */
import { call, complete, schedule, send, type Due, type Workflow, type WorkflowOutput } from '@svc/jobs';
import { deliveryDecider, isDelivered, type AttemptResult, type DeliveryCommand, type DeliveryEvent, type DeliveryState } from './delivery';

export const WEBHOOK_DELIVERY_JOB = 'webhook-delivery';

/** An event of the outbox (the notifications read model). */
export interface OutboxEvent {
  id: string;
  accountId: string;
  type: string;
  /** ISO time. */
  created: string;
  data: Record<string, unknown>;
  /** Dropped with the endpoint it was made for (deleted, or saved anew). */
  cancelled: boolean;
  /** The read model's timer: null once it knows of nothing due (delivered, failed, cancelled). */
  nextAttemptAt: string | null;
  /** The endpoint it was made for; null on rows older than that rule (theirs is the account's current one). */
  webhookId: string | null;
}

export interface WebhookEndpoint {
  id: string;
  url: string;
  paused: boolean;
  /** The signing secret, opened; null when it no longer opens (sealed under an earlier SVC_ENCRYPTION_KEY). */
  secret: string | null;
}

export interface DeliveryWorkflowState {
  /** The truth of what was sent: the stream `webhook-event-<id>`. */
  delivery: DeliveryState;
  /** Null when the read model does not have it (a rebuild under way: its replay asks for the job again). */
  event: OutboxEvent | null;
  endpoint: WebhookEndpoint | null;
}

/** The answer (or none) one POST got. */
export type DeliveryInput = { type: 'Posted'; attempt: number; webhookId: string; result: AttemptResult };

/** A signed POST of the event to the endpoint, as attempt `attempt`. */
export type DeliveryEffect = { type: 'Post'; attempt: number; endpoint: WebhookEndpoint; event: OutboxEvent };

export type DeliveryWorkflowCommand =
  | { type: 'Record'; command: Extract<DeliveryCommand, { type: 'RecordAttempt' }> }
  /** To the settings stream, which pauses the endpoint after 20 consecutive failures. */
  | { type: 'Report'; accountId: string; webhookId: string; eventId: string; delivered: boolean };

type Output = WorkflowOutput<DeliveryWorkflowCommand, DeliveryEffect>;

/** When the next attempt is due by the stream: the event's own time until anything is recorded. */
function dueAt(state: DeliveryWorkflowState): string | null {
  const { delivery, event } = state;
  if (delivery.attempts === 0 && !delivery.redelivery) return event?.created ?? null;
  return delivery.nextAttemptAt;
}

function onDue(state: DeliveryWorkflowState, now: Date): Output[] {
  const { event, endpoint } = state;
  // The read model says nothing is due (or it is cancelled): whatever makes it due again asks for the job then.
  if (event === null || event.cancelled || event.nextAttemptAt === null) return [complete()];
  const due = dueAt(state);
  if (due === null) return [complete()];
  if (new Date(due) > now) return [schedule(new Date(due))];
  // Paused: the resume asks again. Gone or replaced: the read model cancels the event.
  if (endpoint === null || endpoint.paused || (event.webhookId !== null && event.webhookId !== endpoint.id)) return [complete()];
  return [call({ type: 'Post', attempt: state.delivery.attempts + 1, endpoint, event })];
}

function onPosted(input: DeliveryInput, state: DeliveryWorkflowState): Output[] {
  const event = state.event as OutboxEvent;
  const delivered = isDelivered(input.result);
  return [
    send({
      type: 'Record',
      command: {
        type: 'RecordAttempt',
        eventId: event.id,
        accountId: event.accountId,
        webhookId: input.webhookId,
        attempt: input.attempt,
        result: input.result,
      },
    }),
    send({ type: 'Report', accountId: event.accountId, webhookId: input.webhookId, eventId: event.id, delivered }),
  ];
}

export const deliveryWorkflow: Workflow<DeliveryInput, DeliveryWorkflowState, DeliveryWorkflowCommand, DeliveryEffect, DeliveryEvent> = {
  kind: WEBHOOK_DELIVERY_JOB,
  decide(input: DeliveryInput | Due, state, now) {
    return input.type === 'Posted' ? onPosted(input, state) : onDue(state, now);
  },
  evolve(state, event) {
    return { ...state, delivery: deliveryDecider.evolve(state.delivery, event) };
  },
};
