import { DomainError, type Decider, type DomainEvent } from '../../eventstore/src/decider';
import { Map as ImmutableMap } from 'immutable';
import { MAX_AMOUNT_NANO, nanoToUsdString, type Nano } from '../../platform/src/money';
import type { MeterUsage } from './pricing';
import {
  addToWindow,
  chargedInWindow,
  NO_SPEND,
  windowEndMs,
  windowStartMs,
  type LimitReset,
  type Period,
  type WindowSpend,
} from './spend-window';

/**
 * The account aggregate (stream `account-<id>`): all money. Amounts in events are nano-USD
 * as decimal strings, because JSON has no integers beyond 2^53.
 *
 * A request reserves its worst case first (HoldPlaced), then the hold is resolved exactly once:
 * posted (UsageCharged), voided (HoldReleased) or expired (HoldExpired). Every limit is checked
 * against charges plus open holds, so concurrent requests can never spend past it together.
 */
export const accountStream = (accountId: string) => `account-${accountId}`;

/**
 * The upcaster of UsageCharged's usage: events written before meters carry tokens only, which
 * are exactly the meters `input`, `cached_input` and `output`. The log is never rewritten.
 */
export function meteredUsage(data: Pick<GenerationStats, 'prompt_tokens' | 'cached_tokens' | 'completion_tokens'> & { usage?: MeterUsage }): MeterUsage {
  if (data.usage !== undefined) return data.usage;
  const usage: MeterUsage = {};
  if (data.prompt_tokens) usage.input = data.prompt_tokens;
  if (data.cached_tokens) usage.cached_input = data.cached_tokens;
  if (data.completion_tokens) usage.output = data.completion_tokens;
  return usage;
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

/** A key's spend limit, from the key record (spec 2.2): `limitNano` per `reset` window. */
export interface KeyLimit {
  limitNano: Nano;
  reset: LimitReset;
}

/** Settled balance (credits - charges) under which BalanceLow is recorded: $1.00. */
export const BALANCE_LOW_NANO = 1_000_000_000n;
/** KeySpendCapWarning fires when a key's window charges reach this share of its limit. */
const WARNING_PERCENT = 80n;
/** Most holds one ExpireHolds decision expires, so one append stays far below the store's size limit. */
export const EXPIRE_BATCH = 1000;

/** The 429 codes of spec 7, by the key's `limit_reset`. */
export const KEY_CAP_CODES: Readonly<Record<LimitReset, string>> = {
  daily: 'daily_spend_cap_reached',
  weekly: 'weekly_spend_cap_reached',
  monthly: 'monthly_spend_cap_reached',
  never: 'key_limit_reached',
};
export const DAILY_LIMIT_CODE = 'daily_spend_limit_reached';

/** Refusals that are 429 `insufficient_quota` (a spend limit), as opposed to 402 (the balance). */
export function isLimitRefusal(code: string): boolean {
  return code === DAILY_LIMIT_CODE || Object.values(KEY_CAP_CODES).includes(code);
}

interface KeyLimitData {
  limit_nano: string;
  reset: LimitReset;
}

/** A key's spend in one window, as threshold events report it. */
interface KeyWindowData {
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
        /** What was billed, by meter (ARCHITECTURE section 10). Absent on old events: read them through meteredUsage. */
        usage?: MeterUsage;
      } & GenerationStats
    >
  | DomainEvent<
      'HoldReleased',
      { account_id: string; hold_id: string; key_id: string; reason: 'error' | 'zero_completion' } & Partial<GenerationStats> & {
          error_code?: string;
        }
    >
  | DomainEvent<'HoldExpired', { account_id: string; hold_id: string; key_id: string; amount_nano: string; expires_at: string }>
  | DomainEvent<'DailyLimitSet', { account_id: string; limit_nano: string | null }>
  | DomainEvent<'KeySpendCapWarning', KeyWindowData>
  | DomainEvent<'KeySpendCapReached', KeyWindowData & { trigger: ReachedTrigger }>
  | DomainEvent<
      'DailyLimitReached',
      { account_id: string; limit_nano: string; charged_nano: string; day: string; resets_at: string; trigger: ReachedTrigger }
    >
  | DomainEvent<'BalanceLow', { account_id: string; balance_nano: string; threshold_nano: string }>
  /**
   * A request answered at no cost: a free model's (spec 4.13) or the response cache's (spec 4.2,
   * naming the generation it replayed in `source_id`). No money moves, but its id is a
   * generation of its own, cost 0, that can be looked up.
   */
  | DomainEvent<
      'FreeGenerationRecorded',
      { account_id: string; generation_id: string; key_id: string; endpoint: string; model?: string; provider?: string; source_id?: string; latency_ms?: number }
    >;

export interface PlaceHold {
  type: 'PlaceHold';
  /**
   * Unique per account (the gateway's random generation id). The state keeps open holds only,
   * so an id is refused while its hold is open; reusing a resolved one would start a new hold.
   */
  holdId: string;
  keyId: string;
  amountNano: Nano;
  model: string;
  endpoint: string;
  /** A hold that is never settled is expired after this long (by the worker). */
  ttlMs: number;
  /** The key's spend limit from the key record; absent or null = no key limit. */
  keyLimit?: KeyLimit | null;
}

export type AccountCommand =
  | { type: 'OpenAccount'; accountId: string }
  | { type: 'AddCredits'; amountNano: Nano; reason: string }
  | PlaceHold
  | {
      type: 'ChargeUsage';
      holdId: string;
      amountNano: Nano;
      stats: GenerationStats;
      /** What `amountNano` bills, by meter: recorded with the charge. */
      usage?: MeterUsage;
      /**
       * What the request returned, in its own units (vectors for embeddings); absent: its
       * completion tokens. Nothing returned is not billed (spec 1 rule 3).
       */
      returned?: number;
    }
  | { type: 'ReleaseHold'; holdId: string; errorCode: string; stats?: Partial<GenerationStats> }
  /** Expires the open holds whose `expires_at` is at or before now, at most `max` (default EXPIRE_BATCH). */
  | { type: 'ExpireHolds'; max?: number }
  /** The account's optional daily spend limit (PATCH /admin/accounts/{id}); null removes it. */
  | { type: 'SetDailyLimit'; limitNano: Nano | null }
  /**
   * Sent after PlaceHold was refused for a spend limit: a refusal throws, so it cannot carry the
   * KeySpendCapReached / DailyLimitReached event itself. Re-checks the hold; records nothing
   * when it would now be admitted or the event is already recorded for this window.
   */
  | { type: 'RecordLimitRefusal'; hold: PlaceHold }
  | { type: 'RecordFreeGeneration'; generationId: string; keyId: string; endpoint: string; model?: string; provider?: string; sourceId?: string; latencyMs?: number };

export interface OpenHold {
  amountNano: Nano;
  keyId: string;
  expiresAtMs: number;
}

/** Per key: its lifetime charges and the current window of each period, whatever its reset is today. */
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
}

