import { DomainError } from '@svc/eventstore';
import type { Nano } from '@svc/platform';
import { windowEndMs, windowStartMs, type LimitReset } from '../spend-window';
import { BUDGET_LIMIT_CODE, budgetRefusal } from './budgets';
import type { PlaceHold } from './commands';
import type { AccountEvent, KeyLimit, KeyWindowData, ReachedTrigger } from './events';
import { crosses, iso, WARNING_PERCENT, windowBounds } from './thresholds';
import { accountDayChargedNano, availableNano, balanceNano, capWindowId, heldNano, keyChargedNano, keySpendNano, keySpendOf, type AccountState } from './state';

/** Settled balance (credits - charges) under which BalanceLow is recorded: $1.00. */
export const BALANCE_LOW_NANO = 1_000_000_000n;

/** The 429 codes of spec 7, by the key's `limit_reset`. */
export const KEY_CAP_CODES: Readonly<Record<LimitReset, string>> = {
  daily: 'daily_spend_cap_reached',
  weekly: 'weekly_spend_cap_reached',
  monthly: 'monthly_spend_cap_reached',
  never: 'key_limit_reached',
};

export const DAILY_LIMIT_CODE = 'daily_spend_limit_reached';

/** Refusals that are 429 `insufficient_quota` (a spend limit), as opposed to 402 (the balance). */
export function isLimitRefusal(code: string | null): boolean {
  return code !== null && (code === DAILY_LIMIT_CODE || code === BUDGET_LIMIT_CODE || Object.values(KEY_CAP_CODES).includes(code));
}

export function keyWindowData(state: AccountState, account_id: string, keyId: string, limit: KeyLimit, now: Date): KeyWindowData {
  const atMs = now.getTime();
  const { reset } = limit;
  return {
    account_id,
    key_id: keyId,
    reset,
    limit_nano: limit.limitNano.toString(),
    charged_nano: keyChargedNano(state, keyId, reset, atMs).toString(),
    ...windowBounds(reset, atMs),
  };
}

/**
 * Why a hold may not be placed, or null. Order: key cap, guardrail budgets (key, member,
 * organization), account daily limit, balance. A 429 is reported before a 402 because topping
 * up does not lift a spend limit: told "top up" first, the caller would pay and still be refused.
 */
export function holdRefusal(state: AccountState, hold: PlaceHold, now: Date): DomainError | null {
  return keyCapRefusal(state, hold, now) ?? budgetRefusal(state, hold, now) ?? dailyLimitRefusal(state, hold, now) ?? balanceRefusal(state, hold);
}

function keyCapRefusal(state: AccountState, hold: PlaceHold, now: Date): DomainError | null {
  const limit = hold.keyLimit;
  if (!limit) return null;
  const spent = keySpendNano(state, hold.keyId, limit.reset, now);
  if (spent + hold.amountNano <= limit.limitNano) return null;
  const resets = limit.reset === 'never' ? null : iso(windowEndMs(limit.reset, now.getTime()));
  return new DomainError(
    KEY_CAP_CODES[limit.reset],
    resets === null ? 'This key has reached its spend limit.' : `This key has reached its ${limit.reset} spend limit; it resets at ${resets}.`,
    { key_id: hold.keyId, limit_nano: limit.limitNano, spent_nano: spent, required_nano: hold.amountNano, resets_at: resets },
  );
}

function dailyLimitRefusal(state: AccountState, hold: PlaceHold, now: Date): DomainError | null {
  const limit = state.dailyLimitNano;
  if (limit === null) return null;
  // Open holds count whenever they were placed: they may still be charged today.
  const spent = accountDayChargedNano(state, now.getTime()) + heldNano(state);
  if (spent + hold.amountNano <= limit) return null;
  const resets = iso(windowEndMs('daily', now.getTime()));
  return new DomainError(DAILY_LIMIT_CODE, `The account has reached its daily spend limit; it resets at ${resets}.`, {
    limit_nano: limit,
    spent_nano: spent,
    required_nano: hold.amountNano,
    resets_at: resets,
  });
}

/** Spec 1, rule 1: the balance net of open holds must cover the worst case. */
function balanceRefusal(state: AccountState, hold: PlaceHold): DomainError | null {
  const available = availableNano(state);
  if (hold.amountNano <= available) return null;
  return new DomainError('insufficient_quota', 'The balance does not cover the worst case of this request.', {
    available_nano: available,
    required_nano: hold.amountNano,
  });
}

