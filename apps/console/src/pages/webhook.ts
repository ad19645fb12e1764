/**
 * The webhook page's data (docs/api/settings-webhooks.md, spec 6.1): the endpoint form's
 * values to the body of PUT /v1/settings/webhook, and how an event's delivery reads. Pure, so
 * the rules are pinned by tests.
 */
import { ApiFailure } from '../api';
import type { WebhookAttempt, WebhookEndpoint, WebhookEvent } from '../records';

/** Spec 6.1's event types, in its order, each with what causes it (the table of docs/api/settings-webhooks.md). */
export const EVENT_TYPES: { type: string; cause: string }[] = [
  { type: 'balance.low', cause: 'the balance falls below the threshold' },
  { type: 'credits.added', cause: 'credits are added' },
  { type: 'key.created', cause: 'a key is created' },
  { type: 'key.rotated', cause: 'a key is rotated' },
  { type: 'key.revoked', cause: 'a key is revoked' },
  { type: 'key.spend_cap.warning', cause: "a key's spend passes its warning threshold" },
  { type: 'key.spend_cap.reached', cause: "a key's spend reaches its limit" },
  { type: 'key.expiring', cause: 'a key expires in 7 days, then 1 day' },
  { type: 'account.daily_limit.reached', cause: "the account's daily spend limit is reached" },
  { type: 'budget.warning', cause: "a guardrail budget's spend passes its warning threshold" },
  { type: 'budget.reached', cause: 'a guardrail budget is spent' },
  { type: 'batch.completed', cause: 'a batch completes' },
  { type: 'batch.failed', cause: 'a batch fails, expires or is cancelled' },
  { type: 'video.completed', cause: 'a video completes' },
  { type: 'video.failed', cause: 'a video fails' },
  { type: 'model.deprecated', cause: 'a model you used is scheduled for retirement' },
];

export interface WebhookForm {
  url: string;
  allEvents: boolean;
  /** The types ticked; kept while "all events" is on, so unticking it gives them back. */
  events: string[];
}

export function webhookFormOf(endpoint: WebhookEndpoint | null): WebhookForm {
  if (!endpoint) return { url: '', allEvents: true, events: [] };
  return { url: endpoint.url, allEvents: endpoint.events === null, events: endpoint.events ?? [] };
}

/** The form with one type ticked or unticked. */
export function toggleEvent(form: WebhookForm, type: string, on: boolean): WebhookForm {
  const events = on ? [...new Set([...form.events, type])] : form.events.filter((t) => t !== type);
  return { ...form, events };
}

/**
 * The body of PUT /v1/settings/webhook: `events` null for every type, otherwise the ticked ones
 * in the spec's order. A form the API would refuse is refused here in the same words and with
 * the same `param`, so the message lands next to its field either way.
 */
export function webhookBody(form: WebhookForm): { url: string; events: string[] | null } {
  const url = form.url.trim();
  if (url === '') throw new ApiFailure(400, null, 'url', 'Enter the URL the events are sent to.');
  if (form.allEvents) return { url, events: null };
  const events = EVENT_TYPES.map((e) => e.type).filter((t) => form.events.includes(t));
  if (events.length === 0) throw new ApiFailure(400, null, 'events', 'Choose at least one event type, or all events.');
  return { url, events };
}

/** The events an endpoint receives, in words. */
export function subscribedTo(endpoint: Pick<WebhookEndpoint, 'events'>): string {
  if (endpoint.events === null) return 'all events';
  return endpoint.events.join(', ');
}

/** A delivery state as a badge: its words and tone. */
export function deliveryBadge(delivery: WebhookEvent['delivery']): { label: string; tone: 'ok' | 'warn' | 'bad' } {
  switch (delivery.state) {
    case 'delivered':
      return { label: 'Delivered', tone: 'ok' };
    case 'failed':
      return { label: 'Failed', tone: 'bad' };
    // Its endpoint was deleted before it was delivered: it will not be sent anywhere else.
    case 'cancelled':
      return { label: 'Cancelled', tone: 'warn' };
    default:
      // Pending with an attempt behind it is a retry waiting, which is worth telling from "not sent yet".
      return { label: delivery.attempts > 0 ? 'Retrying' : 'Pending', tone: 'warn' };
  }
}

/** An attempt's outcome in words: the status the receiver answered, or why there was none. */
export function attemptOutcome(attempt: Pick<WebhookAttempt, 'status_code' | 'error' | 'delivered'>): string {
  const status = attempt.status_code === null ? 'no answer' : `HTTP ${attempt.status_code}`;
  if (attempt.delivered) return status;
  return attempt.error ? `${status}: ${attempt.error}` : status;
}

/**
 * The last status an event's receiver answered, short enough for a list: an error without a
 * status (refused, timed out) is "no answer", its words being in the attempts.
 */
export function lastStatus(delivery: WebhookEvent['delivery']): string {
  if (delivery.last_status_code !== null) return String(delivery.last_status_code);
  if (delivery.last_error) return 'no answer';
  return '—';
}

/** The pause notice of docs/api/settings-webhooks.md "Delivery": 20 failures in a row pause the endpoint. */
export function pausedNotice(endpoint: Pick<WebhookEndpoint, 'paused' | 'consecutive_failures'>): string | null {
  if (!endpoint.paused) return null;
  const n = endpoint.consecutive_failures;
  return `Paused after ${n} consecutive failure${n === 1 ? '' : 's'}. Events are still recorded and listed below; resuming sends those still pending.`;
}
