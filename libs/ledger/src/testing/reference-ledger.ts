import { freeGenerationData, type AccountCommand, type AccountEvent, type GenerationStats, type KeyLimit, type PlaceHold } from '../account';
import type { LimitReset } from '../spend-window';
import type { MeterUsage } from '../pricing';

/**
 * An independent, deliberately naive model of the account rules for the simulation. It
 * imports only types from the decider: windows are named by ISO date prefixes (a week found by
 * walking back to a Monday), the whole spend history is kept in a map, every hold ever placed
 * is remembered, and sums are recomputed by scanning. Slow and obvious, so that the decider's
 * bounded, incremental state has something different to be checked against.
 */
const DAY_MS = 86_400_000;
const BALANCE_LOW_NANO = 1_000_000_000n;
const EXPIRE_BATCH = 1000;
export const ACCOUNT_SCOPE = '*account*';
export const RESETS: readonly LimitReset[] = ['daily', 'weekly', 'monthly', 'never'];
const CAP_CODE: Record<LimitReset, string> = {
  daily: 'daily_spend_cap_reached',
  weekly: 'weekly_spend_cap_reached',
  monthly: 'monthly_spend_cap_reached',
  never: 'key_limit_reached',
};

const iso = (ms: number) => new Date(ms).toISOString();

/** The name of the window of `reset` containing `ms`: "2026-11-02", "2026-11", or "lifetime". */
export function windowLabel(reset: LimitReset, ms: number): string {
  const day = iso(ms).slice(0, 10);
  switch (reset) {
    case 'daily':
      return day;
    case 'monthly':
      return day.slice(0, 7);
    case 'never':
      return 'lifetime';
    case 'weekly': {
      let d = new Date(`${day}T00:00:00.000Z`);
      while (d.getUTCDay() !== 1) d = new Date(d.getTime() - DAY_MS);
      return iso(d.getTime()).slice(0, 10);
    }
  }
}

function labelStart(reset: LimitReset, label: string): string | null {
  if (reset === 'never') return null;
  return reset === 'monthly' ? `${label}-01T00:00:00.000Z` : `${label}T00:00:00.000Z`;
}

function labelEnd(reset: LimitReset, label: string): string | null {
  switch (reset) {
    case 'never':
      return null;
    case 'daily':
      return iso(Date.parse(`${label}T00:00:00.000Z`) + DAY_MS);
    case 'weekly':
      return iso(Date.parse(`${label}T00:00:00.000Z`) + 7 * DAY_MS);
    case 'monthly': {
      const [year, month] = label.split('-').map(Number) as [number, number];
      return month === 12 ? `${year + 1}-01-01T00:00:00.000Z` : `${year}-${String(month + 1).padStart(2, '0')}-01T00:00:00.000Z`;
    }
  }
}

export type Outcome = { events: AccountEvent[] } | { error: { code: string; details: Record<string, unknown> } };

/** What a command should decide, and how the model changes once those events are appended. */
export interface Prediction {
  outcome: Outcome;
  commit(): void;
}

interface RefHold {
  keyId: string;
  amount: bigint;
  expiresAt: number;
  status: 'open' | 'charged' | 'released' | 'expired';
  /** Settled by the hold reaper (issue 41 D): what it (and any correction since) charged, and by meter. */
  reaped?: { charged: bigint; usage: MeterUsage };
}

/** The meters of a charge that records tokens only, written out here rather than taken from the decider. */
function tokenMeters(stats: GenerationStats): MeterUsage {
  const usage: MeterUsage = {};
  if (stats.prompt_tokens) usage.input = stats.prompt_tokens;
  if (stats.cached_tokens) usage.cached_input = stats.cached_tokens;
  if (stats.completion_tokens) usage.output = stats.completion_tokens;
  return usage;
}

function minus(total: MeterUsage, part: MeterUsage): MeterUsage {
  const out: Record<string, number> = {};
  for (const meter of new Set([...Object.keys(total), ...Object.keys(part)])) {
    const quantity = ((total as Record<string, number>)[meter] ?? 0) - ((part as Record<string, number>)[meter] ?? 0);
    if (quantity !== 0) out[meter] = quantity;
  }
  return out as MeterUsage;
}

const refuse = (code: string, details: Record<string, unknown> = {}): Prediction => ({ outcome: { error: { code, details } }, commit: () => undefined });

