import type { DomainEvent } from '@svc/eventstore';

/**
 * The settings aggregate (stream `settings-<account>`, ARCHITECTURE section 4): per-account
 * settings that are neither money nor key lifecycle: provider keys of BYOK, prompt logging,
 * email step-up and the webhook endpoint (spec 1, 6.1).
 *
 * It lives in identity, not in the ledger: the ledger is the money boundary (`account-<id>`),
 * and nothing here decides about money; the request paths only read it.
 */
export const settingsStream = (accountId: string) => `settings-${accountId}`;

/** Spec 1 and 8: prompt logs are kept 1 to 30 days. */
export const PROMPT_LOG_RETENTION_DAYS = { min: 1, max: 30 } as const;

/** Spec 3.3: a webhook is paused after this many consecutive failed deliveries. */
export const WEBHOOK_PAUSE_AFTER_FAILURES = 20;

/**
 * `encrypted_key` and `encrypted_secret` are sealed with SVC_ENCRYPTION_KEY
 * (libs/platform/src/crypto), never the plain value. An encrypted secret in an append-only log
 * is acceptable because the log holds nothing usable without the encryption key, which lives
 * outside the log, and because the remedy for a leaked key is revoking it at the provider (or
 * rotating the webhook secret), which no storage choice replaces. Purging means
 * crypto-shredding: rotating SVC_ENCRYPTION_KEY leaves every older ciphertext unreadable.
 * A webhook secret cannot be a hash like an API key's: the dispatcher needs it to sign.
 */
export type SettingsEvent =
  | DomainEvent<'ProviderKeySaved', { account_id: string; provider: string; encrypted_key: string; hint: string }>
  | DomainEvent<'ProviderKeyDeleted', { account_id: string; provider: string }>
  | DomainEvent<'PromptLoggingSet', { account_id: string; enabled: boolean; retention_days: number }>
  | DomainEvent<'StepUpSet', { account_id: string; enabled: boolean; email: string | null }>
  /** `events` null: every type. `encrypted_secret` only when the endpoint is new (the secret is shown once, then). */
  | DomainEvent<'WebhookSaved', { account_id: string; webhook_id: string; url: string; events: string[] | null; encrypted_secret?: string }>
  | DomainEvent<'WebhookSecretRotated', { account_id: string; webhook_id: string; encrypted_secret: string }>
  | DomainEvent<'WebhookDeleted', { account_id: string; webhook_id: string }>
  | DomainEvent<'WebhookDeliveryFailed', { account_id: string; webhook_id: string; event_id: string; consecutive_failures: number }>
  | DomainEvent<'WebhookDeliveryRecovered', { account_id: string; webhook_id: string; event_id: string }>
  | DomainEvent<'WebhookPaused', { account_id: string; webhook_id: string; consecutive_failures: number }>
  | DomainEvent<'WebhookResumed', { account_id: string; webhook_id: string }>;

export type SettingsEventType = SettingsEvent['type'];
