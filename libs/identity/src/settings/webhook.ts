import { DomainError } from '@svc/eventstore';
import { isSealedSecret } from '@svc/platform';
import type { SettingsCommand } from './commands';
import { WEBHOOK_PAUSE_AFTER_FAILURES, type SettingsEvent } from './events';
import type { SettingsState, WebhookState } from './state';

/** What a webhook signing secret is sealed under: it opens only for this account's endpoint. */
export const webhookSecretContext = (accountId: string, webhookId: string) => `webhook-secret:${accountId}:${webhookId}`;

type Command<T extends SettingsCommand['type']> = Extract<SettingsCommand, { type: T }>;

function requireSealed(secret: string): void {
  if (!isSealedSecret(secret)) throw new DomainError('webhook_secret_not_encrypted', 'A webhook secret is recorded only encrypted.');
}

function existing(state: SettingsState): WebhookState {
  if (!state.webhook) throw new DomainError('webhook_not_found', 'No webhook endpoint is configured; PUT /v1/settings/webhook first.');
  return state.webhook;
}

/** A new endpoint gets its id and its secret; a saved one keeps both (the secret changes only by rotation). */
export function saveWebhook(command: Command<'SaveWebhook'>, state: SettingsState): SettingsEvent[] {
  const { accountId: account_id, url, events } = command;
  if (state.webhook) return [{ type: 'WebhookSaved', data: { account_id, webhook_id: state.webhook.id, url, events } }];
  requireSealed(command.encryptedSecret);
  return [{ type: 'WebhookSaved', data: { account_id, webhook_id: command.webhookId, url, events, encrypted_secret: command.encryptedSecret } }];
}

export function rotateWebhookSecret(command: Command<'RotateWebhookSecret'>, state: SettingsState): SettingsEvent[] {
  const webhook = existing(state);
  requireSealed(command.encryptedSecret);
  return [{ type: 'WebhookSecretRotated', data: { account_id: command.accountId, webhook_id: webhook.id, encrypted_secret: command.encryptedSecret } }];
}

export function deleteWebhook(command: Command<'DeleteWebhook'>, state: SettingsState): SettingsEvent[] {
  return [{ type: 'WebhookDeleted', data: { account_id: command.accountId, webhook_id: existing(state).id } }];
}

/** Resuming an endpoint that is not paused changes nothing, and records nothing. */
export function resumeWebhook(command: Command<'ResumeWebhook'>, state: SettingsState): SettingsEvent[] {
  const webhook = existing(state);
  return webhook.paused ? [{ type: 'WebhookResumed', data: { account_id: command.accountId, webhook_id: webhook.id } }] : [];
}

/**
 * Spec 3.3: 20 consecutive failed deliveries pause the endpoint. Only failures and the first
 * success after them are recorded, so a healthy endpoint adds nothing to the stream. A report
 * about an endpoint since deleted or replaced is ignored: its failures say nothing of this one.
 */
export function recordWebhookDelivery(command: Command<'RecordWebhookDelivery'>, state: SettingsState): SettingsEvent[] {
  const webhook = state.webhook;
  if (!webhook || webhook.id !== command.webhookId) return [];
  const ids = { account_id: command.accountId, webhook_id: webhook.id };
  if (command.delivered) {
    return webhook.consecutiveFailures > 0 ? [{ type: 'WebhookDeliveryRecovered', data: { ...ids, event_id: command.eventId } }] : [];
  }
  const consecutive_failures = webhook.consecutiveFailures + 1;
  const failed: SettingsEvent = { type: 'WebhookDeliveryFailed', data: { ...ids, event_id: command.eventId, consecutive_failures } };
  if (webhook.paused || consecutive_failures < WEBHOOK_PAUSE_AFTER_FAILURES) return [failed];
  return [failed, { type: 'WebhookPaused', data: { ...ids, consecutive_failures } }];
}