const NO_KEY_SPEND: KeySpend = { lifetimeNano: 0n, windows: { daily: NO_SPEND, weekly: NO_SPEND, monthly: NO_SPEND }, limit: null, capReachedIn: null };

export function heldNano(state: AccountState): Nano {
  let sum = 0n;
  for (const hold of state.holds.values()) sum += hold.amountNano;
  return sum;
}

function keyHeldNano(state: AccountState, keyId: string): Nano {
  let sum = 0n;
  for (const hold of state.holds.values()) if (hold.keyId === keyId) sum += hold.amountNano;
  return sum;
}

/** Available = credits - charged - open holds. */
export function availableNano(state: AccountState): Nano {
  return state.creditsNano - state.chargedNano - heldNano(state);
}

/** The settled balance, without open holds: what BalanceLow watches. */
export function balanceNano(state: AccountState): Nano {
  return state.creditsNano - state.chargedNano;
}

function keySpendOf(state: AccountState, keyId: string): KeySpend {
  return state.keys[keyId] ?? NO_KEY_SPEND;
}

/** A key's charges in the `reset` window that contains `atMs` (lifetime for `never`). */
function keyChargedNano(state: AccountState, keyId: string, reset: LimitReset, atMs: number): Nano {
  const spend = keySpendOf(state, keyId);
  return reset === 'never' ? spend.lifetimeNano : chargedInWindow(spend.windows[reset], windowStartMs(reset, atMs));
}

/** A key's spend in its current window: charges in the window plus its open holds. */
export function keySpendNano(state: AccountState, keyId: string, reset: LimitReset, now: Date): Nano {
  return keyChargedNano(state, keyId, reset, now.getTime()) + keyHeldNano(state, keyId);
}

function accountDayChargedNano(state: AccountState, atMs: number): Nano {
  return chargedInWindow(state.day, windowStartMs('daily', atMs));
}

const iso = (ms: number) => new Date(ms).toISOString();

