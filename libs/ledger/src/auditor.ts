import type { Decider, EventStore, Position, RecordedEvent } from '@svc/eventstore';
import { START } from '@svc/eventstore';
import { type Nano, nanoToUsdString } from '@svc/platform';
import type { SqlExecutor, SqlRunner } from '@svc/platform';
import { accountDecider, accountStream, heldNano, type AccountEvent, type AccountState } from './account';
import { chargedInWindow, windowStartMs, type Period } from './spend-window';

/**
 * The ledger auditor (issue 4, `cli ledger audit`): replays the `account-*` streams from the
 * event log alone, up to an instant, reports each account's balance, open holds and per-key
 * window spend at that instant, checks the issue's invariants on the log, and compares the
 * replayed figures with the credits and key usage projections.
 *
 * The invariant checks keep their own sums from the events' data instead of trusting the
 * replayed state: a bug in `evolve` then shows up as a disagreement instead of hiding itself.
 */

const STREAM_PREFIX = 'account-';
const PERIODS: readonly Period[] = ['daily', 'weekly', 'monthly'];

/** The replay under audit. Tests pass faulty ones to show that the checks catch them. */
export type AccountReplay = Pick<Decider<unknown, AccountState, AccountEvent>, 'initialState' | 'evolve'>;

export interface AuditOptions {
  /** Audit only this account. */
  account?: string;
  /**
   * The instant to audit at: each account's history up to its first event decided (metadata.at)
   * after it. A stream's state is a prefix of its events, so an event that a lagging clock
   * stamped earlier than one before it is cut with it. Absent: the whole log.
   */
  at?: Date;
  /** Where the spend windows are measured when `at` is absent (default: the wall clock). */
  now?: Date;
  /** Log positions (projection checkpoints) at which to capture what the projections should hold. */
  captureAt?: readonly Position[];
  replay?: AccountReplay;
}

export interface Violation {
  /** The issue's invariant (1-4), or 0 for an event the replay cannot place. */
  invariant: 0 | 1 | 2 | 3 | 4;
  stream: string;
  /** The event at fault; null when the fault is in the account's totals. */
  revision: bigint | null;
  message: string;
}

export interface KeyReport {
  keyId: string;
  /** Charges in the window containing the audit instant, and over the key's lifetime. */
  spend: Record<Period | 'lifetime', Nano>;
  /** Open holds of the key: they count against its limit but are not spend yet. */
  heldNano: Nano;
}

export interface AccountReport {
  accountId: string;
  /** Last revision replayed; -1n when none was. */
  revision: bigint;
  events: number;
  creditsNano: Nano;
  /** Lifetime usage. */
  chargedNano: Nano;
  /** Issue 23: operator credit notes and adjustments, signed. */
  adjustedNano: Nano;
  openHolds: number;
  heldNano: Nano;
  availableNano: Nano;
  /** Charges above their hold (the provider counted more input than estimated), charged in full. */
  overHold: { count: number; nano: Nano };
  /**
   * Issue 41 D: holds the hold reaper settled from what their process recorded (charged, or
   * released when nothing was recorded); such a charge may be short of what was delivered. The
   * corrections are the charges those processes, alive after all, made on top.
   */
  reaped: { count: number; chargedNano: Nano; released: number; corrections: number; correctedNano: Nano };
  keys: KeyReport[];
}

/** What the credits and key usage projections should hold at one log position. */
export interface ProjectedFigures {
  /** credit_accounts, per opened account. */
  accounts: Map<string, { purchasedNano: Nano; usedNano: Nano; adjustedNano: Nano; heldNano: Nano; openHolds: number }>;
  /** credit_holds: the open holds. */
  holds: Map<string, { accountId: string; amountNano: Nano }>;
  /** key_usage_daily: key -> UTC day (YYYY-MM-DD) -> charges. */
  keyUsage: Map<string, Map<string, Nano>>;
}

export interface LedgerAudit {
  /** The instant of the report: `at`, or `now` for a whole-log audit. */
  at: Date;
  /** True when history was cut at `at`. */
  cut: boolean;
  events: number;
  accounts: AccountReport[];
  violations: Violation[];
  captured: Map<Position, ProjectedFigures>;
}

interface OpenHoldEntry {
  amount: Nano;
  keyId: string;
}

