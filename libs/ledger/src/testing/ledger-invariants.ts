import type { AccountEvent } from '../account';
import type { LimitReset } from '../spend-window';
import { windowLabel } from './reference-ledger';

/**
 * The invariants, checked on the event log alone as it grows (what a ledger auditor
 * can see): it knows no decider state and no reference model. Throws on the first violation.
 */
const BALANCE_LOW_NANO = 1_000_000_000n;

interface AuditHold {
  seq: number;
  amount: bigint;
  keyId: string;
  keyLimit: { limit: bigint; reset: LimitReset } | null;
  dailyLimit: bigint | null;
  resolved: boolean;
}

/**
 * The charges of one spend window against the limit of its latest admission. Every hold charged
 * in a window was open at the latest admission among the holds placed or charged in it, and that
 * admission checked charges + open holds + itself against its limit: so, whatever the
 * interleaving, the charges (without counted over-hold) cannot exceed that limit.
 */
interface WindowAudit {
  chargedWithinHolds: bigint;
  latestAdmission: number;
  limit: bigint | null;
}

export class LedgerInvariants {
  private seq = 0;
  private credits = 0n;
  private charges = 0n;
  private adjusted = 0n;
  private held = 0n;
  private dailyLimit: bigint | null = null;
  private dailyLimitEpoch = 0;
  private lastChargeCrossedBalanceLow = false;
  private readonly holds = new Map<string, AuditHold>();
  private readonly windows = new Map<string, WindowAudit>();
  private readonly fired = new Set<string>();

  get chargedNano(): bigint {
    return this.charges;
  }

  /** `now` is when the event's decision was made (HoldPlaced does not record it). */
  observe(event: AccountEvent, now: number): void {
    this.seq++;
    switch (event.type) {
      case 'CreditsAdded':
        this.credits += BigInt(event.data.amount_nano);
        return;
      case 'BalanceAdjusted': {
        // Issue 23: an adjustment never takes the available balance below zero, as no hold may.
        const amount = BigInt(event.data.amount_nano);
        const balanceBefore = this.credits - this.charges + this.adjusted;
        this.adjusted += amount;
        this.check(
          amount !== 0n && (event.data.kind === 'adjustment' || amount > 0n),
          `adjustment ${event.data.adjustment_id} of ${amount} as a ${event.data.kind}`,
        );
        this.check(amount > 0n || this.available() >= 0n, `adjustment ${event.data.adjustment_id} took the available balance to ${this.available()}`);
        this.lastChargeCrossedBalanceLow = balanceBefore >= BALANCE_LOW_NANO && balanceBefore + amount < BALANCE_LOW_NANO;
        return;
      }
      case 'DailyLimitSet':
        this.dailyLimit = event.data.limit_nano === null ? null : BigInt(event.data.limit_nano);
        this.dailyLimitEpoch++;
        return;
      case 'HoldPlaced':
        return this.placed(event.data, now);
      case 'UsageCharged':
        return this.charged(event.data);
      case 'HoldReleased':
      case 'HoldExpired':
        this.resolve(event.data.hold_id);
        return;
      case 'KeySpendCapWarning':
      case 'KeySpendCapReached': {
        const { key_id, reset, window_start, limit_nano } = event.data;
        const window = `${key_id}|${reset}|${window_start}|${limit_nano}`;
        this.once(`${event.type}|${window}`);
        if (event.type === 'KeySpendCapWarning')
          this.check(!this.fired.has(`KeySpendCapReached|${window}`), `a warning after the cap was reached in ${window}`);
        return;
      }
      case 'DailyLimitReached':
        this.once(`DailyLimitReached|${event.data.day}|${this.dailyLimitEpoch}`);
        return;
      case 'BalanceLow':
        this.check(this.lastChargeCrossedBalanceLow, 'BalanceLow without a charge crossing the threshold (or twice for one)');
        this.lastChargeCrossedBalanceLow = false;
        return;
    }
  }

  private placed(data: Extract<AccountEvent, { type: 'HoldPlaced' }>['data'], now: number): void {
    this.check(!this.holds.has(data.hold_id), `hold ${data.hold_id} placed twice`);
    const keyLimit = data.key_limit ? { limit: BigInt(data.key_limit.limit_nano), reset: data.key_limit.reset } : null;
    const hold: AuditHold = { seq: this.seq, amount: BigInt(data.amount_nano), keyId: data.key_id, keyLimit, dailyLimit: this.dailyLimit, resolved: false };
    this.holds.set(data.hold_id, hold);
    this.held += hold.amount;
    // Invariant 2: a reservation never takes the available balance below zero.
    this.check(this.available() >= 0n, `hold ${data.hold_id} took the available balance to ${this.available()}`);
    for (const [window, limit] of this.windowsOf(hold, now)) this.admitted(window, hold.seq, limit, 0n);
  }

  private charged(data: Extract<AccountEvent, { type: 'UsageCharged' }>['data']): void {
    const hold = this.resolve(data.hold_id);
    const amount = BigInt(data.amount_nano);
    const exceeded = BigInt(data.exceeded_hold_nano ?? '0');
    // Invariant 1: charged <= held, except over-hold that is counted exactly.
    this.check(
      exceeded === (amount > hold.amount ? amount - hold.amount : 0n),
      `hold ${data.hold_id}: over-hold ${exceeded} miscounted for ${amount} on ${hold.amount}`,
    );
    const balanceBefore = this.credits - this.charges + this.adjusted;
    this.charges += amount;
    this.lastChargeCrossedBalanceLow = balanceBefore >= BALANCE_LOW_NANO && balanceBefore - amount < BALANCE_LOW_NANO;
    for (const [window, limit] of this.windowsOf(hold, Date.parse(data.charged_at!))) this.admitted(window, hold.seq, limit, amount - exceeded);
  }

  /** Invariant 1: every hold has at most one terminal event, and only after it was placed. */
  private resolve(holdId: string): AuditHold {
    const hold = this.holds.get(holdId);
    this.check(hold !== undefined, `hold ${holdId} resolved before it was placed`);
    this.check(!hold!.resolved, `hold ${holdId} resolved twice`);
    hold!.resolved = true;
    this.held -= hold!.amount;
    return hold!;
  }

  /** The spend windows a hold's charge or placement at `at` falls in, with the limit it was admitted under. */
  private windowsOf(hold: AuditHold, at: number): [string, bigint | null][] {
    const windows: [string, bigint | null][] = [[`account|daily|${windowLabel('daily', at)}`, hold.dailyLimit]];
    if (hold.keyLimit) windows.push([`${hold.keyId}|${hold.keyLimit.reset}|${windowLabel(hold.keyLimit.reset, at)}`, hold.keyLimit.limit]);
    return windows;
  }

  private admitted(key: string, seq: number, limit: bigint | null, charged: bigint): void {
    const window = this.windows.get(key) ?? { chargedWithinHolds: 0n, latestAdmission: -1, limit: null };
    window.chargedWithinHolds += charged;
    if (seq > window.latestAdmission) Object.assign(window, { latestAdmission: seq, limit });
    this.windows.set(key, window);
    if (window.limit !== null)
      this.check(window.chargedWithinHolds <= window.limit, `window ${key} overshot its limit ${window.limit}: ${window.chargedWithinHolds}`);
  }

  private available(): bigint {
    return this.credits - this.charges + this.adjusted - this.held;
  }

  private once(what: string): void {
    this.check(!this.fired.has(what), `${what} recorded twice`);
    this.fired.add(what);
  }

  private check(ok: boolean, violation: string): void {
    if (!ok) throw new Error(`invariant violated: ${violation}`);
  }
}
