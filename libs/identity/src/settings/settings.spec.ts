import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import { fold } from '@svc/eventstore';
import { generateEncryptionKey, sealSecret } from '@svc/platform';
import { settingsDecider } from './decide';
import { WEBHOOK_PAUSE_AFTER_FAILURES, type SettingsEvent } from './events';

const spec = deciderSpec(settingsDecider);
const key = Buffer.from(generateEncryptionKey(), 'base64');
const secret = sealSecret(key, 'whsec_0123456789', 'webhook-secret:a1:wh_1');
const account = { accountId: 'a1' };

const saveWebhook = { type: 'SaveWebhook' as const, ...account, webhookId: 'wh_1', url: 'https://example.com/hook', events: null, encryptedSecret: secret };
const saved: SettingsEvent = {
  type: 'WebhookSaved',
  data: { account_id: 'a1', webhook_id: 'wh_1', url: 'https://example.com/hook', events: null, encrypted_secret: secret },
};
const failed = (n: number): SettingsEvent => ({
  type: 'WebhookDeliveryFailed',
  data: { account_id: 'a1', webhook_id: 'wh_1', event_id: `evt_${n}`, consecutive_failures: n },
});
const delivery = (eventId: string, delivered: boolean) => ({ type: 'RecordWebhookDelivery' as const, ...account, webhookId: 'wh_1', eventId, delivered });
const failures = (count: number) => Array.from({ length: count }, (_, i) => failed(i + 1));
const paused: SettingsEvent = { type: 'WebhookPaused', data: { account_id: 'a1', webhook_id: 'wh_1', consecutive_failures: WEBHOOK_PAUSE_AFTER_FAILURES } };

describe('settings decider: prompt logging and step-up (spec 1, 8)', () => {
  it('records every write, the same values again too (the audit log shows each)', () => {
    const set = { type: 'SetPromptLogging' as const, ...account, enabled: true, retentionDays: 7 };
    const event: SettingsEvent = { type: 'PromptLoggingSet', data: { account_id: 'a1', enabled: true, retention_days: 7 } };
    spec.given([]).when(set).then([event]);
    spec.given([event]).when(set).then([event]);
  });

  it('keeps prompt logs 1 to 30 days, nothing else', () => {
    for (const retentionDays of [0, 31, 1.5, Number.NaN]) {
      spec
        .given([])
        .when({ type: 'SetPromptLogging', ...account, enabled: true, retentionDays })
        .thenThrows('invalid_retention_days');
    }
    spec
      .given([])
      .when({ type: 'SetPromptLogging', ...account, enabled: false, retentionDays: 1 })
      .then([{ type: 'PromptLoggingSet', data: { account_id: 'a1', enabled: false, retention_days: 1 } }]);
  });

  it('turns step-up on only with an address for the codes', () => {
    spec
      .given([])
      .when({ type: 'SetStepUp', ...account, enabled: true, email: null })
      .thenThrows('step_up_email_required');
    spec
      .given([])
      .when({ type: 'SetStepUp', ...account, enabled: true, email: 'ops@example.com' })
      .then([{ type: 'StepUpSet', data: { account_id: 'a1', enabled: true, email: 'ops@example.com' } }]);
  });

  it('starts with logging and step-up off', () => {
    const state = fold(settingsDecider, []);
    expect(state.promptLogging.enabled).toBe(false);
    expect(state.stepUp.enabled).toBe(false);
  });
});