/** One account's replay and the auditor's own account of its events. */
class AccountAudit {
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
  /** Holds the reaper settled, which a correction may follow. */
  private readonly reapedHolds = new Set<string>();
  /** Charges per key per UTC day of the charge: what key_usage_daily should hold. */
  readonly keyDays = new Map<string, Map<string, Nano>>();

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
      case 'BalanceAdjusted': {
        const amount = BigInt(event.data.amount_nano);
        this.adjustments += amount;
        const available = this.credits - this.charges + this.adjustments - this.openNano();
        // Issue 23: an adjustment may lower the balance, but no more than a hold may.
        if (amount < 0n && available < 0n)
          this.violate(2, recorded, `adjustment ${event.data.adjustment_id} of ${amount} took the available balance to ${available}`);
        if (amount === 0n || (event.data.kind === 'credit_note' && amount < 0n))
          this.violate(2, recorded, `adjustment ${event.data.adjustment_id} is a ${event.data.kind} of ${amount}`);
        return;
      }
      case 'HoldPlaced': {
        const { hold_id, amount_nano, key_id } = event.data;
        // Hold ids are generation ids: unique, and the generations projection is keyed by them.
        if (this.open.has(hold_id)) this.violate(1, recorded, `hold ${hold_id} placed again while open`);
        else if (this.resolved.has(hold_id))
          this.violate(1, recorded, `hold ${hold_id} placed again after it was resolved at revision ${this.resolved.get(hold_id)}`);
        this.open.set(hold_id, { amount: BigInt(amount_nano), keyId: key_id });
        const available = this.credits - this.charges + this.adjustments - this.openNano();
        if (available < 0n) this.violate(2, recorded, `hold ${hold_id} of ${amount_nano} took the available balance to ${available}`);
        return;
      }
      case 'UsageCharged': {
        const hold = this.resolve(event.data.hold_id, recorded);
        const amount = BigInt(event.data.amount_nano);
        this.charges += amount;
        // A charge counts on the day of its own instant (charged_at, the spend windows' rule);
        // older events lack it, and AggregateStore stamps both from one clock reading.
        this.addKeyDay(event.data.key_id, utcDay(event.data.charged_at ?? recorded.metadata?.at), amount);
        if (!hold) return;
        if (event.data.key_id !== hold.keyId)
          this.violate(3, recorded, `hold ${event.data.hold_id} of key ${hold.keyId} is charged to key ${event.data.key_id}`);
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
          this.reapedHolds.add(event.data.hold_id);
        }
        return;
      }
      case 'HoldReleased':
      case 'HoldExpired':
        this.resolve(event.data.hold_id, recorded);
        if (event.type === 'HoldReleased' && event.data.reaped) {
          this.reaped.count++;
          this.reaped.released++;
          this.reapedHolds.add(event.data.hold_id);
        }
        return;
      case 'UsageCorrected': {
        const amount = BigInt(event.data.amount_nano);
        this.charges += amount;
        this.addKeyDay(event.data.key_id, utcDay(event.data.charged_at), amount);
        this.reaped.corrections++;
        this.reaped.correctedNano += amount;
        // Only a hold the reaper settled may be corrected, by a positive amount.
        if (!this.reapedHolds.has(event.data.hold_id))
          this.violate(1, recorded, `correction of hold ${event.data.hold_id}, which the hold reaper did not settle`);
        if (amount <= 0n) this.violate(1, recorded, `correction of hold ${event.data.hold_id} by ${amount}`);
        return;
      }
    }
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
    const days = this.keyDays.get(keyId) ?? new Map<string, Nano>();
    days.set(day, (days.get(day) ?? 0n) + amount);
    this.keyDays.set(keyId, days);
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

function utcDay(at: unknown): string {
  const ms = Date.parse(String(at));
  return Number.isNaN(ms) ? 'unknown' : new Date(ms).toISOString().slice(0, 10);
}

/** JSON with bigints, so that two states compare byte for byte. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));
}

/** Replays the log's account events in global order (or one stream in revision order). */
export class LedgerAuditor {
  private readonly accounts = new Map<string, AccountAudit>();
  private readonly violations: Violation[] = [];
  private readonly pending: Position[];
  private readonly captured = new Map<Position, ProjectedFigures>();
  private readonly replay: AccountReplay;
  private events = 0;

  constructor(private readonly options: AuditOptions = {}) {
    this.replay = options.replay ?? accountDecider;
    this.pending = [...new Set(options.captureAt ?? [])].sort();
  }

