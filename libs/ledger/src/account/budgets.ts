import { DomainError } from '@svc/eventstore';
import type { Nano } from '@svc/platform';
import type { LimitReset } from '../spend-window';
import type { Budget, PlaceHold } from './commands';
import { budgetBucket, type AccountEvent, type BudgetData, type BudgetWindowData } from './events';
import { crosses, WARNING_PERCENT, windowBounds } from './thresholds';
import { capWindowId, chargedIn, NO_KEY_SPEND, type AccountState, type KeySpend } from './state';

/**
 * Guardrail budgets (issue 44): a guardrail's spend limit assigned to the organization, to a
 * member (across the member's keys) or to a key. Every key of an organization bills its owner's
 * account, so all of them live in one account stream: the hold that reserves a request's worst
 * case is checked against every budget that covers it in the same decision as the key limit and
 * the balance, and concurrent requests cannot together pass any of them.
 */
export const BUDGET_LIMIT_CODE = 'budget_limit_reached';

/** Narrowest first: a refusal names the budget closest to the caller. */
const SCOPE_ORDER: Readonly<Record<Budget['scope'], number>> = { key: 0, member: 1, organization: 2 };

/**
 * Spend is kept per guardrail and subject (budgetBucket): a guardrail assigned to three keys
 * gives each its own budget, and a guardrail assigned anew starts from nothing (the charges it
 * covers are those made while it was assigned).
 */
export function budgetData(budget: Budget): BudgetData {
  return {
    bucket: budgetBucket(budget.guardrailId, budget.scope, budget.subject),
    guardrail_id: budget.guardrailId,
    scope: budget.scope,
    subject: budget.subject,
    limit_nano: budget.limitNano.toString(),
    reset: budget.reset,
  };
}

export function budgetSpendOf(state: AccountState, bucket: string): KeySpend {
  return state.budgets[bucket] ?? NO_KEY_SPEND;
}

/** Open holds that count against `bucket`. */
export function budgetHeldNano(state: AccountState, bucket: string): Nano {
  let sum = 0n;
  for (const hold of state.holds.values()) if (hold.budgets?.some((b) => b.bucket === bucket)) sum += hold.amountNano;
  return sum;
}

function budgetWindow(state: AccountState, account_id: string, budget: BudgetData, limitNano: Nano, reset: LimitReset, atMs: number): BudgetWindowData {
  return {
    account_id,
    guardrail_id: budget.guardrail_id,
    scope: budget.scope,
    subject: budget.subject,
    reset,
    limit_nano: limitNano.toString(),
    charged_nano: chargedIn(budgetSpendOf(state, budget.bucket), reset, atMs).toString(),
    ...windowBounds(reset, atMs),
  };
}

/** The first budget (narrowest scope first) the hold's worst case would pass, or null. */
export function budgetRefusal(state: AccountState, hold: PlaceHold, now: Date): DomainError | null {
  const budgets = [...(hold.budgets ?? [])].sort((a, b) => SCOPE_ORDER[a.scope] - SCOPE_ORDER[b.scope]);
  for (const budget of budgets) {
    const bucket = budgetBucket(budget.guardrailId, budget.scope, budget.subject);
    const spent = chargedIn(budgetSpendOf(state, bucket), budget.reset, now.getTime()) + budgetHeldNano(state, bucket);
    if (spent + hold.amountNano <= budget.limitNano) continue;
    const resets = windowBounds(budget.reset, now.getTime()).resets_at;
    const whose = budget.scope === 'organization' ? "the organization's" : budget.scope === 'member' ? "this member's" : "this key's";
    return new DomainError(
      BUDGET_LIMIT_CODE,
      `${whose[0]!.toUpperCase()}${whose.slice(1)} ${budget.reset === 'never' ? 'lifetime' : budget.reset} budget, set by the guardrail "${budget.name}" (${budget.guardrailId}), is reached${resets === null ? '' : `; it resets at ${resets}`}.`,
      {
        guardrail_id: budget.guardrailId,
        guardrail_name: budget.name,
        scope: budget.scope,
        subject: budget.subject,
        limit_nano: budget.limitNano,
        spent_nano: spent,
        required_nano: hold.amountNano,
        resets_at: resets,
      },
    );
  }
  return null;
}

/**
 * `budget.warning` at 80% and `budget.reached` at 100% of a budget's window, from charges (not
 * holds, as for key limits), once per crossing: each budget the charged hold counted against.
 */
export function budgetThresholdsCrossedBy(state: AccountState, account_id: string, buckets: readonly BudgetData[], amount: Nano, now: Date): AccountEvent[] {
  const events: AccountEvent[] = [];
  for (const budget of buckets) {
    const { limit, capReachedIn } = budgetSpendOf(state, budget.bucket);
    if (!limit) continue;
    const window = budgetWindow(state, account_id, budget, limit.limitNano, limit.reset, now.getTime());
    if (capReachedIn === capWindowId(window)) continue;
    const before = BigInt(window.charged_nano);
    const after = { ...window, charged_nano: (before + amount).toString() };
    if (crosses(before * 100n, (before + amount) * 100n, limit.limitNano * WARNING_PERCENT)) events.push({ type: 'BudgetWarning', data: after });
    if (crosses(before, before + amount, limit.limitNano)) events.push({ type: 'BudgetReached', data: { ...after, trigger: 'charge' } });
  }
  return events;
}

/**
 * As for a key limit: a refusal records `budget.reached` only when the window's charges are
 * already at the limit (the limit was lowered to or below them), since no charge announced it.
 */
export function budgetReachedByRefusal(state: AccountState, account_id: string, hold: PlaceHold, refusal: DomainError, now: Date): AccountEvent[] {
  const { guardrail_id, scope, subject } = refusal.details;
  const budget = hold.budgets?.find((b) => b.guardrailId === guardrail_id && b.scope === scope && b.subject === subject);
  if (!budget) return [];
  const data = budgetData(budget);
  const window = budgetWindow(state, account_id, data, budget.limitNano, budget.reset, now.getTime());
  if (BigInt(window.charged_nano) < budget.limitNano || budgetSpendOf(state, data.bucket).capReachedIn === capWindowId(window)) return [];
  return [{ type: 'BudgetReached', data: { ...window, trigger: 'refusal' } }];
}
