import type { RecordedEvent } from '@svc/eventstore';
import type { Nano } from '@svc/platform';
import { accountStream, heldNano, type AccountEvent, type AccountState, type BudgetData } from '../account';
import { chargedInWindow, windowEndMs, windowStartMs, type Period } from '../spend-window';
import type { AccountReplay, AccountReport, KeyReport, Violation } from './model';

const PERIODS: readonly Period[] = ['daily', 'weekly', 'monthly'];

/** An account event of one type. */
type EventOf<T extends AccountEvent['type']> = Extract<AccountEvent, { type: T }>;

interface OpenHoldEntry {
  amount: Nano;
  keyId: string;
  budgets: readonly BudgetData[];
}

/** One account's replay and the auditor's own account of its events. */
export class AccountAudit {
  readonly stream: string;
  state: AccountState;
  /** The same events folded a second time from a fresh initial state (invariant 4). */
  private twin: AccountState;
  revision = -1n;
  events = 0;
  /** The audit instant was passed: the rest of the stream is after it. */
  private stopped = false;
  private credits = 0n;
  private charges = 0n;
  private adjustments = 0n;
  private readonly open = new Map<string, OpenHoldEntry>();
  /** Every resolved hold id and the revision of its terminal event; grows with history, ids only. */
  private readonly resolved = new Map<string, bigint>();
  readonly overHold = { count: 0, nano: 0n };
  readonly reaped = { count: 0, chargedNano: 0n, released: 0, corrections: 0, correctedNano: 0n };
  /** Holds the reaper settled, which a correction may follow, with the budgets the correction counts against. */
  private readonly reapedHolds = new Map<string, readonly BudgetData[]>();
  /** Charges per key per UTC day of the charge: what key_usage_daily should hold. */
  readonly keyDays = new Map<string, Map<string, Nano>>();
  /** Issue 44: charges per guardrail budget per UTC day: what guardrail_budget_charges should hold. */
  readonly budgetDays = new Map<string, Map<string, Nano>>();

  constructor(
    readonly accountId: string,
    private readonly replay: AccountReplay,
    private readonly cutAt: number | null,
    private readonly violations: Violation[],
  ) {
    this.stream = accountStream(accountId);
    this.state = replay.initialState();
    this.twin = replay.initialState();
  }

  /** Returns whether the event was replayed. */
  observe(recorded: RecordedEvent): boolean {
    if (this.stopped) return false;
    const decidedAt = Date.parse(String(recorded.metadata?.at));
    if (Number.isNaN(decidedAt)) this.violate(0, recorded, 'has no metadata.at: when it was decided is unknown');
    if (this.cutAt !== null && !(decidedAt <= this.cutAt)) {
      this.stopped = true;
      return false;
    }
    const event = recorded as unknown as AccountEvent;
    this.check(event, recorded);
    this.state = this.replay.evolve(this.state, event);
    this.twin = this.replay.evolve(this.twin, event);
    this.revision = recorded.revision;
    this.events++;
    return true;
  }

  private check(event: AccountEvent, recorded: RecordedEvent): void {
    switch (event.type) {
      case 'CreditsAdded':
        this.credits += BigInt(event.data.amount_nano);
        return;
      case 'BalanceAdjusted':
        return this.checkAdjustment(event, recorded);
      case 'HoldPlaced':
        return this.checkHoldPlaced(event, recorded);
      case 'UsageCharged':
        return this.checkCharge(event, recorded);
      case 'HoldReleased':
      case 'HoldExpired':
        return this.checkHoldEnded(event, recorded);
      case 'UsageCorrected':
        return this.checkCorrection(event, recorded);
    }
  }

  private checkAdjustment(event: EventOf<'BalanceAdjusted'>, recorded: RecordedEvent): void {
    const amount = BigInt(event.data.amount_nano);
    this.adjustments += amount;
    const available = this.credits - this.charges + this.adjustments - this.openNano();
    // Issue 23: an adjustment may lower the balance, but no more than a hold may.
    if (amount < 0n && available < 0n)
      this.violate(2, recorded, `adjustment ${event.data.adjustment_id} of ${amount} took the available balance to ${available}`);
    if (amount === 0n || (event.data.kind === 'credit_note' && amount < 0n))
      this.violate(2, recorded, `adjustment ${event.data.adjustment_id} is a ${event.data.kind} of ${amount}`);
  }