  observe(event: RecordedEvent): void {
    // Figures only change on account events, so capturing lazily, before the first event past
    // a position, captures exactly the state at that position.
    while (this.pending.length > 0 && event.position > this.pending[0]) this.capture(this.pending.shift()!);
    if (!event.stream.startsWith(STREAM_PREFIX)) return;
    const accountId = event.stream.slice(STREAM_PREFIX.length);
    if (this.options.account !== undefined && accountId !== this.options.account) return;
    let account = this.accounts.get(accountId);
    if (!account) {
      account = new AccountAudit(accountId, this.replay, this.options.at?.getTime() ?? null, this.violations);
      this.accounts.set(accountId, account);
    }
    if (account.observe(event)) this.events++;
  }

  finish(): LedgerAudit {
    for (const position of this.pending.splice(0)) this.capture(position);
    const at = this.options.at ?? this.options.now ?? new Date();
    const accounts = [...this.accounts.values()].sort((a, b) => (a.accountId < b.accountId ? -1 : 1));
    for (const account of accounts) account.finish();
    return {
      at,
      cut: this.options.at !== undefined,
      events: this.events,
      // An account whose first event is after the instant did not exist then.
      accounts: accounts.filter((a) => a.events > 0).map((a) => a.report(at.getTime())),
      violations: this.violations,
      captured: this.captured,
    };
  }

  private capture(position: Position): void {
    const figures: ProjectedFigures = { accounts: new Map(), holds: new Map(), keyUsage: new Map() };
    for (const { accountId, state, keyDays } of this.accounts.values()) {
      // The credits projection creates an account's row on AccountOpened only.
      if (state.accountId !== null) {
        const open = [...state.holds.entries()];
        figures.accounts.set(accountId, {
          purchasedNano: state.creditsNano,
          usedNano: state.chargedNano,
          adjustedNano: state.adjustedNano,
          heldNano: heldNano(state),
          openHolds: open.length,
        });
        for (const [holdId, hold] of open) figures.holds.set(holdId, { accountId, amountNano: hold.amountNano });
      }
      for (const [keyId, days] of keyDays) {
        const into = figures.keyUsage.get(keyId) ?? new Map<string, Nano>();
        for (const [day, amount] of days) into.set(day, (into.get(day) ?? 0n) + amount);
        figures.keyUsage.set(keyId, into);
      }
    }
    this.captured.set(position, figures);
  }
}

export async function auditLedger(events: AsyncIterable<RecordedEvent> | Iterable<RecordedEvent>, options: AuditOptions = {}): Promise<LedgerAudit> {
  const auditor = new LedgerAuditor(options);
  for await (const event of events) auditor.observe(event);
  return auditor.finish();
}

// ---- Comparison with the projections -------------------------------------------------------

/** A disagreement between a projection's row and the replayed log. */
export interface Mismatch {
  table: 'credit_accounts' | 'credit_holds' | 'key_usage_daily';
  /** The row: account id, hold id, or `key day`. */
  row: string;
  message: string;
}

export interface CreditRows {
  accounts: { accountId: string; purchasedNano: Nano; usedNano: Nano; adjustedNano: Nano; heldNano: Nano; openHolds: number }[];
  holds: { holdId: string; accountId: string; amountNano: Nano }[];
}

export interface KeyUsageRow {
  keyId: string;
  day: string;
  costNano: Nano;
}

