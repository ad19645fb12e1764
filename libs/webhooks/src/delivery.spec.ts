import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import { deliveryDecider, RETRY_DELAYS_MS, type AttemptResult, type DeliveryEvent } from './delivery';

const NOW = new Date('2026-11-02T10:00:00Z');
const spec = deciderSpec(deliveryDecider, () => NOW);
const ids = { eventId: 'evt_1', accountId: 'a1', webhookId: 'wh_1' };
const at = (ms: number) => new Date(NOW.getTime() + ms).toISOString();

const ok: AttemptResult = { statusCode: 204, latencyMs: 12.6, error: null };
const serverError: AttemptResult = { statusCode: 500, latencyMs: 30, error: null };
const timeout: AttemptResult = { statusCode: null, latencyMs: 10_000, error: 'no complete answer within 10000 ms' };

function recorded(attempt: number, result: AttemptResult, delivered: boolean, next: string | null): DeliveryEvent {
  return {
    type: 'WebhookAttemptRecorded',
    data: {
      event_id: 'evt_1',
      account_id: 'a1',
      webhook_id: 'wh_1',
      attempt,
      at: NOW.toISOString(),
      status_code: result.statusCode,
      latency_ms: Math.round(result.latencyMs),
      error: result.error,
      delivered,
      next_attempt_at: next,
    },
  };
}
const attempt = (n: number, result: AttemptResult) => ({ type: 'RecordAttempt' as const, ...ids, attempt: n, result });
const redelivery: DeliveryEvent = { type: 'WebhookRedeliveryRequested', data: { event_id: 'evt_1', account_id: 'a1', requested_at: NOW.toISOString() } };

describe('webhook delivery workflow (spec 6.1)', () => {
  it('a 2xx answer delivers; no timer', () => {
    spec
      .given([])
      .when(attempt(1, ok))
      .then([recorded(1, ok, true, null)]);
  });

  it('a non-2xx answer or none fails, and sets the timer of the next attempt: 30 s, 5 min, 30 min, then none', () => {
    spec
      .given([])
      .when(attempt(1, serverError))
      .then([recorded(1, serverError, false, at(RETRY_DELAYS_MS[0]))]);
    spec
      .given([recorded(1, serverError, false, 'x')])
      .when(attempt(2, timeout))
      .then([recorded(2, timeout, false, at(5 * 60_000))]);
    const three = [recorded(1, serverError, false, 'x'), recorded(2, serverError, false, 'x')];
    spec
      .given(three)
      .when(attempt(3, serverError))
      .then([recorded(3, serverError, false, at(30 * 60_000))]);
    spec
      .given([...three, recorded(3, serverError, false, 'x')])
      .when(attempt(4, serverError))
      .then([recorded(4, serverError, false, null)]);
  });

  it('a redirect is not a delivery (redirects are not followed)', () => {
    const moved: AttemptResult = { statusCode: 301, latencyMs: 3, error: null };
    spec
      .given([])
      .when(attempt(1, moved))
      .then([recorded(1, moved, false, at(RETRY_DELAYS_MS[0]))]);
  });

  it('records each attempt once: a second report of the same attempt is refused', () => {
    spec
      .given([recorded(1, serverError, false, 'x')])
      .when(attempt(1, ok))
      .thenThrows('attempt_already_recorded');
    spec.given([]).when(attempt(2, ok)).thenThrows('attempt_already_recorded');
  });

  it('a redelivery is one more attempt, not a new schedule', () => {
    const exhausted = [1, 2, 3, 4].map((n) => recorded(n, serverError, false, n < 4 ? 'x' : null));
    spec.given(exhausted).when({ type: 'RequestRedelivery', eventId: 'evt_1', accountId: 'a1' }).then([redelivery]);
    spec
      .given([...exhausted, redelivery])
      .when(attempt(5, serverError))
      .then([recorded(5, serverError, false, null)]);
    spec
      .given([...exhausted, redelivery])
      .when(attempt(5, ok))
      .then([recorded(5, ok, true, null)]);
  });
});
