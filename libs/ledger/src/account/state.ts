import { Map as ImmutableMap, OrderedMap } from 'immutable';
import type { Nano } from '@svc/platform';
import { addToWindow, chargedInWindow, NO_SPEND, windowStartMs, type LimitReset, type Period, type WindowSpend } from '../spend-window';
import type { MeterUsage } from '../pricing';
import { budgetBucket, type AccountEvent, type BudgetData, type KeyLimit, type KeyWindowData } from './events';

export interface OpenHold {
  amountNano: Nano;
  keyId: string;
  expiresAtMs: number;
  /** The Idempotency-Key (hashed with its API key) the hold's request was sent with. */
  idempotencyKey?: string;
  /** Issue 44: the guardrail budgets the hold counts against, and its charge will. */
  budgets?: readonly BudgetData[];
}

/**
 * A request sent with an Idempotency-Key (spec 8: kept 24 hours per API key), as the account
 * knows it: its hold, what the request was, and whether it was charged. Held in the log with
 * the money, so no restart of anything can make a retry of a charged request run again.
 */
export interface IdempotentRequest {
  holdId: string;
  fingerprint: string;
  untilMs: number;
  charged: boolean;
}

/** A hold the hold reaper settled (issue 41 D): its process may come back with its own charge until the hold would have expired. */
export interface ReapedHold {
  keyId: string;
  /** What the reaper charged (0 when it released the hold), and by meter. */
  chargedNano: Nano;
  usage: MeterUsage;
  untilMs: number;
  /** The budgets its hold counted against: a correction counts against them too. */
  budgets?: readonly BudgetData[];
}

/** Reaped holds an account remembers at most: they are rare (a process lost or paused), and only the newest matter. */
export const MAX_REAPED_HOLDS = 10_000;

/** How long an Idempotency-Key is kept (spec 8). */
export const IDEMPOTENCY_KEEP_MS = 24 * 3600_000;

/**
 * Per key (and per guardrail budget, issue 44): its lifetime charges and the current window of
 * each period, whatever its reset is today.
 */
export interface KeySpend {
  lifetimeNano: Nano;
  windows: Readonly<Record<Period, WindowSpend>>;
  /**
   * The key's limit as last seen (latest HoldPlaced or KeySpendCapReached). Charges are
   * measured against it rather than against each hold's own: holds admitted before a limit
   * change would otherwise re-fire the old limit's events.
   */
  limit: KeyLimit | null;
  /** The window (reset, start, limit) whose KeySpendCapReached is recorded; a new window or limit re-arms it. */
  capReachedIn: string | null;
}

/**
 * Bounded whatever the account's history: open holds only (a resolved hold leaves, so it cannot
 * be resolved twice), and per key the current window of each period.
 */
export interface AccountState {
  accountId: string | null;
  creditsNano: Nano;
  chargedNano: Nano;
  /** Issue 23: the sum of operator credit notes and adjustments, signed. */
  adjustedNano: Nano;
  /**
   * Each adjustment id recorded, with what it said (adjustmentFingerprint), so a retry is
   * recognised. Grows only with operator corrections, which are rare by nature.
   */
  adjustments: Readonly<Record<string, string>>;
  /**
   * Open holds by id. A persistent map: a hot account has hundreds open, and every event of it
   * yields a new state, so copying a plain object each time would cost O(open holds) per event.
   */
  holds: ImmutableMap<string, OpenHold>;
  dailyLimitNano: Nano | null;
  /** The whole account's charges on the UTC day of its latest charge. */
  day: WindowSpend;
  /** Start of the UTC day whose DailyLimitReached is recorded; reset when the limit changes. */
  dailyLimitReachedOn: number | null;
  keys: Readonly<Record<string, KeySpend>>;
  /** Issue 44: per guardrail budget (budgetBucket: a guardrail and the subject it is assigned to), as per key. */
  budgets: Readonly<Record<string, KeySpend>>;
  /**
   * Issue 41 B: the requests of the last 24 hours sent with an Idempotency-Key, by key (hashed
   * with its API key), oldest first; bounded by that day's idempotent requests.
   */
  idempotency: OrderedMap<string, IdempotentRequest>;
  /** Issue 41 D: holds the reaper settled that their process may still charge, oldest first. */
  reaped: OrderedMap<string, ReapedHold>;
}

export const NO_KEY_SPEND: KeySpend = { lifetimeNano: 0n, windows: { daily: NO_SPEND, weekly: NO_SPEND, monthly: NO_SPEND }, limit: null, capReachedIn: null };

export function heldNano(state: AccountState): Nano {
  let sum = 0n;
  for (const hold of state.holds.values()) sum += hold.amountNano;
  return sum;
}

export function keyHeldNano(state: AccountState, keyId: string): Nano {
  let sum = 0n;
  for (const hold of state.holds.values()) if (hold.keyId === keyId) sum += hold.amountNano;
  return sum;
}

/** Available = credits - charged - open holds + adjustments. */
export function availableNano(state: AccountState): Nano {
  return balanceNano(state) - heldNano(state);
}