/** credit_accounts and credit_holds against the figures at the credits projection's checkpoint. */
export function compareCredits(expected: ProjectedFigures, rows: CreditRows): Mismatch[] {
  const out: Mismatch[] = [];
  const seen = new Set<string>();
  for (const row of rows.accounts) {
    seen.add(row.accountId);
    const log = expected.accounts.get(row.accountId);
    if (!log) {
      out.push({ table: 'credit_accounts', row: row.accountId, message: `credit_accounts has a row for ${row.accountId}, an account the log does not open` });
      continue;
    }
    const columns = [
      ['purchased_nano', row.purchasedNano, log.purchasedNano],
      ['used_nano', row.usedNano, log.usedNano],
      ['adjusted_nano', row.adjustedNano, log.adjustedNano],
      ['held_nano', row.heldNano, log.heldNano],
      ['open_holds', BigInt(row.openHolds), BigInt(log.openHolds)],
    ] as const;
    for (const [column, projected, replayed] of columns) {
      if (projected !== replayed) {
        out.push({
          table: 'credit_accounts',
          row: row.accountId,
          message: `credit_accounts row for ${row.accountId}: ${column} ${projected} but the log says ${replayed}`,
        });
      }
    }
  }
  for (const [accountId, log] of expected.accounts) {
    if (!seen.has(accountId)) {
      out.push({
        table: 'credit_accounts',
        row: accountId,
        message: `credit_accounts has no row for ${accountId}; the log has it with ${log.purchasedNano} purchased, ${log.usedNano} used`,
      });
    }
  }
  const projectedHolds = new Map(rows.holds.map((h) => [h.holdId, h]));
  for (const [holdId, row] of projectedHolds) {
    const log = expected.holds.get(holdId);
    if (!log)
      out.push({ table: 'credit_holds', row: holdId, message: `credit_holds has hold ${holdId} of ${row.accountId} open; the log has no such open hold` });
    else if (row.amountNano !== log.amountNano || row.accountId !== log.accountId) {
      out.push({
        table: 'credit_holds',
        row: holdId,
        message: `credit_holds row for ${holdId}: ${row.amountNano} on ${row.accountId} but the log says ${log.amountNano} on ${log.accountId}`,
      });
    }
  }
  for (const [holdId, log] of expected.holds) {
    if (!projectedHolds.has(holdId))
      out.push({ table: 'credit_holds', row: holdId, message: `credit_holds lacks open hold ${holdId} of ${log.accountId} (${log.amountNano})` });
  }
  return out;
}

/**
 * key_usage_daily against the figures at the key usage projection's checkpoint, day by day: its
 * history summed is each key's lifetime usage (invariant 3), and a charge on the wrong day would
 * move a key's daily, weekly or monthly spend. `keys`: compare only these (an audit of one account).
 */
export function compareKeyUsage(expected: ProjectedFigures, rows: KeyUsageRow[], keys?: ReadonlySet<string>): Mismatch[] {
  const out: Mismatch[] = [];
  const projected = new Map<string, Nano>();
  for (const r of rows) if (!keys || keys.has(r.keyId)) projected.set(`${r.keyId} ${r.day}`, r.costNano);
  const replayed = new Map<string, Nano>();
  for (const [keyId, days] of expected.keyUsage) {
    if (keys && !keys.has(keyId)) continue;
    for (const [day, amount] of days) replayed.set(`${keyId} ${day}`, amount);
  }
  for (const row of [...new Set([...projected.keys(), ...replayed.keys()])].sort()) {
    const p = projected.get(row);
    const r = replayed.get(row) ?? 0n;
    if (p === r) continue;
    const [keyId, day] = row.split(' ');
    const message =
      p === undefined
        ? `key_usage_daily has no row for key ${keyId} on ${day}; the log charges ${r}`
        : `key_usage_daily for key ${keyId} on ${day}: cost_nano ${p} but the log says ${r}`;
    out.push({ table: 'key_usage_daily', row, message });
  }
  return out;
}

// ---- Reading the log and the projections -----------------------------------------------------

/** The projections compared, by the names and tables of libs/projections/src/read-models. */
export const CREDITS_PROJECTION = 'credits';
export const KEY_USAGE_PROJECTION = 'key_usage';

/** Every account event in global order, or one account's stream, a page at a time. */
export async function* readAccountEvents(store: EventStore, account?: string, pageSize = 1000): AsyncGenerator<RecordedEvent> {
  if (account !== undefined) {
    for (let from = 0n; ;) {
      const page = await store.readStream(accountStream(account), { fromRevision: from, maxCount: pageSize });
      if (page.length === 0) return;
      yield* page;
      from = page[page.length - 1].revision + 1n;
    }
  }
  for (let after = START; ;) {
    const page = await store.readAll({ after, maxCount: pageSize });
    if (page.length === 0) return;
    for (const event of page) if (event.stream.startsWith(STREAM_PREFIX)) yield event;
    after = page[page.length - 1].position;
  }
}

export interface ProjectionSnapshot {
  checkpoints: { credits: Position; keyUsage: Position };
  credits: CreditRows;
  keyUsage: KeyUsageRow[];
}

