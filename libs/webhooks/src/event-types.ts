/** Spec 6.1: the webhook event types, in the spec's order. */
export const WEBHOOK_EVENT_TYPES = [
  'balance.low',
  'credits.added',
  'key.created',
  'key.rotated',
  'key.revoked',
  'key.spend_cap.warning',
  'key.spend_cap.reached',
  'key.expiring',
  'account.daily_limit.reached',
  'budget.warning',
  'budget.reached',
  'batch.completed',
  'batch.failed',
  'video.completed',
  'video.failed',
  'model.deprecated',
] as const;

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export function isWebhookEventType(value: unknown): value is WebhookEventType {
  return typeof value === 'string' && (WEBHOOK_EVENT_TYPES as readonly string[]).includes(value);
}
