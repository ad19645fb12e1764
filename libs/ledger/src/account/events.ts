import type { DomainEvent } from '@svc/eventstore';
import type { CostLine, MeterUsage } from '../pricing';
import type { LimitReset } from '../spend-window';
import type { Nano } from '@svc/platform';

/**
 * The account aggregate (stream `account-<id>`): all money. Amounts in events are nano-USD
 * as decimal strings, because JSON has no integers beyond 2^53.
 *
 * A request reserves its worst case first (HoldPlaced), then the hold is resolved exactly once:
 * posted (UsageCharged), voided (HoldReleased) or expired (HoldExpired). Every limit is checked
 * against charges plus open holds, so concurrent requests can never spend past it together.
 */
export const accountStream = (accountId: string) => `account-${accountId}`;
/** The account whose stream `stream` is; null for any other stream. */
export const accountOfStream = (stream: string): string | null => (stream.startsWith('account-') ? stream.slice('account-'.length) : null);

/**
 * The meters of a charge that names tokens only, which are exactly the meters `input`,
 * `cached_input` and `output`: what the account bills for a ChargeUsage without meters (the
 * hold reaper's, from what a stream recorded), and what a charge recorded before meters existed
 * billed.
 */
export function tokenUsage(stats: Pick<GenerationStats, 'prompt_tokens' | 'cached_tokens' | 'completion_tokens'>): MeterUsage {
  const usage: MeterUsage = {};
  if (stats.prompt_tokens) usage.input = stats.prompt_tokens;
  if (stats.cached_tokens) usage.cached_input = stats.cached_tokens;
  if (stats.completion_tokens) usage.output = stats.completion_tokens;
  return usage;
}

/**
 * The meters of a charge as it was recorded: its own, or its tokens' when it was recorded before
 * meters existed. The log is never rewritten: the store reads old charges through
 * upcastAccountEvent, so the account and every other reader find `usage` on every charge.
 */
export function meteredUsage(data: Pick<GenerationStats, 'prompt_tokens' | 'cached_tokens' | 'completion_tokens'> & { usage?: MeterUsage }): MeterUsage {
  return data.usage ?? tokenUsage(data);
}

/** `total` less `part`, meter by meter (signed); meters that come out 0 are left out. */
export function meterDifference(total: MeterUsage, part: MeterUsage): MeterUsage {
  const out: MeterUsage = {};
  for (const meter of new Set([...Object.keys(total), ...Object.keys(part)]) as Set<keyof MeterUsage>) {
    const quantity = (total[meter] ?? 0) - (part[meter] ?? 0);
    if (quantity !== 0) out[meter] = quantity;
  }
  return out;
}

export interface GenerationStats {
  model: string;
  provider: string;
  endpoint: string;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  reasoning_tokens: number;
  latency_ms: number;
  /** null for non-streamed responses. */
  ttft_ms: number | null;
}

export type UsageCorrectedData = {
  account_id: string;
  hold_id: string;
  key_id: string;
  /** What the correction charges: total_nano less what the reaper charged. */
  amount_nano: string;
  total_nano: string;
  charged_at: string;
  /** The whole generation's meters; added by upcastAccountEvent where the log has none, as on UsageCharged. */
  usage: MeterUsage;
  /** What the correction adds by meter: `usage` less the reaper's charge's (signed). */
  usage_added: MeterUsage;
  lines?: CostLine[];
  provider_cost_nano?: string;
} & GenerationStats;

/** A key's spend limit, from the key record (spec 2.2): `limitNano` per `reset` window. */
export interface KeyLimit {
  limitNano: Nano;
  reset: LimitReset;
}

export interface KeyLimitData {
  limit_nano: string;
  reset: LimitReset;
}

/** A key's spend in one window, as threshold events report it. */
export interface KeyWindowData {
  account_id: string;
  key_id: string;
  reset: LimitReset;
  limit_nano: string;
  /** Charges in the window (open holds are not spend yet). */
  charged_nano: string;
  /** null for a lifetime budget. */
  window_start: string | null;
  resets_at: string | null;
}

/** Where a guardrail is assigned (issue 44): the whole organization, one member's keys, or one key. */
export type BudgetScope = 'organization' | 'member' | 'key';

/** A budget's spend is kept per guardrail and subject (an organization, member or key id). */
export const budgetBucket = (guardrailId: string, scope: BudgetScope, subject: string) => `${guardrailId}/${scope}:${subject}`;

/** A guardrail budget a hold was admitted under (issue 44). */
export interface BudgetData {
  /** budgetBucket of the three below. */
  bucket: string;
  guardrail_id: string;
  scope: BudgetScope;
  subject: string;
  limit_nano: string;
  reset: LimitReset;
}

/** A budget's spend in one window, as its threshold events report it. */
export interface BudgetWindowData {
  account_id: string;
  guardrail_id: string;
  scope: BudgetScope;
  subject: string;
  reset: LimitReset;
  limit_nano: string;
  /** Charges in the window (open holds are not spend yet). */
  charged_nano: string;
  /** null for a lifetime budget. */
  window_start: string | null;
  resets_at: string | null;
}

export type AdjustmentKind = 'credit_note' | 'adjustment';

export interface BalanceAdjustedData {
  account_id: string;
  adjustment_id: string;
  /** Signed decimal nano-USD, never "0". */
  amount_nano: string;
  kind: AdjustmentKind;
  reason: string;
  operator: string;
}

/** One content filter of a guardrail that matched a request's prompt: how many times, and what it did; never the text. */
export interface GuardrailFinding {
  guardrail_id: string;
  /** The filter: a builtin's slug or a custom filter's label. */
  filter: string;
  action: 'flag' | 'redact' | 'block';
  count: number;
}