/**
 * The projections' rows and checkpoints in one snapshot: each projection writes its rows and
 * checkpoint in one transaction, so under REPEATABLE READ the rows are exactly the log up to
 * the checkpoint, whatever a running worker does meanwhile.
 */
export async function readProjectionSnapshot(sql: SqlRunner, scope: { account?: string; keys?: readonly string[] } = {}): Promise<ProjectionSnapshot> {
  return sql.transaction(async (tx) => {
    await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
    const checkpoint = async (name: string) =>
      (await tx.query<{ position: string }>('SELECT position FROM projection_checkpoints WHERE name = $1', [name])).rows[0]?.position ?? START;
    const byAccount = scope.account === undefined ? '' : ' WHERE account_id = $1';
    const params = scope.account === undefined ? [] : [scope.account];
    const accounts = await tx.query<{
      account_id: string;
      purchased_nano: string;
      used_nano: string;
      adjusted_nano: string;
      held_nano: string;
      open_holds: number;
    }>(`SELECT account_id, purchased_nano::text, used_nano::text, adjusted_nano::text, held_nano::text, open_holds FROM credit_accounts${byAccount}`, params);
    const holds = await tx.query<{ hold_id: string; account_id: string; amount_nano: string }>(
      `SELECT hold_id, account_id, amount_nano::text FROM credit_holds${byAccount}`,
      params,
    );
    return {
      checkpoints: { credits: await checkpoint(CREDITS_PROJECTION), keyUsage: await checkpoint(KEY_USAGE_PROJECTION) },
      credits: {
        accounts: accounts.rows.map((r) => ({
          accountId: r.account_id,
          purchasedNano: BigInt(r.purchased_nano),
          usedNano: BigInt(r.used_nano),
          adjustedNano: BigInt(r.adjusted_nano),
          heldNano: BigInt(r.held_nano),
          openHolds: Number(r.open_holds),
        })),
        holds: holds.rows.map((r) => ({ holdId: r.hold_id, accountId: r.account_id, amountNano: BigInt(r.amount_nano) })),
      },
      keyUsage: await readKeyUsage(tx, scope.keys),
    };
  });
}

async function readKeyUsage(tx: SqlExecutor, keys: readonly string[] | undefined): Promise<KeyUsageRow[]> {
  const { rows } = await tx.query<{ key_id: string; day: string; cost_nano: string }>(
    `SELECT key_id, day::text AS day, cost_nano::text FROM key_usage_daily${keys ? ' WHERE key_id = ANY($1::text[])' : ''}`,
    keys ? [keys] : [],
  );
  return rows.map((r) => ({ keyId: r.key_id, day: r.day, costNano: BigInt(r.cost_nano) }));
}

export interface LedgerAuditReport extends LedgerAudit {
  /** null when the audit is at an earlier instant: the projections hold the present. */
  projections: { checkpoints: ProjectionSnapshot['checkpoints']; mismatches: Mismatch[] } | null;
}

export class NoSuchAccountError extends Error {
  override readonly name = 'NoSuchAccountError';
}

/** The audit found violations or mismatches: a result rather than a crash, so no stack trace is printed. */
export class LedgerAuditFailedError extends Error {
  override readonly name = 'LedgerAuditFailedError';
  constructor(report: LedgerAuditReport) {
    super(
      `${plural(report.violations.length, 'violation')}, ${plural(report.projections?.mismatches.length ?? 0, 'projection mismatch', 'projection mismatches')}`,
    );
    this.stack = `${this.name}: ${this.message}`;
  }
}

/**
 * The whole audit: the log, and when `at` is absent the projections, compared at their own
 * checkpoints so that a projection that is merely behind the log is not reported.
 */
export async function runLedgerAudit(store: EventStore, sql: SqlRunner, options: Omit<AuditOptions, 'captureAt'> = {}): Promise<LedgerAuditReport> {
  const { account } = options;
  if (options.at !== undefined) {
    const audit = await auditLedger(readAccountEvents(store, account), options);
    if (account !== undefined && audit.accounts.length === 0)
      throw new NoSuchAccountError(`account ${account} has no events at or before ${options.at.toISOString()}`);
    return { ...audit, projections: null };
  }
  // key_usage_daily has no account column: one account's rows are those of the keys its log
  // names. The snapshot comes before the audited read so the log read covers its checkpoints.
  const keys = account === undefined ? undefined : await keysOf(readAccountEvents(store, account));
  const snapshot = await readProjectionSnapshot(sql, { account, keys: keys && [...keys] });
  const { checkpoints } = snapshot;
  const audit = await auditLedger(readAccountEvents(store, account), { ...options, captureAt: [checkpoints.credits, checkpoints.keyUsage] });
  if (account !== undefined && audit.accounts.length === 0) throw new NoSuchAccountError(`account ${account} has no events`);
  const mismatches = [
    ...compareCredits(audit.captured.get(checkpoints.credits)!, snapshot.credits),
    ...compareKeyUsage(audit.captured.get(checkpoints.keyUsage)!, snapshot.keyUsage, keys),
  ];
  return { ...audit, projections: { checkpoints, mismatches } };
}