export function keyCapReached(state: AccountState, data: KeyWindowData, trigger: ReachedTrigger): AccountEvent[] {
  if (keySpendOf(state, data.key_id).capReachedIn === capWindowId(data)) return [];
  return [{ type: 'KeySpendCapReached', data: { ...data, trigger } }];
}

export function dailyLimitReached(state: AccountState, account_id: string, limit: Nano, charged: Nano, now: Date, trigger: ReachedTrigger): AccountEvent[] {
  const day = windowStartMs('daily', now.getTime());
  if (state.dailyLimitReachedOn === day) return [];
  return [
    {
      type: 'DailyLimitReached',
      data: { account_id, limit_nano: limit.toString(), charged_nano: charged.toString(), day: iso(day), resets_at: iso(windowEndMs('daily', day)), trigger },
    },
  ];
}

/**
 * Thresholds follow money actually charged, not holds: a hold is usually far above what the
 * request ends up costing, and warnings for spend that never happens would be noise. Charges
 * only grow within a window (and the settled balance only falls between top-ups), so comparing
 * before and after the charge fires each threshold once per crossing without extra state.
 */
export function thresholdsCrossedBy(state: AccountState, account_id: string, keyId: string, amount: Nano, now: Date): AccountEvent[] {
  return [
    ...keyThresholds(state, account_id, keyId, amount, now),
    ...dailyLimitThreshold(state, account_id, amount, now),
    ...balanceLow(state, account_id, amount),
  ];
}

function keyThresholds(state: AccountState, account_id: string, keyId: string, amount: Nano, now: Date): AccountEvent[] {
  const { limit, capReachedIn } = keySpendOf(state, keyId);
  if (!limit) return [];
  const window = keyWindowData(state, account_id, keyId, limit, now);
  const before = BigInt(window.charged_nano);
  const after = { ...window, charged_nano: (before + amount).toString() };
  // Once the cap is reached in this window a warning would only be older news.
  if (capReachedIn === capWindowId(window)) return [];
  // Issue 41 item 18: the warning comes before `reached`, also when one charge passes 80% and
  // the limit at once: both, in that order, in the one decision.
  const warned: AccountEvent[] = crosses(before * 100n, (before + amount) * 100n, limit.limitNano * WARNING_PERCENT)
    ? [{ type: 'KeySpendCapWarning', data: after }]
    : [];
  if (crosses(before, before + amount, limit.limitNano)) return [...warned, ...keyCapReached(state, after, 'charge')];
  return warned;
}

/**
 * Issue 41 item 18: a refusal says the worst case of one request does not fit, not that the
 * key's spend has reached its limit (a key 67% spent refuses a hold worth 40%). So a refusal
 * records `reached` only when the window's charges are already at the limit, which no charge
 * announced: the limit was lowered to or below what the window had spent. Otherwise `reached`
 * waits for the charge that brings spend to the limit (webhooks `key.spend_cap.reached`,
 * spec 6.1: "a key's spend reaches its limit").
 */
export function keyCapReachedByRefusal(state: AccountState, data: KeyWindowData): AccountEvent[] {
  if (BigInt(data.charged_nano) < BigInt(data.limit_nano)) return [];
  return keyCapReached(state, data, 'refusal');
}

function dailyLimitThreshold(state: AccountState, account_id: string, amount: Nano, now: Date): AccountEvent[] {
  const limit = state.dailyLimitNano;
  if (limit === null) return [];
  const before = accountDayChargedNano(state, now.getTime());
  return crosses(before, before + amount, limit) ? dailyLimitReached(state, account_id, limit, before + amount, now, 'charge') : [];
}

/** `amount` is what leaves the settled balance: a charge, or a negative adjustment. */
export function balanceLow(state: AccountState, account_id: string, amount: Nano): AccountEvent[] {
  const before = balanceNano(state);
  const after = before - amount;
  if (!(before >= BALANCE_LOW_NANO && after < BALANCE_LOW_NANO)) return [];
  return [{ type: 'BalanceLow', data: { account_id, balance_nano: after.toString(), threshold_nano: BALANCE_LOW_NANO.toString() } }];
}