/** The settled balance, without open holds: what BalanceLow watches. */
export function balanceNano(state: AccountState): Nano {
  return state.creditsNano - state.chargedNano + state.adjustedNano;
}

/** What an adjustment id stands for: a retry must say the same. */
export function adjustmentFingerprint(a: { amount_nano: string; kind: string; reason: string; operator: string }): string {
  return JSON.stringify([a.amount_nano, a.kind, a.reason, a.operator]);
}

export function keySpendOf(state: AccountState, keyId: string): KeySpend {
  return state.keys[keyId] ?? NO_KEY_SPEND;
}

/** A key's charges in the `reset` window that contains `atMs` (lifetime for `never`). */
export function keyChargedNano(state: AccountState, keyId: string, reset: LimitReset, atMs: number): Nano {
  return chargedIn(keySpendOf(state, keyId), reset, atMs);
}

/** Charges of a key or a budget in the `reset` window that contains `atMs` (lifetime for `never`). */
export function chargedIn(spend: KeySpend, reset: LimitReset, atMs: number): Nano {
  return reset === 'never' ? spend.lifetimeNano : chargedInWindow(spend.windows[reset], windowStartMs(reset, atMs));
}

/** A key's spend in its current window: charges in the window plus its open holds. */
export function keySpendNano(state: AccountState, keyId: string, reset: LimitReset, now: Date): Nano {
  return keyChargedNano(state, keyId, reset, now.getTime()) + keyHeldNano(state, keyId);
}

export function accountDayChargedNano(state: AccountState, atMs: number): Nano {
  return chargedInWindow(state.day, windowStartMs('daily', atMs));
}

/** Identifies a window and the limit in force, so a changed limit re-arms its "reached" event. */
export function capWindowId(data: Pick<KeyWindowData, 'reset' | 'window_start' | 'limit_nano'>): string {
  return `${data.reset}:${data.window_start ?? 'lifetime'}:${data.limit_nano}`;
}

/** An account that does not exist yet. */
export function initialState(): AccountState {
  return {
    accountId: null,
    creditsNano: 0n,
    chargedNano: 0n,
    adjustedNano: 0n,
    adjustments: {},
    holds: ImmutableMap(),
    dailyLimitNano: null,
    day: NO_SPEND,
    dailyLimitReachedOn: null,
    keys: {},
    budgets: {},
    idempotency: OrderedMap(),
    reaped: OrderedMap(),
  };
}

/** How each event moves the state: the only way the state changes. */
export function evolve(state: AccountState, event: AccountEvent): AccountState {
  switch (event.type) {
    case 'AccountOpened':
      return { ...state, accountId: event.data.account_id };
    case 'CreditsAdded':
      return { ...state, creditsNano: state.creditsNano + BigInt(event.data.amount_nano) };
    case 'BalanceAdjusted':
      return {
        ...state,
        adjustedNano: state.adjustedNano + BigInt(event.data.amount_nano),
        adjustments: { ...state.adjustments, [event.data.adjustment_id]: adjustmentFingerprint(event.data) },
      };
    case 'HoldPlaced': {
      const { hold_id, amount_nano, key_id, expires_at, key_limit, idempotency, budgets } = event.data;
      const limit = key_limit ? { limitNano: BigInt(key_limit.limit_nano), reset: key_limit.reset } : null;
      const hold: OpenHold = {
        amountNano: BigInt(amount_nano),
        keyId: key_id,
        expiresAtMs: Date.parse(expires_at),
        ...(idempotency ? { idempotencyKey: idempotency.key } : {}),
        ...(budgets?.length ? { budgets } : {}),
      };
      return {
        ...withBudgetLimits(withKey(state, key_id, { limit }), budgets ?? []),
        holds: state.holds.set(hold_id, hold),
        ...(idempotency ? { idempotency: rememberIdempotent(state.idempotency, hold_id, idempotency) } : {}),
      };
    }
    case 'UsageCharged': {
      const { hold_id, key_id, amount_nano, charged_at, reaped, usage } = event.data;
      const hold = state.holds.get(hold_id);
      const key = hold?.idempotencyKey;
      let charged = key === undefined ? state : { ...state, idempotency: state.idempotency.update(key, (r) => r && { ...r, charged: true }) };
      if (reaped && hold)
        charged = rememberReaped(charged, hold_id, {
          keyId: key_id,
          chargedNano: BigInt(amount_nano),
          usage,
          untilMs: hold.expiresAtMs,
          ...(hold.budgets ? { budgets: hold.budgets } : {}),
        });
      const at = charged_at === undefined ? null : Date.parse(charged_at);
      return recordCharge(closeHold(charged, hold_id), key_id, BigInt(amount_nano), at, hold?.budgets);
    }
    case 'HoldReleased':
    case 'HoldExpired': {
      // Nothing was billed: the request may run again under the same key (spec 3.3: errors are not replayed).
      const hold = state.holds.get(event.data.hold_id);
      const key = hold?.idempotencyKey;
      let released =
        key === undefined || state.idempotency.get(key)?.holdId !== event.data.hold_id ? state : { ...state, idempotency: state.idempotency.delete(key) };
      if (event.type === 'HoldReleased' && event.data.reaped && hold) {
        released = rememberReaped(released, event.data.hold_id, {
          keyId: hold.keyId,
          chargedNano: 0n,
          usage: {},
          untilMs: hold.expiresAtMs,
          ...(hold.budgets ? { budgets: hold.budgets } : {}),
        });
      }
      return closeHold(released, event.data.hold_id);
    }
    case 'UsageCorrected': {
      const { hold_id, key_id, amount_nano, total_nano, charged_at, usage } = event.data;
      const budgets = state.reaped.get(hold_id)?.budgets;
      const corrected = {
        ...state,
        reaped: state.reaped.update(hold_id, (r) => r && { ...r, chargedNano: BigInt(total_nano), usage }),
      };
      return recordCharge(corrected, key_id, BigInt(amount_nano), Date.parse(charged_at), budgets);
    }
    case 'DailyLimitSet':
      // A new limit re-arms DailyLimitReached for today.
      return { ...state, dailyLimitNano: event.data.limit_nano === null ? null : BigInt(event.data.limit_nano), dailyLimitReachedOn: null };
    case 'DailyLimitReached':
      return { ...state, dailyLimitReachedOn: Date.parse(event.data.day) };
    case 'KeySpendCapReached': {
      const { key_id, limit_nano, reset } = event.data;
      return withKey(state, key_id, { limit: { limitNano: BigInt(limit_nano), reset }, capReachedIn: capWindowId(event.data) });
    }
    case 'BudgetReached': {
      const { guardrail_id, scope, subject } = event.data;
      return withBudget(state, budgetBucket(guardrail_id, scope, subject), { capReachedIn: capWindowId(event.data) });
    }
    default:
      return state;
  }
}