function keyWindowData(state: AccountState, account_id: string, keyId: string, limit: KeyLimit, now: Date): KeyWindowData {
  const atMs = now.getTime();
  const { reset } = limit;
  return {
    account_id,
    key_id: keyId,
    reset,
    limit_nano: limit.limitNano.toString(),
    charged_nano: keyChargedNano(state, keyId, reset, atMs).toString(),
    window_start: reset === 'never' ? null : iso(windowStartMs(reset, atMs)),
    resets_at: reset === 'never' ? null : iso(windowEndMs(reset, atMs)),
  };
}

/** Identifies a window and the limit in force, so a changed limit re-arms its "reached" event. */
function capWindowId(data: Pick<KeyWindowData, 'reset' | 'window_start' | 'limit_nano'>): string {
  return `${data.reset}:${data.window_start ?? 'lifetime'}:${data.limit_nano}`;
}

function requireOpen(state: AccountState): string {
  if (state.accountId === null) throw new DomainError('account_not_found', 'The account does not exist.');
  return state.accountId;
}

function requireHold(state: AccountState, holdId: string): OpenHold {
  const hold = state.holds.get(holdId);
  if (!hold) throw new DomainError('hold_not_open', `Hold ${holdId} is not open.`, { hold_id: holdId });
  return hold;
}

/**
 * Why a hold may not be placed, or null. Order: key cap, account daily limit, balance. A 429
 * is reported before a 402 because topping up does not lift a spend limit: told "top up"
 * first, the caller would pay and still be refused.
 */