  private checkHoldPlaced(event: EventOf<'HoldPlaced'>, recorded: RecordedEvent): void {
    const { hold_id, amount_nano, key_id } = event.data;
    // Hold ids are generation ids: unique, and the generations projection is keyed by them.
    if (this.open.has(hold_id)) this.violate(1, recorded, `hold ${hold_id} placed again while open`);
    else if (this.resolved.has(hold_id))
      this.violate(1, recorded, `hold ${hold_id} placed again after it was resolved at revision ${this.resolved.get(hold_id)}`);
    const budgets = event.data.budgets ?? [];
    this.open.set(hold_id, { amount: BigInt(amount_nano), keyId: key_id, budgets });
    const available = this.credits - this.charges + this.adjustments - this.openNano();
    if (available < 0n) this.violate(2, recorded, `hold ${hold_id} of ${amount_nano} took the available balance to ${available}`);
    const at = Date.parse(String(recorded.metadata?.at));
    if (!Number.isNaN(at)) for (const budget of budgets) this.checkBudget(budget, at, hold_id, recorded);
  }

  /** Invariant 5 (issue 44): with this hold, the budget's window holds no more than its limit in charges and open holds. */
  private checkBudget(budget: BudgetData, atMs: number, holdId: string, recorded: RecordedEvent): void {
    const days = this.budgetDays.get(budget.bucket);
    let used = 0n;
    if (days) {
      // Windows start at a UTC midnight, so a window is a range of days.
      const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);
      const from = budget.reset === 'never' ? '' : dayOf(windowStartMs(budget.reset, atMs));
      const to = budget.reset === 'never' ? '~' : dayOf(windowEndMs(budget.reset, atMs));
      for (const [day, amount] of days) if (day >= from && day < to) used += amount;
    }
    for (const hold of this.open.values()) if (hold.budgets.some((b) => b.bucket === budget.bucket)) used += hold.amount;
    if (used > BigInt(budget.limit_nano)) {
      this.violate(5, recorded, `hold ${holdId} took budget ${budget.bucket} to ${used} in its ${budget.reset} window, past its limit of ${budget.limit_nano}`);
    }
  }

  private checkCharge(event: EventOf<'UsageCharged'>, recorded: RecordedEvent): void {
    const hold = this.resolve(event.data.hold_id, recorded);
    const amount = BigInt(event.data.amount_nano);
    this.charges += amount;
    // A charge counts on the day of its own instant (charged_at, the spend windows' rule);
    // older events lack it, and AggregateStore stamps both from one clock reading.
    const day = utcDay(event.data.charged_at ?? recorded.metadata?.at);
    this.addKeyDay(event.data.key_id, day, amount);
    if (!hold) return;
    for (const budget of hold.budgets) addDay(this.budgetDays, budget.bucket, day, amount);
    if (event.data.key_id !== hold.keyId) this.violate(3, recorded, `hold ${event.data.hold_id} of key ${hold.keyId} is charged to key ${event.data.key_id}`);
    const excess = amount > hold.amount ? amount - hold.amount : 0n;
    // Absent on events written before the field existed: their excess is counted all the same.
    const recordedExcess = event.data.exceeded_hold_nano;
    if (recordedExcess !== undefined && BigInt(recordedExcess) !== excess) {
      this.violate(
        1,
        recorded,
        `hold ${event.data.hold_id} of ${hold.amount} charged ${amount}: exceeded_hold_nano is ${recordedExcess}, the excess ${excess}`,
      );
    }
    if (excess > 0n) {
      this.overHold.count++;
      this.overHold.nano += excess;
    }
    if (event.data.reaped) {
      this.reaped.count++;
      this.reaped.chargedNano += amount;
      this.reapedHolds.set(event.data.hold_id, hold.budgets);
    }
  }

  private checkHoldEnded(event: EventOf<'HoldReleased' | 'HoldExpired'>, recorded: RecordedEvent): void {
    const hold = this.resolve(event.data.hold_id, recorded);
    if (event.type === 'HoldReleased' && event.data.reaped) {
      this.reaped.count++;
      this.reaped.released++;
      this.reapedHolds.set(event.data.hold_id, hold?.budgets ?? []);
    }
  }

  private checkCorrection(event: EventOf<'UsageCorrected'>, recorded: RecordedEvent): void {
    const amount = BigInt(event.data.amount_nano);
    this.charges += amount;
    this.addKeyDay(event.data.key_id, utcDay(event.data.charged_at), amount);
    for (const budget of this.reapedHolds.get(event.data.hold_id) ?? []) addDay(this.budgetDays, budget.bucket, utcDay(event.data.charged_at), amount);
    this.reaped.corrections++;
    this.reaped.correctedNano += amount;
    // Only a hold the reaper settled may be corrected, by a positive amount.
    if (!this.reapedHolds.has(event.data.hold_id)) this.violate(1, recorded, `correction of hold ${event.data.hold_id}, which the hold reaper did not settle`);
    if (amount <= 0n) this.violate(1, recorded, `correction of hold ${event.data.hold_id} by ${amount}`);
  }

  /** Invariant 1: one terminal event per hold, after its HoldPlaced. */
  private resolve(holdId: string, recorded: RecordedEvent): OpenHoldEntry | null {
    const hold = this.open.get(holdId);
    if (hold) {
      this.open.delete(holdId);
      this.resolved.set(holdId, recorded.revision);
      return hold;
    }
    const first = this.resolved.get(holdId);
    this.violate(
      1,
      recorded,
      first === undefined
        ? `${recorded.type} for hold ${holdId}, which was never placed`
        : `second terminal event for hold ${holdId} (first at revision ${first})`,
    );
    return null;
  }

  private addKeyDay(keyId: string, day: string, amount: Nano): void {
    addDay(this.keyDays, keyId, day, amount);
  }

  /** Open holds per guardrail budget: what guardrail_hold_budgets' open rows should hold. */
  budgetHeld(): Map<string, Nano> {
    const held = new Map<string, Nano>();
    for (const hold of this.open.values()) for (const b of hold.budgets) held.set(b.bucket, (held.get(b.bucket) ?? 0n) + hold.amount);
    return held;
  }

  private openNano(): Nano {
    let sum = 0n;
    for (const hold of this.open.values()) sum += hold.amount;
    return sum;
  }

  /** End-of-replay checks: invariants 3 (the log's charges) and 4 (replaying twice). */
  finish(): void {
    const total = { stream: this.stream, revision: null };
    if (this.state.chargedNano !== this.charges) {
      this.violations.push({
        ...total,
        invariant: 3,
        message: `the charges in the log sum to ${this.charges} but the replayed lifetime usage is ${this.state.chargedNano}`,
      });
    }
    const replayedAdjustments = this.state.adjustedNano ?? 0n;
    if (replayedAdjustments !== this.adjustments) {
      this.violations.push({
        ...total,
        invariant: 3,
        message: `the adjustments in the log sum to ${this.adjustments} but the replayed state holds ${replayedAdjustments}`,
      });
    }
    const keyIds = new Set([...this.keyDays.keys(), ...Object.keys(this.state.keys)]);
    for (const keyId of [...keyIds].sort()) {
      let logged = 0n;
      for (const amount of this.keyDays.get(keyId)?.values() ?? []) logged += amount;
      const replayed = this.state.keys[keyId]?.lifetimeNano ?? 0n;
      if (replayed !== logged)
        this.violations.push({
          ...total,
          invariant: 3,
          message: `key ${keyId}: its charges in the log sum to ${logged} but its replayed lifetime usage is ${replayed}`,
        });
    }
    if (canonical(this.state) !== canonical(this.twin)) {
      this.violations.push({ ...total, revision: this.revision, invariant: 4, message: 'replaying the same events twice gave different states' });
    }
  }

  report(atMs: number): AccountReport {
    const { state } = this;
    const held = heldNano(state);
    const keys = Object.entries(state.keys)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([keyId, spend]): KeyReport => {
        let keyHeld = 0n;
        for (const hold of state.holds.values()) if (hold.keyId === keyId) keyHeld += hold.amountNano;
        const windows = Object.fromEntries(PERIODS.map((p) => [p, chargedInWindow(spend.windows[p], windowStartMs(p, atMs))])) as Record<Period, Nano>;
        return { keyId, spend: { ...windows, lifetime: spend.lifetimeNano }, heldNano: keyHeld };
      });
    return {
      accountId: this.accountId,
      revision: this.revision,
      events: this.events,
      creditsNano: state.creditsNano,
      chargedNano: state.chargedNano,
      adjustedNano: state.adjustedNano,
      openHolds: state.holds.size,
      heldNano: held,
      availableNano: state.creditsNano - state.chargedNano + state.adjustedNano - held,
      overHold: { ...this.overHold },
      reaped: { ...this.reaped },
      keys,
    };
  }

  private violate(invariant: Violation['invariant'], recorded: RecordedEvent, message: string): void {
    this.violations.push({ invariant, stream: this.stream, revision: recorded.revision, message });
  }
}

function addDay(into: Map<string, Map<string, Nano>>, id: string, day: string, amount: Nano): void {
  const days = into.get(id) ?? new Map<string, Nano>();
  days.set(day, (days.get(day) ?? 0n) + amount);
  into.set(id, days);
}

function utcDay(at: unknown): string {
  const ms = Date.parse(String(at));
  return Number.isNaN(ms) ? 'unknown' : new Date(ms).toISOString().slice(0, 10);
}

/** JSON with bigints, so that two states compare byte for byte. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));
}