async function keysOf(events: AsyncIterable<RecordedEvent>): Promise<Set<string>> {
  const keys = new Set<string>();
  for await (const event of events) {
    const data = event.data as { key_id?: unknown };
    if (typeof data?.key_id === 'string') keys.add(data.key_id);
  }
  return keys;
}

/** Violations and mismatches found. */
export function auditFindings(report: LedgerAuditReport): number {
  return report.violations.length + (report.projections?.mismatches.length ?? 0);
}

// ---- Presenting ------------------------------------------------------------------------------

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const usd = (nano: Nano) => (nano < 0n ? `-$${nanoToUsdString(-nano)}` : `$${nanoToUsdString(nano)}`);

/** The report for a terminal. */
export function formatLedgerAudit(report: LedgerAuditReport): string[] {
  const lines = [
    `Ledger audit at ${report.at.toISOString()} (${report.cut ? 'history up to that instant' : 'whole log'}): ${plural(report.accounts.length, 'account')}, ${plural(report.events, 'event')} replayed`,
  ];
  for (const a of report.accounts) {
    lines.push(
      '',
      `account ${a.accountId} (revision ${a.revision})`,
      `  credits ${usd(a.creditsNano)}  charged ${usd(a.chargedNano)}  open holds ${a.openHolds} (${usd(a.heldNano)})  available ${usd(a.availableNano)}`,
    );
    if (a.adjustedNano !== 0n) lines.push(`  adjustments ${usd(a.adjustedNano)} (credit notes and operator adjustments, in the available balance)`);
    if (a.overHold.count > 0) lines.push(`  over-hold charges ${a.overHold.count} (${usd(a.overHold.nano)} above their holds)`);
    if (a.reaped.count > 0) {
      lines.push(
        `  reaped holds ${a.reaped.count} (${usd(a.reaped.chargedNano)} charged from recorded usage, ${a.reaped.released} released with none recorded: may be short of what was delivered); ` +
          `corrected by their gateways ${a.reaped.corrections} (${usd(a.reaped.correctedNano)})`,
      );
    }
    const width = Math.max(0, ...a.keys.map((k) => k.keyId.length));
    for (const k of a.keys) {
      const { daily, weekly, monthly, lifetime } = k.spend;
      lines.push(
        `  key ${k.keyId.padEnd(width)}  daily ${usd(daily)}  weekly ${usd(weekly)}  monthly ${usd(monthly)}  lifetime ${usd(lifetime)}  held ${usd(k.heldNano)}`,
      );
    }
  }
  lines.push('');
  if (report.violations.length === 0) lines.push('Invariants 1-4: no violations');
  for (const v of report.violations) lines.push(`VIOLATION invariant ${v.invariant} ${v.stream}${v.revision === null ? '' : `@${v.revision}`}: ${v.message}`);
  if (report.projections === null) lines.push('Projections: not compared (they hold the present, not that instant)');
  else {
    const { checkpoints, mismatches } = report.projections;
    const at = (p: Position) => p || '(start)';
    lines.push(
      `Projections compared at their checkpoints: ${CREDITS_PROJECTION} ${at(checkpoints.credits)}, ${KEY_USAGE_PROJECTION} ${at(checkpoints.keyUsage)}`,
    );
    if (mismatches.length === 0) lines.push('Projections: no mismatches');
    for (const m of mismatches) lines.push(`MISMATCH ${m.message}`);
  }
  return lines;
}

/** The report as JSON: amounts and revisions as decimal strings, like the events. */
export function ledgerAuditJson(report: LedgerAuditReport): string {
  const { captured: _captured, ...shown } = report;
  return JSON.stringify(shown, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v), 2);
}