function holdRefusal(state: AccountState, hold: PlaceHold, now: Date): DomainError | null {
  return keyCapRefusal(state, hold, now) ?? dailyLimitRefusal(state, hold, now) ?? balanceRefusal(state, hold);
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

const crosses = (before: Nano, after: Nano, threshold: Nano) => before < threshold && after >= threshold;

function keyCapReached(state: AccountState, data: KeyWindowData, trigger: ReachedTrigger): AccountEvent[] {
  if (keySpendOf(state, data.key_id).capReachedIn === capWindowId(data)) return [];
  return [{ type: 'KeySpendCapReached', data: { ...data, trigger } }];
}

function dailyLimitReached(state: AccountState, account_id: string, limit: Nano, charged: Nano, now: Date, trigger: ReachedTrigger): AccountEvent[] {
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
function thresholdsCrossedBy(state: AccountState, account_id: string, keyId: string, amount: Nano, now: Date): AccountEvent[] {
  return [...keyThresholds(state, account_id, keyId, amount, now), ...dailyLimitThreshold(state, account_id, amount, now), ...balanceLow(state, account_id, amount)];
}

function keyThresholds(state: AccountState, account_id: string, keyId: string, amount: Nano, now: Date): AccountEvent[] {
  const { limit, capReachedIn } = keySpendOf(state, keyId);
  if (!limit) return [];
  const window = keyWindowData(state, account_id, keyId, limit, now);
  const before = BigInt(window.charged_nano);
  const after = { ...window, charged_nano: (before + amount).toString() };
  if (crosses(before, before + amount, limit.limitNano)) return keyCapReached(state, after, 'charge');
  // Once the cap is reached in this window a warning would only be older news.
  if (capReachedIn === capWindowId(window)) return [];
  if (crosses(before * 100n, (before + amount) * 100n, limit.limitNano * WARNING_PERCENT)) return [{ type: 'KeySpendCapWarning', data: after }];
  return [];
}

function dailyLimitThreshold(state: AccountState, account_id: string, amount: Nano, now: Date): AccountEvent[] {
  const limit = state.dailyLimitNano;
  if (limit === null) return [];
  const before = accountDayChargedNano(state, now.getTime());
  return crosses(before, before + amount, limit) ? dailyLimitReached(state, account_id, limit, before + amount, now, 'charge') : [];
}

function balanceLow(state: AccountState, account_id: string, amount: Nano): AccountEvent[] {
  const before = balanceNano(state);
  const after = before - amount;
  if (!(before >= BALANCE_LOW_NANO && after < BALANCE_LOW_NANO)) return [];
  return [{ type: 'BalanceLow', data: { account_id, balance_nano: after.toString(), threshold_nano: BALANCE_LOW_NANO.toString() } }];
}

export const accountDecider: Decider<AccountCommand, AccountState, AccountEvent> = {
  initialState: () => ({
    accountId: null,
    creditsNano: 0n,
    chargedNano: 0n,
    holds: ImmutableMap(),
    dailyLimitNano: null,
    day: NO_SPEND,
    dailyLimitReachedOn: null,
    keys: {},
  }),

  decide(command, state, now) {
    switch (command.type) {
      case 'OpenAccount':
        if (state.accountId !== null) throw new DomainError('account_exists', 'The account already exists.');
        return [{ type: 'AccountOpened', data: { account_id: command.accountId } }];

      case 'AddCredits': {
        const account_id = requireOpen(state);
        if (command.amountNano <= 0n) throw new DomainError('invalid_amount', 'Credits must be a positive amount.');
        // The credits read model sums them in a PostgreSQL bigint: past the bound it could not.
        if (state.creditsNano + command.amountNano > MAX_AMOUNT_NANO) {
          throw new DomainError('credits_limit_exceeded', `An account holds at most ${nanoToUsdString(MAX_AMOUNT_NANO)} USD of credits.`, { param: 'amount_usd' });
        }
        return [{ type: 'CreditsAdded', data: { account_id, amount_nano: command.amountNano.toString(), reason: command.reason } }];
      }

      case 'PlaceHold': {
        const account_id = requireOpen(state);
        if (command.amountNano <= 0n) throw new DomainError('invalid_amount', 'A hold must be a positive amount.');
        if (state.holds.has(command.holdId)) {
          throw new DomainError('hold_exists', `Hold ${command.holdId} already exists.`);
        }
        const refusal = holdRefusal(state, command, now);
        if (refusal) throw refusal;
        const limit = command.keyLimit ?? null;
        return [
          {
            type: 'HoldPlaced',
            data: {
              account_id,
              hold_id: command.holdId,
              key_id: command.keyId,
              amount_nano: command.amountNano.toString(),
              model: command.model,
              endpoint: command.endpoint,
              expires_at: iso(now.getTime() + command.ttlMs),
              key_limit: limit && { limit_nano: limit.limitNano.toString(), reset: limit.reset },
            },
          },
        ];
      }

      case 'ChargeUsage': {
        const account_id = requireOpen(state);
        const hold = requireHold(state, command.holdId);
        if (command.amountNano < 0n) throw new DomainError('invalid_amount', 'A charge cannot be negative.');
        // Spec 1, rule 3: a request that returns no tokens is not billed.
        if ((command.returned ?? command.stats.completion_tokens) === 0 || command.amountNano === 0n) {
          return [
            {
              type: 'HoldReleased',
              data: { account_id, hold_id: command.holdId, key_id: hold.keyId, reason: 'zero_completion', ...command.stats },
            },
          ];
        }
        // More than the hold happens when the provider counts more input than we estimated: the
        // work is done, so it is charged in full and the excess recorded for the auditor.
        const exceeded = command.amountNano > hold.amountNano ? command.amountNano - hold.amountNano : 0n;
        return [
          {
            type: 'UsageCharged',
            data: {
              account_id,
              hold_id: command.holdId,
              key_id: hold.keyId,
              amount_nano: command.amountNano.toString(),
              charged_at: now.toISOString(),
              exceeded_hold_nano: exceeded.toString(),
              ...command.stats,
              ...(command.usage === undefined ? {} : { usage: command.usage }),
            },
          },
          ...thresholdsCrossedBy(state, account_id, hold.keyId, command.amountNano, now),
        ];
      }

      case 'ReleaseHold': {
        const account_id = requireOpen(state);
        const hold = requireHold(state, command.holdId);
        return [
          {
            type: 'HoldReleased',
            data: {
              account_id,
              hold_id: command.holdId,
              key_id: hold.keyId,
              reason: 'error',
              error_code: command.errorCode,
              ...command.stats,
            },
          },
        ];
      }

      case 'ExpireHolds': {
        const account_id = requireOpen(state);
        return [...state.holds.entries()]
          .filter(([, hold]) => hold.expiresAtMs <= now.getTime())
          // Oldest deadline first, so a capped batch makes progress in a stable order.
          .sort(([a, x], [b, y]) => x.expiresAtMs - y.expiresAtMs || (a < b ? -1 : 1))
          .slice(0, command.max ?? EXPIRE_BATCH)
          .map(([hold_id, hold]) => ({
            type: 'HoldExpired' as const,
            data: { account_id, hold_id, key_id: hold.keyId, amount_nano: hold.amountNano.toString(), expires_at: iso(hold.expiresAtMs) },
          }));
      }

      case 'SetDailyLimit': {
        const account_id = requireOpen(state);
        if (command.limitNano !== null && command.limitNano < 0n) throw new DomainError('invalid_amount', 'A daily limit cannot be negative.');
        if (command.limitNano !== null && command.limitNano > MAX_AMOUNT_NANO) {
          throw new DomainError('invalid_amount', `A daily limit is at most ${nanoToUsdString(MAX_AMOUNT_NANO)} USD.`, { param: 'daily_limit_usd' });
        }
        if (command.limitNano === state.dailyLimitNano) return [];
        return [{ type: 'DailyLimitSet', data: { account_id, limit_nano: command.limitNano?.toString() ?? null } }];
      }

      case 'RecordLimitRefusal': {
        const account_id = requireOpen(state);
        const { hold } = command;
        const refusal = holdRefusal(state, hold, now);
        if (refusal?.code === DAILY_LIMIT_CODE && state.dailyLimitNano !== null) {
          return dailyLimitReached(state, account_id, state.dailyLimitNano, accountDayChargedNano(state, now.getTime()), now, 'refusal');
        }
        if (hold.keyLimit && refusal?.code === KEY_CAP_CODES[hold.keyLimit.reset]) {
          return keyCapReached(state, keyWindowData(state, account_id, hold.keyId, hold.keyLimit, now), 'refusal');
        }
        return [];
      }

      case 'RecordFreeGeneration':
        return [{ type: 'FreeGenerationRecorded', data: freeGenerationData(requireOpen(state), command) }];
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'AccountOpened':
        return { ...state, accountId: event.data.account_id };
      case 'CreditsAdded':
        return { ...state, creditsNano: state.creditsNano + BigInt(event.data.amount_nano) };
      case 'HoldPlaced': {
        const { hold_id, amount_nano, key_id, expires_at, key_limit } = event.data;
        const limit = key_limit ? { limitNano: BigInt(key_limit.limit_nano), reset: key_limit.reset } : null;
        return {
          ...withKey(state, key_id, { limit }),
          holds: state.holds.set(hold_id, { amountNano: BigInt(amount_nano), keyId: key_id, expiresAtMs: Date.parse(expires_at) }),
        };
      }
      case 'UsageCharged': {
        const { hold_id, key_id, amount_nano, charged_at } = event.data;
        return recordCharge(closeHold(state, hold_id), key_id, BigInt(amount_nano), charged_at === undefined ? null : Date.parse(charged_at));
      }
      case 'HoldReleased':
      case 'HoldExpired':
        return closeHold(state, event.data.hold_id);
      case 'DailyLimitSet':
        // A new limit re-arms DailyLimitReached for today.
        return { ...state, dailyLimitNano: event.data.limit_nano === null ? null : BigInt(event.data.limit_nano), dailyLimitReachedOn: null };
      case 'DailyLimitReached':
        return { ...state, dailyLimitReachedOn: Date.parse(event.data.day) };
      case 'KeySpendCapReached': {
        const { key_id, limit_nano, reset } = event.data;
        return withKey(state, key_id, { limit: { limitNano: BigInt(limit_nano), reset }, capReachedIn: capWindowId(event.data) });
      }
      default:
        return state;
    }
  },
};

/** The event's data: only the optional facts the command has (events stay small, and replays compare equal). */
export function freeGenerationData(account_id: string, command: Extract<AccountCommand, { type: 'RecordFreeGeneration' }>) {
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

function withKey(state: AccountState, keyId: string, changes: Partial<KeySpend>): AccountState {
  return { ...state, keys: { ...state.keys, [keyId]: { ...keySpendOf(state, keyId), ...changes } } };
}

function closeHold(state: AccountState, holdId: string): AccountState {
  return { ...state, holds: state.holds.delete(holdId) };
}

/** A charge counts in the windows of its own instant, `atMs` (null on events older than spend windows: lifetime only). */
function recordCharge(state: AccountState, keyId: string, amount: Nano, atMs: number | null): AccountState {
  const { lifetimeNano, windows } = keySpendOf(state, keyId);
  const add = (window: WindowSpend, period: Period) => (atMs === null ? window : addToWindow(window, windowStartMs(period, atMs), amount));
  return {
    ...withKey(state, keyId, {
      lifetimeNano: lifetimeNano + amount,
      windows: { daily: add(windows.daily, 'daily'), weekly: add(windows.weekly, 'weekly'), monthly: add(windows.monthly, 'monthly') },
    }),
    chargedNano: state.chargedNano + amount,
    day: add(state.day, 'daily'),
  };
}