export class ReferenceLedger {
  accountId: string | null = null;
  credits = 0n;
  charged = 0n;
  /** Issue 23: every adjustment by id, as recorded. */
  readonly adjustments = new Map<string, { amount: bigint; kind: string; reason: string; operator: string }>();
  dailyLimit: bigint | null = null;
  /** Every hold ever placed; `openIds` names those still open, so that sums need not scan them all. */
  readonly holds = new Map<string, RefHold>();
  private readonly openIds = new Set<string>();
  /** Charges per `scope|reset`, then per window label; scope a key id or the whole account. The full history. */
  private readonly spend = new Map<string, Map<string, bigint>>();
  /** Per key: the limit of its latest hold or reached event, and the window/limit of its latest reached event. */
  private readonly keyLimit = new Map<string, KeyLimit | null>();
  private readonly lastReached = new Map<string, string>();
  private readonly dailyReached = new Set<string>();

  openHolds(keyId?: string): [string, RefHold][] {
    return [...this.openIds].map((id): [string, RefHold] => [id, this.holds.get(id)!]).filter(([, h]) => keyId === undefined || h.keyId === keyId);
  }

  held(keyId?: string): bigint {
    return this.openHolds(keyId).reduce((sum, [, h]) => sum + h.amount, 0n);
  }

  available(): bigint {
    return this.balance() - this.held();
  }

  balance(): bigint {
    let adjusted = 0n;
    for (const a of this.adjustments.values()) adjusted += a.amount;
    return this.credits - this.charged + adjusted;
  }

  spentIn(scope: string, reset: LimitReset, ms: number): bigint {
    return this.spend.get(`${scope}|${reset}`)?.get(windowLabel(reset, ms)) ?? 0n;
  }

  /** A key's charges in the window of `ms` plus its open holds. */
  keySpend(keyId: string, reset: LimitReset, ms: number): bigint {
    return this.spentIn(keyId, reset, ms) + this.held(keyId);
  }

  /** Sum over the whole window history of each `scope|reset`. */
  historyTotals(): Map<string, bigint> {
    const totals = new Map<string, bigint>();
    for (const [scopeReset, windows] of this.spend) {
      let total = 0n;
      for (const amount of windows.values()) total += amount;
      totals.set(scopeReset, total);
    }
    return totals;
  }

  predict(command: AccountCommand, now: number): Prediction {
    if (command.type === 'OpenAccount') return this.open(command.accountId);
    const account_id = this.accountId;
    if (account_id === null) return refuse('account_not_found');
    switch (command.type) {
      case 'AddCredits':
        if (command.amountNano <= 0n) return refuse('invalid_amount');
        return {
          outcome: { events: [{ type: 'CreditsAdded', data: { account_id, amount_nano: String(command.amountNano), reason: command.reason } }] },
          commit: () => void (this.credits += command.amountNano),
        };
      case 'PlaceHold':
        return this.placeHold(account_id, command, now);
      case 'ChargeUsage': {
        const hold = this.holds.get(command.holdId);
        if (hold && hold.status !== 'open' && hold.reaped && !command.reaped && hold.expiresAt > now)
          return this.correct(account_id, command.holdId, hold, command.amountNano, command.stats, command.usage, now);
        return this.charge(account_id, command.holdId, command.amountNano, command.stats, command.usage, now, command.reaped === true);
      }
      case 'ReleaseHold': {
        const hold = this.holds.get(command.holdId);
        if (hold?.status !== 'open') return refuse('hold_not_open', { hold_id: command.holdId });
        return {
          outcome: {
            events: [
              {
                type: 'HoldReleased',
                data: {
                  account_id,
                  hold_id: command.holdId,
                  key_id: hold.keyId,
                  reason: 'error',
                  error_code: command.errorCode,
                  ...command.stats,
                  ...(command.reaped ? { reaped: true as const } : {}),
                },
              },
            ],
          },
          commit: () => {
            this.close(command.holdId, 'released');
            if (command.reaped) hold.reaped = { charged: 0n, usage: {} };
          },
        };
      }
      case 'ExpireHolds':
        return this.expire(account_id, now, command.max ?? EXPIRE_BATCH);
      case 'SetDailyLimit':
        if (command.limitNano !== null && command.limitNano < 0n) return refuse('invalid_amount');
        if (command.limitNano === this.dailyLimit) return { outcome: { events: [] }, commit: () => undefined };
        return {
          outcome: { events: [{ type: 'DailyLimitSet', data: { account_id, limit_nano: command.limitNano === null ? null : String(command.limitNano) } }] },
          commit: () => {
            this.dailyLimit = command.limitNano;
            this.dailyReached.clear();
          },
        };
      case 'RecordLimitRefusal':
        return this.recordRefusal(account_id, command.hold, now);
      case 'RecordFreeGeneration':
        return { outcome: { events: [{ type: 'FreeGenerationRecorded', data: freeGenerationData(account_id, command) }] }, commit: () => undefined };
      case 'AdjustBalance':
        return this.adjust(account_id, command);
    }
  }

