/**
 * Spec 6.1 (and docs/api/settings-webhooks.md for each `data`, which the spec leaves open): the
 * events the worker POSTs to the account's endpoint, as the 3.1 document's `webhooks`. One
 * entry per event type of `@svc/webhooks`, so a new type without a payload fails the specs.
 */
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from '@svc/webhooks';
import { arr, constant, dateTime, int, type JsonSchema, nullable, obj, oneOfValues, str, unixSeconds, usd } from './json-schema';

const spendWindow = obj({
  key_id: str(),
  limit: usd(),
  limit_reset: oneOfValues(['daily', 'weekly', 'monthly', 'never']),
  usage: usd(),
  window_start: dateTime(),
  resets_at: nullable(dateTime()),
});
const budgetWindow = {
  guardrail_id: str(),
  scope: oneOfValues(['organization', 'member', 'key']),
  subject: str(),
  limit_usd: usd(),
  reset_interval: oneOfValues(['daily', 'weekly', 'monthly', 'never']),
  spent_usd: usd(),
  window_start: nullable(dateTime()),
  resets_at: nullable(dateTime()),
};
const batchEnd = (status: JsonSchema) =>
  obj({ id: str(), status, request_counts: obj({ completed: int(), failed: int() }), output_file_id: nullable(str()), error_file_id: nullable(str()) });

export const WEBHOOK_PAYLOADS: Record<WebhookEventType, { summary: string; data: JsonSchema }> = {
  'balance.low': { summary: 'The balance fell below the threshold', data: obj({ balance: usd(), threshold: usd() }) },
  'credits.added': { summary: 'Credits added', data: obj({ amount: usd(), reason: str() }) },
  'key.created': {
    summary: 'A key was created',
    data: obj({ key_id: str(), name: str(), scope: str(), environment: str(), workspace_id: str(), org_id: nullable(str()), expires_at: nullable(dateTime()) }),
  },
  'key.rotated': { summary: 'A key was rotated', data: obj({ key_id: str(), previous_valid_until: nullable(dateTime()) }) },
  'key.revoked': { summary: 'A key was revoked', data: obj({ key_id: str() }) },
  'key.spend_cap.warning': { summary: "A key's spend passed the warning threshold of its limit", data: spendWindow },
  'key.spend_cap.reached': { summary: "A key's spend reached its limit", data: spendWindow },
  'key.expiring': { summary: "7 days and 1 day before a key's expires_at", data: obj({ key_id: str(), expires_at: dateTime(), days_before: int() }) },
  'account.daily_limit.reached': {
    summary: "The account's daily spend limit was reached",
    data: obj({ daily_limit: usd(), usage: usd(), day: str(), resets_at: dateTime() }),
  },
  'budget.warning': { summary: "A guardrail budget's spend passed 80% of its limit (issue 44)", data: obj(budgetWindow) },
  'budget.reached': {
    summary: 'A guardrail budget was spent, by a charge or seen at a refusal (issue 44)',
    data: obj({ ...budgetWindow, trigger: oneOfValues(['charge', 'refusal']) }),
  },
  'batch.completed': { summary: 'A batch completed', data: batchEnd(constant('completed')) },
  'batch.failed': {
    summary: 'A batch failed validation, expired or was cancelled',
    data: { anyOf: [batchEnd(oneOfValues(['expired', 'cancelled'])), obj({ id: str(), status: constant('failed'), errors: arr(obj({}, { open: true })) })] },
  },
  'video.completed': {
    summary: 'A video completed, billed its actual cost',
    data: obj({ id: str(), status: constant('completed'), model: str(), cost: usd(), completed_at: dateTime() }),
  },
  'video.failed': {
    summary: 'A video failed (not billed)',
    data: obj({ id: str(), status: constant('failed'), model: str(), error: obj({ code: str(), message: str() }), failed_at: dateTime() }),
  },
  'model.deprecated': {
    summary: 'A model used in the last 30 days is scheduled for retirement (spec 9)',
    data: obj({ model: str(), name: str(), notice: oneOfValues(['announced', 'final']), sunset: dateTime(), replacement: nullable(str()) }),
  },
};

const SIGNATURE_HEADER = {
  'Svc-Signature': {
    required: true,
    description: 'Spec 6.1: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>" with the webhook secret>`; reject a `t` more than 300 s from your clock.',
    schema: str(undefined, { pattern: '^t=\\d+,v1=[0-9a-f]{64}$' }),
  },
};

/** Spec 2.7: `{id, type, created, data}`, one webhook per event type. */
export function webhooks(): Record<string, unknown> {
  return Object.fromEntries(
    WEBHOOK_EVENT_TYPES.map((type) => {
      const { summary, data } = WEBHOOK_PAYLOADS[type];
      return [
        type,
        {
          post: {
            summary,
            description: 'Retried after 30 s, 5 min and 30 min under the same `id` (dedupe on it); 20 consecutive failures pause the endpoint (spec 6.1).',
            tags: ['Webhooks'],
            // The gateway calls the receiver: no API key goes with it; the signature header is its proof.
            security: [],
            parameters: Object.entries(SIGNATURE_HEADER).map(([name, h]) => ({ name, in: 'header', ...h })),
            requestBody: {
              required: true,
              content: {
                'application/json': { schema: obj({ id: str('evt_...; the same on every retry'), type: constant(type), created: unixSeconds(), data }) },
              },
            },
            responses: { '2XX': { description: 'Delivered. Anything else, or no answer within 10 s, is a failure.' } },
          },
        },
      ];
    }),
  );
}
