/**
 * Which domain events become which webhook events (spec 6.1), and the `data` each carries.
 * The outbox is a projection of the log (ARCHITECTURE section 11): rebuilt from position 0 it
 * gives the same events under the same ids, so a receiver deduplicating on `id` never sees a
 * rebuild as new events.
 *
 * Amounts are decimal USD, as everywhere at the edge; times are ISO 8601 UTC. Batch and video
 * types are emitted by the jobs that produce them; `model.deprecated` fans out to the accounts
 * that used the model (see the projection).
 */
import { createHash } from 'node:crypto';
import type { RecordedEvent } from '@svc/eventstore';
import type { BatchEvent } from '@svc/batches';
import type { KeyEvent } from '@svc/identity';
import type { AccountEvent } from '@svc/ledger';
import type { VideoEvent } from '@svc/videos';
import { nanoToUsd } from '@svc/platform';
import type { WebhookEventType } from './event-types';

export interface WebhookEventDraft {
  accountId: string;
  type: WebhookEventType;
  data: Record<string, unknown>;
}

type Source = KeyEvent | AccountEvent | BatchEvent | VideoEvent;
type Data<T extends Source['type']> = Extract<Source, { type: T }>['data'];

const usd = (nano: string) => nanoToUsd(BigInt(nano));

/** The key spend window of `key.spend_cap.*`, in the API's names (spec 2.2 `limit`, `limit_reset`). */
function spendWindow(d: Data<'KeySpendCapWarning'>) {
  return { key_id: d.key_id, limit: usd(d.limit_nano), limit_reset: d.reset, usage: usd(d.charged_nano), window_start: d.window_start, resets_at: d.resets_at };
}

/**
 * A guardrail budget's window of `budget.*` (issue 44), in the guardrail API's names: which
 * guardrail, for which subject it is assigned to (the organization's workspace, a member, a key).
 */
function budgetWindow(d: Data<'BudgetWarning'>) {
  return {
    guardrail_id: d.guardrail_id,
    scope: d.scope,
    subject: d.subject,
    limit_usd: usd(d.limit_nano),
    reset_interval: d.reset,
    spent_usd: usd(d.charged_nano),
    window_start: d.window_start,
    resets_at: d.resets_at,
  };
}

function batchEnd(d: Data<'BatchCompleted' | 'BatchExpired' | 'BatchCancelled'>, status: string) {
  return {
    id: d.batch_id,
    status,
    request_counts: { completed: d.completed, failed: d.failed },
    output_file_id: d.output_file_id,
    error_file_id: d.error_file_id,
  };
}

const MAPPINGS: { [T in Source['type']]?: (d: Data<T>) => WebhookEventDraft } = {
  BalanceLow: (d) => ({ accountId: d.account_id, type: 'balance.low', data: { balance: usd(d.balance_nano), threshold: usd(d.threshold_nano) } }),
  CreditsAdded: (d) => ({ accountId: d.account_id, type: 'credits.added', data: { amount: usd(d.amount_nano), reason: d.reason } }),
  KeyCreated: (d) => ({
    accountId: d.account_id,
    type: 'key.created',
    data: {
      key_id: d.key_id,
      name: d.name,
      scope: d.scope,
      environment: d.environment,
      workspace_id: d.workspace_id,
      org_id: d.org_id,
      expires_at: d.expires_at,
    },
  }),
  KeyRotated: (d) => ({ accountId: d.account_id, type: 'key.rotated', data: { key_id: d.key_id, previous_valid_until: d.previous_valid_until } }),
  KeyRevoked: (d) => ({ accountId: d.account_id, type: 'key.revoked', data: { key_id: d.key_id } }),
  KeyExpiring: (d) => ({ accountId: d.account_id, type: 'key.expiring', data: { key_id: d.key_id, expires_at: d.expires_at, days_before: d.days_before } }),
  KeySpendCapWarning: (d) => ({ accountId: d.account_id, type: 'key.spend_cap.warning', data: spendWindow(d) }),
  KeySpendCapReached: (d) => ({ accountId: d.account_id, type: 'key.spend_cap.reached', data: spendWindow(d) }),
  BudgetWarning: (d) => ({ accountId: d.account_id, type: 'budget.warning', data: budgetWindow(d) }),
  BudgetReached: (d) => ({ accountId: d.account_id, type: 'budget.reached', data: { ...budgetWindow(d), trigger: d.trigger } }),
  // Spec 6.1, 3.2: a batch's end is batch.completed or batch.failed; `status` tells an expired or
  // cancelled batch (which kept the lines that finished) from one whose input was refused.
  BatchCompleted: (d) => ({ accountId: d.account_id, type: 'batch.completed', data: batchEnd(d, 'completed') }),
  BatchExpired: (d) => ({ accountId: d.account_id, type: 'batch.failed', data: batchEnd(d, 'expired') }),
  BatchCancelled: (d) => ({ accountId: d.account_id, type: 'batch.failed', data: batchEnd(d, 'cancelled') }),
  BatchValidationFailed: (d) => ({ accountId: d.account_id, type: 'batch.failed', data: { id: d.batch_id, status: 'failed', errors: d.errors } }),
  // Spec 6.1, 3.1: a video's end is video.completed (billed its actual cost) or video.failed (not
  // billed). A cancelled video sends neither: its caller asked for the end and knows it already.
  VideoCompleted: (d) => ({
    accountId: d.account_id,
    type: 'video.completed',
    data: { id: d.video_id, status: 'completed', model: d.model, cost: usd(d.cost_nano), completed_at: d.completed_at },
  }),
  VideoFailed: (d) => ({
    accountId: d.account_id,
    type: 'video.failed',
    data: { id: d.video_id, status: 'failed', model: d.model, error: d.error, failed_at: d.failed_at },
  }),
  DailyLimitReached: (d) => ({
    accountId: d.account_id,
    type: 'account.daily_limit.reached',
    data: { daily_limit: usd(d.limit_nano), usage: usd(d.charged_nano), day: d.day, resets_at: d.resets_at },
  }),
};

/** The domain event types that map to one account's webhook event. */
export const WEBHOOK_SOURCE_TYPES: readonly string[] = Object.keys(MAPPINGS);

/** The webhook event a domain event causes, if any. */
export function webhookEventOf(event: RecordedEvent): WebhookEventDraft | null {
  const map = (MAPPINGS as Record<string, ((d: unknown) => WebhookEventDraft) | undefined>)[event.type];
  return map ? map(event.data) : null;
}

/**
 * A webhook event's id: derived from the domain event that caused it and the account it goes
 * to, so that a rebuilt outbox and every retry carry the same id (spec 6.1: receivers dedupe on it).
 */
export function webhookEventId(sourceEventId: string, accountId: string): string {
  return `evt_${createHash('sha256').update(`${sourceEventId}:${accountId}`).digest('hex').slice(0, 24)}`;
}

/** Whether an endpoint subscribed to `events` (null: every type) wants `type`. */
export function subscribes(events: readonly string[] | null, type: string): boolean {
  return events === null || events.includes(type);
}