  private adjust(account_id: string, command: Extract<AccountCommand, { type: 'AdjustBalance' }>): Prediction {
    const { adjustmentId, amountNano: amount, kind, reason, operator } = command;
    const seen = this.adjustments.get(adjustmentId);
    if (seen) {
      const same = seen.amount === amount && seen.kind === kind && seen.reason === reason && seen.operator === operator;
      return same ? { outcome: { events: [] }, commit: () => undefined } : refuse('adjustment_id_conflict', { param: 'adjustment_id' });
    }
    if (amount === 0n || (kind === 'credit_note' && amount < 0n)) return refuse('invalid_amount', { param: 'amount_usd' });
    if (amount < 0n && this.available() + amount < 0n) return refuse('adjustment_exceeds_balance', { param: 'amount_usd', available_nano: this.available() });
    const data = { account_id, adjustment_id: adjustmentId, amount_nano: String(amount), kind, reason, operator };
    const events: AccountEvent[] = [{ type: 'BalanceAdjusted', data }];
    const balance = this.balance();
    if (amount < 0n && balance >= BALANCE_LOW_NANO && balance + amount < BALANCE_LOW_NANO) {
      events.push({ type: 'BalanceLow', data: { account_id, balance_nano: String(balance + amount), threshold_nano: String(BALANCE_LOW_NANO) } });
    }
    return { outcome: { events }, commit: () => void this.adjustments.set(adjustmentId, { amount, kind, reason, operator }) };
  }

  private open(accountId: string): Prediction {
    if (this.accountId !== null) return refuse('account_exists');
    return { outcome: { events: [{ type: 'AccountOpened', data: { account_id: accountId } }] }, commit: () => void (this.accountId = accountId) };
  }

  private refusal(hold: PlaceHold, now: number): { code: string; details: Record<string, unknown> } | null {
    if (hold.keyLimit) {
      const { limitNano, reset } = hold.keyLimit;
      const spent = this.keySpend(hold.keyId, reset, now);
      if (spent + hold.amountNano > limitNano) {
        return {
          code: CAP_CODE[reset],
          details: {
            key_id: hold.keyId,
            limit_nano: limitNano,
            spent_nano: spent,
            required_nano: hold.amountNano,
            resets_at: labelEnd(reset, windowLabel(reset, now)),
          },
        };
      }
    }
    if (this.dailyLimit !== null) {
      const spent = this.spentIn(ACCOUNT_SCOPE, 'daily', now) + this.held();
      if (spent + hold.amountNano > this.dailyLimit) {
        return {
          code: 'daily_spend_limit_reached',
          details: { limit_nano: this.dailyLimit, spent_nano: spent, required_nano: hold.amountNano, resets_at: labelEnd('daily', windowLabel('daily', now)) },
        };
      }
    }
    if (hold.amountNano > this.available())
      return { code: 'insufficient_quota', details: { available_nano: this.available(), required_nano: hold.amountNano } };
    return null;
  }

  private placeHold(account_id: string, hold: PlaceHold, now: number): Prediction {
    if (hold.amountNano <= 0n) return refuse('invalid_amount');
    if (this.holds.get(hold.holdId)?.status === 'open') return refuse('hold_exists');
    const refused = this.refusal(hold, now);
    if (refused) return refuse(refused.code, refused.details);
    const limit = hold.keyLimit ?? null;
    const expiresAt = now + hold.ttlMs;
    return {
      outcome: {
        events: [
          {
            type: 'HoldPlaced',
            data: {
              account_id,
              hold_id: hold.holdId,
              key_id: hold.keyId,
              amount_nano: String(hold.amountNano),
              model: hold.model,
              endpoint: hold.endpoint,
              expires_at: iso(expiresAt),
              key_limit: limit === null ? null : { limit_nano: String(limit.limitNano), reset: limit.reset },
            },
          },
        ],
      },
      commit: () => {
        this.holds.set(hold.holdId, { keyId: hold.keyId, amount: hold.amountNano, expiresAt, status: 'open' });
        this.keyLimit.set(hold.keyId, limit);
        this.openIds.add(hold.holdId);
      },
    };
  }