describe('settings decider: the webhook endpoint (spec 6.1, 3.3)', () => {
  it('gives a new endpoint its id and sealed secret; a later save keeps both and records no secret', () => {
    spec.given([]).when(saveWebhook).then([saved]);
    const moved = { ...saveWebhook, webhookId: 'wh_other', url: 'https://example.com/v2', events: ['credits.added'], encryptedSecret: 'ignored' };
    spec
      .given([saved])
      .when(moved)
      .then([{ type: 'WebhookSaved', data: { account_id: 'a1', webhook_id: 'wh_1', url: 'https://example.com/v2', events: ['credits.added'] } }]);
  });

  it('refuses a secret that is not sealed', () => {
    spec
      .given([])
      .when({ ...saveWebhook, encryptedSecret: 'whsec_plain' })
      .thenThrows('webhook_secret_not_encrypted');
    spec
      .given([saved])
      .when({ type: 'RotateWebhookSecret', ...account, encryptedSecret: 'whsec_plain' })
      .thenThrows('webhook_secret_not_encrypted');
  });

  it('rotates, deletes and resumes only an endpoint that exists', () => {
    spec
      .given([saved])
      .when({ type: 'RotateWebhookSecret', ...account, encryptedSecret: secret })
      .then([{ type: 'WebhookSecretRotated', data: { account_id: 'a1', webhook_id: 'wh_1', encrypted_secret: secret } }]);
    spec
      .given([saved])
      .when({ type: 'DeleteWebhook', ...account })
      .then([{ type: 'WebhookDeleted', data: { account_id: 'a1', webhook_id: 'wh_1' } }]);
    for (const command of [
      { type: 'RotateWebhookSecret' as const, ...account, encryptedSecret: secret },
      { type: 'DeleteWebhook' as const, ...account },
      { type: 'ResumeWebhook' as const, ...account },
    ]) {
      spec.given([]).when(command).thenThrows('webhook_not_found');
      spec
        .given([saved, { type: 'WebhookDeleted', data: { account_id: 'a1', webhook_id: 'wh_1' } }])
        .when(command)
        .thenThrows('webhook_not_found');
    }
  });

  it('counts consecutive failures and pauses at the 20th, once', () => {
    spec
      .given([saved, ...failures(18)])
      .when(delivery('evt_19', false))
      .then([failed(19)]);
    spec
      .given([saved, ...failures(19)])
      .when(delivery('evt_20', false))
      .then([failed(20), paused]);
    // Already paused: failures of redeliveries are still counted, but it is not paused twice.
    spec
      .given([saved, ...failures(20), paused])
      .when(delivery('evt_21', false))
      .then([failed(21)]);
    expect(fold(settingsDecider, [saved, ...failures(20), paused]).webhook).toMatchObject({ paused: true, consecutiveFailures: 20 });
  });

  it('a success after failures starts the count again; a success on a healthy endpoint records nothing', () => {
    const recovered: SettingsEvent = { type: 'WebhookDeliveryRecovered', data: { account_id: 'a1', webhook_id: 'wh_1', event_id: 'evt_x' } };
    spec
      .given([saved, ...failures(19)])
      .when(delivery('evt_x', true))
      .then([recovered]);
    spec
      .given([saved, ...failures(19), recovered])
      .when(delivery('evt_1', false))
      .then([failed(1)]);
    spec.given([saved]).when(delivery('evt_x', true)).then([]);
  });

  it('resume un-pauses and clears the count; resuming an endpoint that is not paused records nothing', () => {
    const resumed: SettingsEvent = { type: 'WebhookResumed', data: { account_id: 'a1', webhook_id: 'wh_1' } };
    spec
      .given([saved, ...failures(20), paused])
      .when({ type: 'ResumeWebhook', ...account })
      .then([resumed]);
    expect(fold(settingsDecider, [saved, ...failures(20), paused, resumed]).webhook).toMatchObject({ paused: false, consecutiveFailures: 0 });
    spec
      .given([saved])
      .when({ type: 'ResumeWebhook', ...account })
      .then([]);
  });

  it('ignores reports about an endpoint since deleted or replaced', () => {
    spec.given([]).when(delivery('evt_1', false)).then([]);
    spec
      .given([saved])
      .when({ ...delivery('evt_1', false), webhookId: 'wh_old' })
      .then([]);
  });
});
