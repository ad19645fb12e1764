import { createHmac } from 'node:crypto';
import type { RecordedEvent } from '@svc/eventstore';
import { WEBHOOK_EVENT_TYPES } from './event-types';
import { subscribes, webhookEventId, webhookEventOf, WEBHOOK_SOURCE_TYPES } from './outbox';
import { signWebhook, verifyWebhookSignature } from './signature';

const recorded = (type: string, data: object): RecordedEvent => ({ id: 'e1', type, data, metadata: {}, stream: 's', revision: 0n, position: 0n as never });

describe('the outbox mapping (spec 6.1)', () => {
  it('maps each source to a spec type, in decimal USD, never nano', () => {
    expect(webhookEventOf(recorded('CreditsAdded', { account_id: 'a1', amount_nano: '2500000000', reason: 'purchase' }))).toEqual({
      accountId: 'a1',
      type: 'credits.added',
      data: { amount: 2.5, reason: 'purchase' },
    });
    expect(webhookEventOf(recorded('BalanceLow', { account_id: 'a1', balance_nano: '900000000', threshold_nano: '1000000000' }))).toEqual({
      accountId: 'a1',
      type: 'balance.low',
      data: { balance: 0.9, threshold: 1 },
    });
    const window = {
      account_id: 'a1',
      key_id: 'k1',
      reset: 'daily',
      limit_nano: '5000000000',
      charged_nano: '4000000000',
      window_start: '2026-11-02T00:00:00.000Z',
      resets_at: '2026-11-03T00:00:00.000Z',
    };
    expect(webhookEventOf(recorded('KeySpendCapWarning', window))?.data).toEqual({
      key_id: 'k1',
      limit: 5,
      limit_reset: 'daily',
      usage: 4,
      window_start: window.window_start,
      resets_at: window.resets_at,
    });
    expect(webhookEventOf(recorded('KeySpendCapReached', { ...window, trigger: 'charge' }))?.type).toBe('key.spend_cap.reached');
    expect(webhookEventOf(recorded('KeyRevoked', { account_id: 'a1', key_id: 'k1' }))).toEqual({
      accountId: 'a1',
      type: 'key.revoked',
      data: { key_id: 'k1' },
    });
  });

  it("maps a guardrail budget's warning and reach to budget.warning and budget.reached, in USD (issue 44)", () => {
    const window = {
      account_id: 'owner1',
      guardrail_id: 'gr_1',
      scope: 'member',
      subject: 'acc_bob',
      reset: 'monthly',
      limit_nano: '12500000000',
      charged_nano: '10000000001',
      window_start: '2026-11-01T00:00:00.000Z',
      resets_at: '2026-12-01T00:00:00.000Z',
    };
    const data = {
      guardrail_id: 'gr_1',
      scope: 'member',
      subject: 'acc_bob',
      limit_usd: 12.5,
      reset_interval: 'monthly',
      spent_usd: 10.000000001,
      window_start: window.window_start,
      resets_at: window.resets_at,
    };
    expect(webhookEventOf(recorded('BudgetWarning', window))).toEqual({ accountId: 'owner1', type: 'budget.warning', data });
    // A lifetime budget has no window: its times are null.
    const lifetime = { ...window, reset: 'never', window_start: null, resets_at: null, charged_nano: '12500000000', trigger: 'refusal' };
    expect(webhookEventOf(recorded('BudgetReached', lifetime))).toEqual({
      accountId: 'owner1',
      type: 'budget.reached',
      data: { ...data, reset_interval: 'never', spent_usd: 12.5, window_start: null, resets_at: null, trigger: 'refusal' },
    });
    expect(WEBHOOK_SOURCE_TYPES).toEqual(expect.arrayContaining(['BudgetWarning', 'BudgetReached']));
  });

  it('maps only to types of the spec, and ignores what causes none', () => {
    for (const type of WEBHOOK_SOURCE_TYPES)
      expect(WEBHOOK_EVENT_TYPES).toContain(
        webhookEventOf(
          recorded(type, { account_id: 'a1', amount_nano: '0', balance_nano: '0', threshold_nano: '0', limit_nano: '0', charged_nano: '0', cost_nano: '0' }),
        )!.type,
      );
    expect(webhookEventOf(recorded('UsageCharged', { account_id: 'a1' }))).toBeNull();
  });

  it("maps a video's end to video.completed with its actual cost, or video.failed with its error (spec 6.1, 3.1)", () => {
    const completed = {
      video_id: 'video_1',
      account_id: 'a1',
      model: 'sim/video',
      cost_nano: '800000000',
      has_thumbnail: true,
      completed_at: '2026-11-02T10:03:00.000Z',
    };
    expect(webhookEventOf(recorded('VideoCompleted', completed))).toEqual({
      accountId: 'a1',
      type: 'video.completed',
      data: { id: 'video_1', status: 'completed', model: 'sim/video', cost: 0.8, completed_at: '2026-11-02T10:03:00.000Z' },
    });
    const error = { code: 'video_timeout', message: 'The video did not finish within 60 minutes.' };
    expect(
      webhookEventOf(recorded('VideoFailed', { video_id: 'video_2', account_id: 'a1', model: 'sim/video', error, failed_at: '2026-11-02T11:00:00.000Z' })),
    ).toEqual({
      accountId: 'a1',
      type: 'video.failed',
      data: { id: 'video_2', status: 'failed', model: 'sim/video', error, failed_at: '2026-11-02T11:00:00.000Z' },
    });
    expect(WEBHOOK_SOURCE_TYPES).toEqual(expect.arrayContaining(['VideoCompleted', 'VideoFailed']));
    // The caller asked for the end of a cancelled video: no webhook tells them again.
    expect(webhookEventOf(recorded('VideoCancelled', { video_id: 'video_3', cancelled_at: '2026-11-02T10:01:00.000Z' }))).toBeNull();
  });

  it('gives an event the same id for the same cause and account, and another for another', () => {
    expect(webhookEventId('e1', 'a1')).toMatch(/^evt_[0-9a-f]{24}$/);
    expect(webhookEventId('e1', 'a1')).toBe(webhookEventId('e1', 'a1'));
    expect(webhookEventId('e1', 'a2')).not.toBe(webhookEventId('e1', 'a1'));
    expect(webhookEventId('e2', 'a1')).not.toBe(webhookEventId('e1', 'a1'));
  });

  it('subscribes to every type with null, else to the listed ones', () => {
    expect(subscribes(null, 'balance.low')).toBe(true);
    expect(subscribes(['key.created'], 'balance.low')).toBe(false);
  });
});

