/**
 * The delivery of one webhook event (spec 6.1) as a workflow (ARCHITECTURE section 11): a pure
 * decider on the stream `webhook-event-<id>`, whose events carry the timer of the next attempt.
 * The scheduler table is a projection of these events; the stream's expected revision makes
 * each attempt land once, whichever worker reports it.
 */
import { DomainError, type Decider, type DomainEvent } from '@svc/eventstore';

export const webhookEventStream = (eventId: string) => `webhook-event-${eventId}`;

/** Spec 6.1: retries after 30 seconds, 5 minutes and 30 minutes; then the event has failed. */
export const RETRY_DELAYS_MS: readonly number[] = [30_000, 5 * 60_000, 30 * 60_000];

/** What one POST came to: a status (any status) or no answer at all (`error`: timeout, refused, ...). */
export interface AttemptResult {
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
}

export type DeliveryEvent =
  | DomainEvent<
      'WebhookAttemptRecorded',
      {
        event_id: string;
        account_id: string;
        webhook_id: string;
        attempt: number;
        /** ISO time the attempt was made. */
        at: string;
        status_code: number | null;
        latency_ms: number;
        error: string | null;
        delivered: boolean;
        /** The timer: when the next attempt is due; null when none is (delivered, or out of retries). */
        next_attempt_at: string | null;
      }
    >
  | DomainEvent<'WebhookRedeliveryRequested', { event_id: string; account_id: string; requested_at: string }>;

export type DeliveryCommand =
  | { type: 'RecordAttempt'; eventId: string; accountId: string; webhookId: string; attempt: number; result: AttemptResult }
  | { type: 'RequestRedelivery'; eventId: string; accountId: string };

export interface DeliveryState {
  attempts: number;
  /** Failed attempts of the current series: the first delivery's, or one redelivery's. */
  seriesFailures: number;
  /** A redelivery is one attempt, as a resend from Stripe's dashboard is: it is not retried. */
  redelivery: boolean;
  /** The timer once an attempt or a redelivery is recorded (ISO time; null: none due); before that, the event's own time. */
  nextAttemptAt: string | null;
}

/** Spec 6.1: a delivery fails on a non-2xx answer or none. */
export const isDelivered = (result: AttemptResult) =>
  result.error === null && result.statusCode !== null && result.statusCode >= 200 && result.statusCode < 300;

function recordAttempt(command: Extract<DeliveryCommand, { type: 'RecordAttempt' }>, state: DeliveryState, now: Date): DeliveryEvent[] {
  // Two workers that sent the same attempt (a lease that ran out) record it once.
  if (command.attempt !== state.attempts + 1) {
    throw new DomainError('attempt_already_recorded', `Attempt ${command.attempt} of ${command.eventId} is not the next one (${state.attempts} recorded).`);
  }
  const delivered = isDelivered(command.result);
  const delay = delivered || state.redelivery ? undefined : RETRY_DELAYS_MS[state.seriesFailures];
  return [
    {
      type: 'WebhookAttemptRecorded',
      data: {
        event_id: command.eventId,
        account_id: command.accountId,
        webhook_id: command.webhookId,
        attempt: command.attempt,
        at: now.toISOString(),
        status_code: command.result.statusCode,
        // Whole milliseconds: a timer's fraction is noise, and the read model counts in integers.
        latency_ms: Math.round(command.result.latencyMs),
        error: command.result.error,
        delivered,
        next_attempt_at: delay === undefined ? null : new Date(now.getTime() + delay).toISOString(),
      },
    },
  ];
}

export const deliveryDecider: Decider<DeliveryCommand, DeliveryState, DeliveryEvent> = {
  initialState: () => ({ attempts: 0, seriesFailures: 0, redelivery: false, nextAttemptAt: null }),
  decide(command, state, now) {
    switch (command.type) {
      case 'RecordAttempt':
        return recordAttempt(command, state, now);
      case 'RequestRedelivery':
        return [{ type: 'WebhookRedeliveryRequested', data: { event_id: command.eventId, account_id: command.accountId, requested_at: now.toISOString() } }];
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'WebhookAttemptRecorded':
        return {
          ...state,
          attempts: event.data.attempt,
          seriesFailures: event.data.delivered ? 0 : state.seriesFailures + 1,
          nextAttemptAt: event.data.next_attempt_at,
        };
      case 'WebhookRedeliveryRequested':
        return { ...state, seriesFailures: 0, redelivery: true, nextAttemptAt: event.data.requested_at };
    }
  },
};
