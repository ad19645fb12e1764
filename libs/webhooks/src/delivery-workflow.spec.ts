import { fold } from '@svc/eventstore';
import { call, complete, schedule, send } from '@svc/jobs';
import { workflowSpec } from '@svc/jobs/testing/workflow-spec';
import { deliveryDecider, RETRY_DELAYS_MS, type AttemptResult, type DeliveryEvent } from './delivery';
import { deliveryWorkflow, type DeliveryWorkflowState, type OutboxEvent, type WebhookEndpoint } from './delivery-workflow';

const NOW = new Date('2026-11-02T10:00:00Z');
const spec = workflowSpec(deliveryWorkflow, () => NOW);
const iso = (ms: number) => new Date(NOW.getTime() + ms).toISOString();

const event: OutboxEvent = {
  id: 'evt_1',
  accountId: 'a1',
  type: 'credits.added',
  created: iso(-1_000),
  data: { amount: '5' },
  cancelled: false,
  nextAttemptAt: iso(-1_000),
  webhookId: 'wh_1',
};
const endpoint: WebhookEndpoint = { id: 'wh_1', url: 'https://example.com/hook', paused: false, secret: 'whsec_x' };
const failed: AttemptResult = { statusCode: 500, latencyMs: 30, error: null };
const ok: AttemptResult = { statusCode: 204, latencyMs: 12, error: null };

function recorded(attempt: number, delivered: boolean, next: string | null): DeliveryEvent {
  return {
    type: 'WebhookAttemptRecorded',
    data: {
      event_id: 'evt_1',
      account_id: 'a1',
      webhook_id: 'wh_1',
      attempt,
      at: iso(-60_000),
      status_code: delivered ? 204 : 500,
      latency_ms: 30,
      error: null,
      delivered,
      next_attempt_at: next,
    },
  };
}

const state = (events: DeliveryEvent[], over: Partial<DeliveryWorkflowState> = {}): DeliveryWorkflowState => ({
  delivery: fold(deliveryDecider, events),
  event,
  endpoint,
  ...over,
});

describe('the webhook delivery workflow (spec 6.1)', () => {
  it('a new event is posted as attempt 1 to its endpoint', () => {
    spec
      .given(state([]))
      .when()
      .then([call({ type: 'Post', attempt: 1, endpoint, event })]);
  });

  it('an answer is recorded on the stream and reported to the settings, whatever it was', () => {
    spec
      .given(state([]))
      .when({ type: 'Posted', attempt: 1, webhookId: 'wh_1', result: failed })
      .then([
        send({ type: 'Record', command: { type: 'RecordAttempt', eventId: 'evt_1', accountId: 'a1', webhookId: 'wh_1', attempt: 1, result: failed } }),
        send({ type: 'Report', accountId: 'a1', webhookId: 'wh_1', eventId: 'evt_1', delivered: false }),
      ]);
    spec
      .given(state([]))
      .when({ type: 'Posted', attempt: 1, webhookId: 'wh_1', result: ok })
      .then([
        send({ type: 'Record', command: { type: 'RecordAttempt', eventId: 'evt_1', accountId: 'a1', webhookId: 'wh_1', attempt: 1, result: ok } }),
        send({ type: 'Report', accountId: 'a1', webhookId: 'wh_1', eventId: 'evt_1', delivered: true }),
      ]);
  });

  it('after a failure, the job waits for the retry the stream set (30 s), then posts attempt 2', () => {
    const retry = iso(RETRY_DELAYS_MS[0]);
    spec
      .given(state([recorded(1, false, retry)]))
      .when()
      .then([schedule(new Date(retry))]);
    spec
      .given(state([recorded(1, false, iso(-1))]))
      .when()
      .then([call({ type: 'Post', attempt: 2, endpoint, event })]);
  });

  it('delivered, or out of retries: done', () => {
    spec
      .given(state([recorded(1, true, null)]))
      .when()
      .then([complete()]);
    spec
      .given(state([recorded(1, false, iso(0)), recorded(2, false, iso(0)), recorded(3, false, iso(0)), recorded(4, false, null)]))
      .when()
      .then([complete()]);
  });

  it('a redelivery of a delivered event is posted as the next attempt', () => {
    const asked: DeliveryEvent = { type: 'WebhookRedeliveryRequested', data: { event_id: 'evt_1', account_id: 'a1', requested_at: iso(-10) } };
    spec
      .given(state([recorded(1, true, null), asked]))
      .when()
      .then([call({ type: 'Post', attempt: 2, endpoint, event })]);
  });

  it('nothing is sent to a paused, deleted or replaced endpoint, nor for a cancelled event: the job ends, and a resume asks again', () => {
    for (const over of [
      { endpoint: { ...endpoint, paused: true } },
      { endpoint: null },
      { endpoint: { ...endpoint, id: 'wh_2' } },
      { event: { ...event, cancelled: true } },
      { event: { ...event, nextAttemptAt: null } },
      { event: null },
    ]) {
      spec.given(state([], over)).when().then([complete()]);
    }
  });

  it("the stream's timer wins over a read model that has not yet seen the last attempt", () => {
    const retry = iso(5 * 60_000);
    spec
      .given(state([recorded(1, false, iso(-1)), recorded(2, false, retry)], { event: { ...event, nextAttemptAt: iso(-1) } }))
      .when()
      .then([schedule(new Date(retry))]);
  });
});