  private keyWindowData(account_id: string, keyId: string, limit: KeyLimit, now: number, charged: bigint) {
    const label = windowLabel(limit.reset, now);
    return {
      account_id,
      key_id: keyId,
      reset: limit.reset,
      limit_nano: String(limit.limitNano),
      charged_nano: String(charged),
      window_start: labelStart(limit.reset, label),
      resets_at: labelEnd(limit.reset, label),
    };
  }

  private charge(
    account_id: string,
    holdId: string,
    amount: bigint,
    stats: GenerationStats,
    meters: MeterUsage | undefined,
    now: number,
    reaped = false,
  ): Prediction {
    const hold = this.holds.get(holdId);
    if (hold?.status !== 'open') return refuse('hold_not_open', { hold_id: holdId });
    if (amount < 0n) return refuse('invalid_amount');
    if (stats.completion_tokens === 0 || amount === 0n) {
      return {
        outcome: { events: [{ type: 'HoldReleased', data: { account_id, hold_id: holdId, key_id: hold.keyId, reason: 'zero_completion', ...stats } }] },
        commit: () => this.close(holdId, 'released'),
      };
    }
    // A charge that names tokens only is billed by them.
    const usage = meters ?? tokenMeters(stats);
    const events: AccountEvent[] = [
      {
        type: 'UsageCharged',
        data: {
          account_id,
          hold_id: holdId,
          key_id: hold.keyId,
          amount_nano: String(amount),
          charged_at: iso(now),
          exceeded_hold_nano: String(amount > hold.amount ? amount - hold.amount : 0n),
          ...stats,
          usage,
          ...(reaped ? { reaped: true as const } : {}),
        },
      },
    ];
    const { events: crossed, commit } = this.crossings(account_id, hold.keyId, amount, now);
    return {
      outcome: { events: [...events, ...crossed] },
      commit: () => {
        this.close(holdId, 'charged');
        if (reaped) hold.reaped = { charged: amount, usage };
        commit();
      },
    };
  }

  /**
   * Issue 41 D: the own charge of the process whose hold the reaper settled: what it charges
   * beyond the reaper's charge, once; nothing when it delivered no more.
   */
  private correct(
    account_id: string,
    holdId: string,
    hold: RefHold,
    amount: bigint,
    stats: GenerationStats,
    meters: MeterUsage | undefined,
    now: number,
  ): Prediction {
    const reaped = hold.reaped!;
    if (amount < 0n) return refuse('invalid_amount');
    const total = stats.completion_tokens === 0 ? 0n : amount;
    if (total <= reaped.charged) return { outcome: { events: [] }, commit: () => undefined };
    const delta = total - reaped.charged;
    const usage = meters ?? tokenMeters(stats);
    const event: AccountEvent = {
      type: 'UsageCorrected',
      data: {
        account_id,
        hold_id: holdId,
        key_id: hold.keyId,
        amount_nano: String(delta),
        total_nano: String(total),
        charged_at: iso(now),
        ...stats,
        usage,
        usage_added: minus(usage, reaped.usage),
      },
    };
    const { events: crossed, commit } = this.crossings(account_id, hold.keyId, delta, now);
    return {
      outcome: { events: [event, ...crossed] },
      commit: () => {
        hold.reaped = { charged: total, usage };
        commit();
      },
    };
  }