/** What recorded a "reached" event: a charge that brought spend to the limit, or a refused hold. */
export type ReachedTrigger = 'charge' | 'refusal';

export type AccountEvent =
  | DomainEvent<'AccountOpened', { account_id: string }>
  | DomainEvent<'CreditsAdded', { account_id: string; amount_nano: string; reason: string }>
  | DomainEvent<
      'HoldPlaced',
      {
        account_id: string;
        hold_id: string;
        key_id: string;
        amount_nano: string;
        model: string;
        endpoint: string;
        expires_at: string;
        /** The key limit the hold was admitted under; absent on holds placed before spend caps existed. */
        key_limit?: KeyLimitData | null;
        /**
         * Issue 41 B: the request's Idempotency-Key hashed with its API key, its body's
         * fingerprint (hashes, never the request), and until when the key is kept. Absent
         * when the request had none.
         */
        idempotency?: { key: string; fingerprint: string; until: string };
        /** Issue 44: the guardrail budgets the hold was checked against; its charge counts against each. Absent when none applied. */
        budgets?: BudgetData[];
        /** Issue 44: what the guardrails' content filters found in the prompt (counts, never text). Absent when nothing was found. */
        guardrail_findings?: GuardrailFinding[];
      }
    >
  | DomainEvent<
      'UsageCharged',
      {
        account_id: string;
        hold_id: string;
        key_id: string;
        amount_nano: string;
        /** When the charge was decided: it counts in the spend windows of this instant. Absent on old events. */
        charged_at?: string;
        /** The part of the charge above the hold (the provider reported more input than estimated). Absent on old events. */
        exceeded_hold_nano?: string;
        /**
         * What was billed, by meter (ARCHITECTURE section 10). The account always records it; a
         * charge in the log without it (recorded before meters, or from a command that named
         * tokens only) is read through upcastAccountEvent, which adds it, by every store.
         */
        usage: MeterUsage;
        /** Issue 23: the charge explained, line by line; the amounts add up to amount_nano. Absent on old events. */
        lines?: CostLine[];
        /** Issue 23: what the provider charges the operator for this call (0 for BYOK). Absent: unknown, or an old event. */
        provider_cost_nano?: string;
        /** Issue 41 D: charged by the hold reaper from what its process recorded, not by that process. */
        reaped?: true;
      } & GenerationStats
    >
  | DomainEvent<
      'HoldReleased',
      { account_id: string; hold_id: string; key_id: string; reason: 'error' | 'zero_completion' } & Partial<GenerationStats> & {
          error_code?: string;
          /** Issue 41 D: released by the hold reaper, nothing of it having been recorded. */
          reaped?: true;
        }
    >
  /**
   * Issue 41 D: the charge of a process that was alive after all, for a hold the hold reaper had
   * settled from what was recorded (it paused, or lost its database, past its lease). The
   * difference is charged: `amount_nano` is what this event adds, `total_nano` the
   * generation's whole charge; the stats, meters and lines are the whole generation's.
   */
  | DomainEvent<'UsageCorrected', UsageCorrectedData>
  | DomainEvent<'HoldExpired', { account_id: string; hold_id: string; key_id: string; amount_nano: string; expires_at: string }>
  | DomainEvent<'DailyLimitSet', { account_id: string; limit_nano: string | null }>
  | DomainEvent<'KeySpendCapWarning', KeyWindowData>
  | DomainEvent<'KeySpendCapReached', KeyWindowData & { trigger: ReachedTrigger }>
  | DomainEvent<'DailyLimitReached', { account_id: string; limit_nano: string; charged_nano: string; day: string; resets_at: string; trigger: ReachedTrigger }>
  | DomainEvent<'BalanceLow', { account_id: string; balance_nano: string; threshold_nano: string }>
  /** Issue 44 (webhooks `budget.warning`, `budget.reached`): a charge took a budget's window to 80%, or to its limit. */
  | DomainEvent<'BudgetWarning', BudgetWindowData>
  | DomainEvent<'BudgetReached', BudgetWindowData & { trigger: ReachedTrigger }>
  /**
   * Issue 23, corrections: an operator's credit note (money given back, positive) or adjustment
   * (either sign), with the operator's name, since the admin token is shared. Recorded beside the
   * charges it corrects: nothing is edited in place.
   */
  | DomainEvent<'BalanceAdjusted', BalanceAdjustedData>
  /**
   * A request answered at no cost: a free model's (spec 4.13) or the response cache's (spec 4.2,
   * naming the generation it replayed in `source_id`). No money moves, but its id is a
   * generation of its own, cost 0, that can be looked up.
   */
  | DomainEvent<
      'FreeGenerationRecorded',
      {
        account_id: string;
        generation_id: string;
        key_id: string;
        endpoint: string;
        model?: string;
        provider?: string;
        source_id?: string;
        latency_ms?: number;
      }
    >;

/** What the RecordFreeGeneration command says (./commands), declared here so that events need no commands. */
export interface FreeGenerationFacts {
  generationId: string;
  keyId: string;
  endpoint: string;
  model?: string;
  provider?: string;
  sourceId?: string;
  latencyMs?: number;
}

/** The event's data: only the optional facts the command has (events stay small, and replays compare equal). */
export function freeGenerationData(account_id: string, command: FreeGenerationFacts) {
  const { generationId: generation_id, keyId: key_id, endpoint, model, provider, sourceId: source_id, latencyMs: latency_ms } = command;
  return {
    account_id,
    generation_id,
    key_id,
    endpoint,
    ...(model === undefined ? {} : { model }),
    ...(provider === undefined ? {} : { provider }),
    ...(source_id === undefined ? {} : { source_id }),
    ...(latency_ms === undefined ? {} : { latency_ms }),
  };
}