/** The request's entry, after the entries its own placement outlived (oldest first, so the scan stops at the first kept). */
function rememberIdempotent(
  known: OrderedMap<string, IdempotentRequest>,
  holdId: string,
  idempotency: { key: string; fingerprint: string; until: string },
): OrderedMap<string, IdempotentRequest> {
  const untilMs = Date.parse(idempotency.until);
  const placedAtMs = untilMs - IDEMPOTENCY_KEEP_MS;
  let kept = known;
  for (const [key, request] of known) {
    if (request.untilMs > placedAtMs) break;
    kept = kept.delete(key);
  }
  return kept.delete(idempotency.key).set(idempotency.key, { holdId, fingerprint: idempotency.fingerprint, untilMs, charged: false });
}

function rememberReaped(state: AccountState, holdId: string, reaped: ReapedHold): AccountState {
  let kept = state.reaped.set(holdId, reaped);
  while (kept.size > MAX_REAPED_HOLDS) kept = kept.delete(kept.keySeq().first() as string);
  return { ...state, reaped: kept };
}

export function withKey(state: AccountState, keyId: string, changes: Partial<KeySpend>): AccountState {
  return { ...state, keys: { ...state.keys, [keyId]: { ...keySpendOf(state, keyId), ...changes } } };
}

export function closeHold(state: AccountState, holdId: string): AccountState {
  return { ...state, holds: state.holds.delete(holdId) };
}

function withBudget(state: AccountState, bucket: string, changes: Partial<KeySpend>): AccountState {
  return { ...state, budgets: { ...state.budgets, [bucket]: { ...(state.budgets[bucket] ?? NO_KEY_SPEND), ...changes } } };
}

/** Charges are measured against a budget's latest limit, as a key's are (KeySpend.limit). */
function withBudgetLimits(state: AccountState, budgets: readonly BudgetData[]): AccountState {
  return budgets.reduce((s, b) => withBudget(s, b.bucket, { limit: { limitNano: BigInt(b.limit_nano), reset: b.reset } }), state);
}

/** `spend` with a charge made at `atMs` (null on events older than spend windows: lifetime only). */
function addCharge(spend: KeySpend, amount: Nano, atMs: number | null): Pick<KeySpend, 'lifetimeNano' | 'windows'> {
  const add = (window: WindowSpend, period: Period) => (atMs === null ? window : addToWindow(window, windowStartMs(period, atMs), amount));
  const { windows } = spend;
  return {
    lifetimeNano: spend.lifetimeNano + amount,
    windows: { daily: add(windows.daily, 'daily'), weekly: add(windows.weekly, 'weekly'), monthly: add(windows.monthly, 'monthly') },
  };
}

/** A charge counts in the windows of its own instant, `atMs`: the key's, the account's day, and those of each budget its hold counted against. */
export function recordCharge(state: AccountState, keyId: string, amount: Nano, atMs: number | null, budgets: readonly BudgetData[] = []): AccountState {
  const charged = {
    ...withKey(state, keyId, addCharge(keySpendOf(state, keyId), amount, atMs)),
    chargedNano: state.chargedNano + amount,
    day: atMs === null ? state.day : addToWindow(state.day, windowStartMs('daily', atMs), amount),
  };
  return budgets.reduce((s, b) => withBudget(s, b.bucket, addCharge(s.budgets[b.bucket] ?? NO_KEY_SPEND, amount, atMs)), charged);
}