describe('Svc-Signature (spec 6.1)', () => {
  const body = '{"id":"evt_1","type":"credits.added","created":1790000000,"data":{"amount":2}}';

  it('is t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">, as Stripe signs', () => {
    const header = signWebhook('whsec_test', 1790000000, body);
    expect(header).toMatch(/^t=1790000000,v1=[0-9a-f]{64}$/);
    expect(header).toBe(`t=1790000000,v1=${createHmac('sha256', 'whsec_test').update(`1790000000.${body}`).digest('hex')}`);
  });

  it('verifies with the secret, the body as signed and a fresh timestamp only', () => {
    const header = signWebhook('whsec_test', 1790000000, body);
    expect(verifyWebhookSignature(header, 'whsec_test', body, 1790000100)).toBe(true);
    expect(verifyWebhookSignature(header, 'whsec_other', body, 1790000100)).toBe(false);
    expect(verifyWebhookSignature(header, 'whsec_test', `${body} `, 1790000100)).toBe(false);
    expect(verifyWebhookSignature(header, 'whsec_test', body, 1790000301)).toBe(false);
    expect(verifyWebhookSignature(header, 'whsec_test', body, 1789999699)).toBe(false);
    expect(verifyWebhookSignature('t=abc,v1=00', 'whsec_test', body, 1790000000)).toBe(false);
    // Several v1 values (a receiver during a secret rotation sees one per secret): any one may match.
    const other = signWebhook('whsec_other', 1790000000, body).split(',')[1];
    expect(verifyWebhookSignature(`${header},${other}`, 'whsec_other', body, 1790000000)).toBe(true);
  });
});