  /** The threshold events a charge of `amount` on `keyId` at `now` records, and its effect on the model. */
  private crossings(account_id: string, keyId: string, amount: bigint, now: number): { events: AccountEvent[]; commit: () => void } {
    const events: AccountEvent[] = [];
    const marks: (() => void)[] = [];
    const hold = { keyId };

    const limit = this.keyLimit.get(hold.keyId);
    if (limit) {
      const { limitNano, reset } = limit;
      const before = this.spentIn(hold.keyId, reset, now);
      const after = before + amount;
      const id = `${reset}|${windowLabel(reset, now)}|${limitNano}`;
      const alreadyReached = this.lastReached.get(hold.keyId) === id;
      const data = this.keyWindowData(account_id, hold.keyId, limit, now, after);
      // Issue 41 item 18: the warning at 80% first, also when the same charge reaches the limit.
      if (!alreadyReached && before * 10n < limitNano * 8n && after * 10n >= limitNano * 8n) events.push({ type: 'KeySpendCapWarning', data });
      if (before < limitNano && after >= limitNano && !alreadyReached) {
        events.push({ type: 'KeySpendCapReached', data: { ...data, trigger: 'charge' } });
        marks.push(() => this.markReached(hold.keyId, limit, id));
      }
    }

    if (this.dailyLimit !== null) {
      const before = this.spentIn(ACCOUNT_SCOPE, 'daily', now);
      const day = windowLabel('daily', now);
      if (before < this.dailyLimit && before + amount >= this.dailyLimit && !this.dailyReached.has(day)) {
        events.push(this.dailyReachedEvent(account_id, before + amount, now, 'charge'));
        marks.push(() => this.dailyReached.add(day));
      }
    }

    const balance = this.balance();
    if (balance >= BALANCE_LOW_NANO && balance - amount < BALANCE_LOW_NANO) {
      events.push({ type: 'BalanceLow', data: { account_id, balance_nano: String(balance - amount), threshold_nano: String(BALANCE_LOW_NANO) } });
    }

    return {
      events,
      commit: () => {
        this.charged += amount;
        for (const reset of RESETS) this.addSpend(hold.keyId, reset, now, amount);
        this.addSpend(ACCOUNT_SCOPE, 'daily', now, amount);
        for (const mark of marks) mark();
      },
    };
  }

  private markReached(keyId: string, limit: KeyLimit, id: string): void {
    this.lastReached.set(keyId, id);
    this.keyLimit.set(keyId, limit);
  }

  private close(holdId: string, status: RefHold['status']): void {
    this.holds.get(holdId)!.status = status;
    this.openIds.delete(holdId);
  }

  private addSpend(scope: string, reset: LimitReset, ms: number, amount: bigint): void {
    const windows = this.spend.get(`${scope}|${reset}`) ?? new Map<string, bigint>();
    const label = windowLabel(reset, ms);
    windows.set(label, (windows.get(label) ?? 0n) + amount);
    this.spend.set(`${scope}|${reset}`, windows);
  }

  private dailyReachedEvent(account_id: string, charged: bigint, now: number, trigger: 'charge' | 'refusal'): AccountEvent {
    const day = windowLabel('daily', now);
    return {
      type: 'DailyLimitReached',
      data: {
        account_id,
        limit_nano: String(this.dailyLimit),
        charged_nano: String(charged),
        day: labelStart('daily', day)!,
        resets_at: labelEnd('daily', day)!,
        trigger,
      },
    };
  }

  private expire(account_id: string, now: number, max: number): Prediction {
    const due = this.openHolds()
      .filter(([, h]) => h.expiresAt <= now)
      .sort(([a, x], [b, y]) => (x.expiresAt !== y.expiresAt ? x.expiresAt - y.expiresAt : a < b ? -1 : 1))
      .slice(0, max);
    return {
      outcome: {
        events: due.map(([hold_id, h]) => ({
          type: 'HoldExpired' as const,
          data: { account_id, hold_id, key_id: h.keyId, amount_nano: String(h.amount), expires_at: iso(h.expiresAt) },
        })),
      },
      commit: () => due.forEach(([id]) => this.close(id, 'expired')),
    };
  }

  private recordRefusal(account_id: string, hold: PlaceHold, now: number): Prediction {
    const refused = this.refusal(hold, now);
    const none: Prediction = { outcome: { events: [] }, commit: () => undefined };
    if (refused?.code === 'daily_spend_limit_reached') {
      const day = windowLabel('daily', now);
      if (this.dailyReached.has(day)) return none;
      return {
        outcome: { events: [this.dailyReachedEvent(account_id, this.spentIn(ACCOUNT_SCOPE, 'daily', now), now, 'refusal')] },
        commit: () => void this.dailyReached.add(day),
      };
    }
    if (hold.keyLimit && refused?.code === CAP_CODE[hold.keyLimit.reset]) {
      const limit = hold.keyLimit;
      const id = `${limit.reset}|${windowLabel(limit.reset, now)}|${limit.limitNano}`;
      if (this.lastReached.get(hold.keyId) === id) return none;
      const charged = this.spentIn(hold.keyId, limit.reset, now);
      // Issue 41 item 18: a refusal is "reached" only when the charges are at the limit already.
      if (charged < limit.limitNano) return none;
      return {
        outcome: { events: [{ type: 'KeySpendCapReached', data: { ...this.keyWindowData(account_id, hold.keyId, limit, now, charged), trigger: 'refusal' } }] },
        commit: () => this.markReached(hold.keyId, limit, id),
      };
    }
    return none;
  }
}
