import { WEBHOOK_EVENT_TYPES } from '../../../../libs/webhooks/src/event-types';
import { atSecond } from '../format';
import type { WebhookEndpoint } from '../records';
import { refusal } from '../testing/errors';
import { attemptOutcome, deliveryBadge, EVENT_TYPES, lastStatus, pausedNotice, subscribedTo, toggleEvent, webhookBody, webhookFormOf } from './webhook';

const endpoint = (overrides: Partial<WebhookEndpoint> = {}): WebhookEndpoint => ({
  id: 'wh_1',
  url: 'https://hooks.example.com/svc',
  events: null,
  paused: false,
  consecutive_failures: 0,
  updated_at: '2026-03-01T00:00:00Z',
  ...overrides,
});

describe('webhook form', () => {
  it('starts empty with every event for a new endpoint, and from the endpoint otherwise', () => {
    expect(webhookFormOf(null)).toEqual({ url: '', allEvents: true, events: [] });
    expect(webhookFormOf(endpoint())).toEqual({ url: 'https://hooks.example.com/svc', allEvents: true, events: [] });
    expect(webhookFormOf(endpoint({ events: ['key.created'] }))).toEqual({ url: 'https://hooks.example.com/svc', allEvents: false, events: ['key.created'] });
  });

  it('sends null for all events, whatever is ticked underneath', () => {
    expect(webhookBody({ url: ' https://a.example/h ', allEvents: true, events: ['key.created'] })).toEqual({ url: 'https://a.example/h', events: null });
  });

  it("sends the ticked types in the spec's order, once each", () => {
    let form = webhookFormOf(null);
    form = { ...form, url: 'https://a.example/h', allEvents: false };
    form = toggleEvent(form, 'model.deprecated', true);
    form = toggleEvent(form, 'credits.added', true);
    form = toggleEvent(form, 'credits.added', true);
    expect(webhookBody(form)).toEqual({ url: 'https://a.example/h', events: ['credits.added', 'model.deprecated'] });
    expect(webhookBody(toggleEvent(form, 'model.deprecated', false)).events).toEqual(['credits.added']);
  });

  it('refuses an empty URL or no event type, naming the field as the API does', () => {
    expect(refusal(() => webhookBody({ url: '  ', allEvents: true, events: [] })).param).toBe('url');
    expect(refusal(() => webhookBody({ url: 'https://a.example/h', allEvents: false, events: [] })).param).toBe('events');
  });

  it("offers exactly the server's event types, in its order", () => {
    expect(EVENT_TYPES.map((e) => e.type)).toEqual([...WEBHOOK_EVENT_TYPES]);
  });

  it('says what an endpoint receives', () => {
    expect(subscribedTo({ events: null })).toBe('all events');
    expect(subscribedTo({ events: ['key.created', 'key.revoked'] })).toBe('key.created, key.revoked');
  });
});

describe('delivery in words', () => {
  const delivery = { state: 'pending' as const, attempts: 0, next_attempt_at: null, last_status_code: null, last_error: null };

  it('tells a retry waiting from an event not sent yet', () => {
    expect(deliveryBadge(delivery)).toEqual({ label: 'Pending', tone: 'warn' });
    expect(deliveryBadge({ ...delivery, attempts: 1, last_status_code: 500 })).toEqual({ label: 'Retrying', tone: 'warn' });
    expect(deliveryBadge({ ...delivery, state: 'delivered', attempts: 1 })).toEqual({ label: 'Delivered', tone: 'ok' });
    expect(deliveryBadge({ ...delivery, state: 'failed', attempts: 4 })).toEqual({ label: 'Failed', tone: 'bad' });
  });

  it('gives the status answered, or the error when there was no answer', () => {
    expect(attemptOutcome({ status_code: 200, error: null, delivered: true })).toBe('HTTP 200');
    expect(attemptOutcome({ status_code: 500, error: 'receiver answered 500', delivered: false })).toBe('HTTP 500: receiver answered 500');
    expect(attemptOutcome({ status_code: null, error: 'timed out after 10 s', delivered: false })).toBe('no answer: timed out after 10 s');
    expect(lastStatus({ ...delivery, last_status_code: 503 })).toBe('503');
    expect(lastStatus({ ...delivery, last_error: 'connection refused' })).toBe('no answer');
    expect(lastStatus(delivery)).toBe('—');
  });

  it('gives attempt times to the second, and an unreadable time as it came', () => {
    expect(atSecond('2026-03-01T10:20:30.456Z')).toBe('2026-03-01 10:20:30 UTC');
    expect(atSecond('soon')).toBe('soon');
  });

  it('says a paused endpoint paused after how many failures, and nothing otherwise', () => {
    expect(pausedNotice({ paused: true, consecutive_failures: 20 })).toMatch(/^Paused after 20 consecutive failures\./);
    expect(pausedNotice({ paused: true, consecutive_failures: 1 })).toMatch(/^Paused after 1 consecutive failure\./);
    expect(pausedNotice({ paused: false, consecutive_failures: 3 })).toBeNull();
  });
});
