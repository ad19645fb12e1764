import { DomainError, type EventStore, type Position, type RecordedEvent } from '@svc/eventstore';
import { type Nano, nanoToUsd, nanoToUsd9 } from '@svc/platform';
import { type AccountEvent, type AdjustmentKind } from './account';
import { NoSuchAccountError, readAccountEvents } from './auditor';
import { billedMeters, type MeterUsage } from './pricing';

/**
 * Account statements (issue 23): what moved an account's balance in a period `[from, to)`,
 * replayed from its `account-<id>` stream alone. Each event falls in the period by its own
 * decision time (`metadata.at`; a charge by its `charged_at` when recorded, as the spend windows
 * and the auditor count it), so:
 *
 * - opening balance = every credit, charge and adjustment before `from`; closing = before `to`;
 *   the lines of the period sum exactly to closing - opening;
 * - only periods that have ended are stated, so events appended later (decided at or after `to`)
 *   leave a statement byte for byte as it was: it names the position of the last event of the
 *   stream it includes, not the log head.
 *
 * Releases and expiries free held money and move no settled balance: they are listed with the
 * amount they held, outside the sum.
 */

/** The longest period stated at once: a year, leap day included. */
export const MAX_STATEMENT_DAYS = 366;
const DAY_MS = 86_400_000;

export interface StatementPeriod {
  from: Date;
  to: Date;
}

export interface ChargeLine {
  /** UTC day of the charges. */
  date: string;
  model: string;
  keyId: string;
  requests: number;
  amountNano: Nano;
  meters: MeterUsage;
}

export interface Statement {
  accountId: string;
  from: Date;
  to: Date;
  /** The position of the last event of the stream the statement includes; null when none is. */
  builtAtPosition: Position | null;
  openingNano: Nano;
  closingNano: Nano;
  credits: { at: string; amountNano: Nano; reason: string }[];
  charges: ChargeLine[];
  releases: { at: string; holdId: string; keyId: string; heldNano: Nano; reason: string }[];
  expiries: { at: string; holdId: string; keyId: string; heldNano: Nano }[];
  /** Null in a statement seen from an organization's workspace (statementSeenFrom). */
  adjustments: { at: string; adjustmentId: string; kind: AdjustmentKind; amountNano: Nano; reason: string | null; operator: string | null }[];
  totals: { creditsNano: Nano; chargesNano: Nano; adjustmentsNano: Nano; byMeter: MeterUsage };
  /**
   * Only in a statement seen from an organization's workspace: what the keys it may not see
   * were charged in the period, one sum, so the balances still add up.
   */
  otherKeysChargesNano?: Nano;
}

/**
 * Issue 41 item 13: a statement shows what its caller may see, by the rule of `/v1/generation`
 * (a generation is visible to the keys of its key's workspace). The account's own keys (its
 * personal workspace) see it whole. A key of an organization's workspace, which bills the
 * owner's balance, sees the charges, releases and expiries of that workspace's keys
 * (`visible`); the owner's personal keys and other workspaces' are one sum,
 * `otherKeysChargesNano`, since the opening and closing balances (the owner's, which
 * `/v1/credits` shows such a key) must still add up. Adjustments keep their amount and kind,
 * without the operator's reason and identity, which are notes about the owner's account.
 */
export function statementSeenFrom(s: Statement, visible: ReadonlySet<string>): Statement {
  const charges = s.charges.filter((c) => visible.has(c.keyId));
  const chargesNano = charges.reduce((sum, c) => sum + c.amountNano, 0n);
  const byMeter: MeterUsage = {};
  for (const c of charges) addMeters(byMeter, c.meters);
  return {
    ...s,
    charges,
    releases: s.releases.filter((r) => visible.has(r.keyId)),
    expiries: s.expiries.filter((e) => visible.has(e.keyId)),
    adjustments: s.adjustments.map((a) => ({ ...a, reason: null, operator: null })),
    totals: { ...s.totals, chargesNano, byMeter: sortedMeters(byMeter) },
    otherKeysChargesNano: s.totals.chargesNano - chargesNano,
  };
}

/**
 * When an event counts, for statements, exports and reconciliation alike: a charge at its own
 * `charged_at` (the instant the spend windows count it at), anything else at `metadata.at`, the
 * instant it was decided. An event that carries neither counts as the beginning of time: it is
 * in every balance, so it is in a period without `from` only.
 */
export function eventInstant(event: Pick<RecordedEvent, 'type' | 'data' | 'metadata'>): number {
  const chargedAt = event.type === 'UsageCharged' || event.type === 'UsageCorrected' ? (event.data as { charged_at?: unknown })?.charged_at : undefined;
  const ms = Date.parse(String(chargedAt ?? event.metadata?.at));
  return Number.isNaN(ms) ? Number.NEGATIVE_INFINITY : ms;
}

const isoOf = (recorded: RecordedEvent, ms: number) =>
  typeof recorded.metadata?.at === 'string' ? recorded.metadata.at : new Date(Number.isFinite(ms) ? ms : 0).toISOString();

function addMeters(into: MeterUsage, usage: MeterUsage): void {
  for (const [meter, quantity] of Object.entries(usage) as [keyof MeterUsage, number][]) into[meter] = (into[meter] ?? 0) + quantity;
}

/** Folds one account's stream, in revision order, into its statement for a period. */
export class StatementBuilder {
  private readonly fromMs: number;
  private readonly toMs: number;
  private opening = 0n;
  private lastIncluded: Position | null = null;
  private events = 0;
  /** Open holds' amounts, to say what a release freed; a resolved hold leaves. */
  private readonly held = new Map<string, Nano>();
  private readonly charges = new Map<string, ChargeLine>();
  private readonly statement: Omit<Statement, 'charges' | 'openingNano' | 'closingNano' | 'builtAtPosition'>;

  constructor(accountId: string, period: StatementPeriod) {
    this.fromMs = period.from.getTime();
    this.toMs = period.to.getTime();
    this.statement = {
      accountId,
      from: period.from,
      to: period.to,
      credits: [],
      releases: [],
      expiries: [],
      adjustments: [],
      totals: { creditsNano: 0n, chargesNano: 0n, adjustmentsNano: 0n, byMeter: {} },
    };
  }

  observe(recorded: RecordedEvent): void {
    this.events++;
    const event = recorded as unknown as AccountEvent;
    // Holds are tracked whenever they were placed: one placed before `from` may be released in the period.
    if (event.type === 'HoldPlaced') this.held.set(event.data.hold_id, BigInt(event.data.amount_nano));
    const heldNano = event.type === 'HoldReleased' || event.type === 'HoldExpired' || event.type === 'UsageCharged' ? this.resolve(event.data.hold_id) : 0n;
    const ms = eventInstant(recorded);
    if (!(ms < this.toMs)) return;
    this.lastIncluded = recorded.position;
    const moved = movement(event);
    if (ms < this.fromMs) {
      this.opening += moved;
      return;
    }
    const at = isoOf(recorded, ms);
    const { totals } = this.statement;
    switch (event.type) {
      case 'CreditsAdded':
        this.statement.credits.push({ at, amountNano: moved, reason: event.data.reason });
        totals.creditsNano += moved;
        return;
      case 'UsageCharged': {
        const { model, key_id: keyId } = event.data;
        const date = new Date(ms).toISOString().slice(0, 10);
        const group = `${date}\u0000${model}\u0000${keyId}`;
        const line = this.charges.get(group) ?? { date, model, keyId, requests: 0, amountNano: 0n, meters: {} };
        const usage = billedMeters(event.data.usage ?? {});
        line.requests++;
        line.amountNano -= moved;
        addMeters(line.meters, usage);
        addMeters(totals.byMeter, usage);
        this.charges.set(group, line);
        totals.chargesNano -= moved;
        return;
      }
      // Issue 41 D: what its process charged beyond the reaper's charge, on the same line; not a request of its own.
      case 'UsageCorrected': {
        const { model, key_id: keyId } = event.data;
        const date = new Date(ms).toISOString().slice(0, 10);
        const group = `${date}\u0000${model}\u0000${keyId}`;
        const line = this.charges.get(group) ?? { date, model, keyId, requests: 0, amountNano: 0n, meters: {} };
        line.amountNano -= moved;
        addMeters(line.meters, billedMeters(event.data.usage_added));
        addMeters(totals.byMeter, billedMeters(event.data.usage_added));
        this.charges.set(group, line);
        totals.chargesNano -= moved;
        return;
      }
      case 'BalanceAdjusted': {
        const { adjustment_id: adjustmentId, kind, reason, operator } = event.data;
        this.statement.adjustments.push({ at, adjustmentId, kind, amountNano: moved, reason, operator });
        totals.adjustmentsNano += moved;
        return;
      }
      case 'HoldReleased':
        this.statement.releases.push({ at, holdId: event.data.hold_id, keyId: event.data.key_id, heldNano, reason: event.data.reason });
        return;
      case 'HoldExpired':
        // The event carries what it held: exact even when its HoldPlaced were somehow missing.
        this.statement.expiries.push({ at, holdId: event.data.hold_id, keyId: event.data.key_id, heldNano: BigInt(event.data.amount_nano) });
        return;
    }
  }

  /** Whether any event of the stream was seen: none means no such account. */
  get empty(): boolean {
    return this.events === 0;
  }

  finish(): Statement {
    const { totals } = this.statement;
    const charges = [...this.charges.values()]
      .map((line) => ({ ...line, meters: sortedMeters(line.meters) }))
      .sort((a, b) => compare(a.date, b.date) || compare(a.model, b.model) || compare(a.keyId, b.keyId));
    return {
      ...this.statement,
      charges,
      totals: { ...totals, byMeter: sortedMeters(totals.byMeter) },
      builtAtPosition: this.lastIncluded,
      openingNano: this.opening,
      closingNano: this.opening + totals.creditsNano - totals.chargesNano + totals.adjustmentsNano,
    };
  }

  private resolve(holdId: string): Nano {
    const amount = this.held.get(holdId) ?? 0n;
    this.held.delete(holdId);
    return amount;
  }
}

/** What an event does to the settled balance (credits - charges + adjustments). */
function movement(event: AccountEvent): Nano {
  switch (event.type) {
    case 'CreditsAdded':
    case 'BalanceAdjusted':
      return BigInt(event.data.amount_nano);
    case 'UsageCharged':
    case 'UsageCorrected':
      return -BigInt(event.data.amount_nano);
    default:
      return 0n;
  }
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const sortedMeters = (meters: MeterUsage): MeterUsage => Object.fromEntries(Object.entries(meters).sort(([a], [b]) => compare(a, b)));

/** The statement of one account's events (its stream, in revision order) for a period. */
export function buildStatement(accountId: string, events: Iterable<RecordedEvent>, period: StatementPeriod): Statement {
  const builder = new StatementBuilder(accountId, period);
  for (const event of events) builder.observe(event);
  return builder.finish();
}

/**
 * Reads the account's stream from the event store, a page at a time, and states it. The whole
 * stream is read: an event appended after one decided later may still belong to the period.
 */
export async function readStatement(store: EventStore, accountId: string, period: StatementPeriod): Promise<Statement> {
  const builder = new StatementBuilder(accountId, period);
  for await (const event of readAccountEvents(store, accountId)) builder.observe(event);
  if (builder.empty) throw new NoSuchAccountError(`account ${accountId} has no events`);
  return builder.finish();
}

/**
 * The use case both the API (GET /v1/credits/statement) and the CLI (`ledger statement`) call:
 * the period as asked, checked against `now`, then the account's stream stated.
 */
export async function accountStatement(store: EventStore, accountId: string, asked: { from: unknown; to: unknown }, now: Date): Promise<Statement> {
  return readStatement(store, accountId, parseStatementPeriod(asked, now));
}

// ---- The period asked for ---------------------------------------------------------------------

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?(Z|[+-]\d{2}:\d{2})?$/;

/**
 * An ISO 8601 date (its 00:00 UTC) or date-time (UTC when it has no offset); null when it is
 * neither, or names no real instant. The one reading of a time argument, for every CLI option
 * and API parameter (issue 41 item 16): `new Date(text)` would read a date-time without an
 * offset in the machine's zone, so the same command would name another instant on another host.
 */
export function parseStatementInstant(text: string): Date | null {
  const date = DATE.exec(text);
  if (date) {
    const [, y, m, d] = date.map(Number);
    const ms = Date.UTC(y, m - 1, d);
    const at = new Date(ms);
    return at.getUTCFullYear() === y && at.getUTCMonth() === m - 1 && at.getUTCDate() === d ? at : null;
  }
  const dt = DATE_TIME.exec(text);
  if (!dt) return null;
  const [y, mo, d, h, mi, s] = dt.slice(1, 7).map((v) => Number(v ?? 0));
  const ms = Number((dt[7] ?? '0').padEnd(3, '0'));
  const local = Date.UTC(y, mo - 1, d, h, mi, s, ms);
  const check = new Date(local);
  // 2026-02-30 or 25:00 would roll over into another instant: only a time that round-trips exists.
  if (
    check.getUTCFullYear() !== y ||
    check.getUTCMonth() !== mo - 1 ||
    check.getUTCDate() !== d ||
    check.getUTCHours() !== h ||
    check.getUTCMinutes() !== mi ||
    check.getUTCSeconds() !== s
  ) {
    return null;
  }
  const offset = dt[8];
  if (offset === undefined || offset === 'Z') return check;
  const [oh, om] = offset.slice(1).split(':').map(Number);
  if (oh > 23 || om > 59) return null;
  return new Date(local - (offset[0] === '-' ? -1 : 1) * (oh * 60 + om) * 60_000);
}

const invalid = (param: 'from' | 'to', code: string, message: string) => new DomainError(code, message, { param });

/**
 * `from` and `to` as asked (a query parameter or a CLI option): a period that has ended, `from`
 * before `to`, at most MAX_STATEMENT_DAYS long. A refusal names the parameter at fault.
 */
export function parseStatementPeriod(input: { from: unknown; to: unknown }, now: Date): StatementPeriod {
  const instant = (param: 'from' | 'to'): Date => {
    const value = input[param];
    if (value === undefined || value === null || value === '')
      throw invalid(param, 'missing_parameter', `${param} is required: an ISO 8601 date or date-time.`);
    const at = typeof value === 'string' ? parseStatementInstant(value) : null;
    if (at === null) {
      throw invalid(
        param,
        'invalid_date',
        `${param} must be an ISO 8601 date (2026-11-01) or date-time (2026-11-01T00:00:00Z; UTC when no offset is given), given once.`,
      );
    }
    return at;
  };
  const from = instant('from');
  const to = instant('to');
  if (from.getTime() >= to.getTime()) throw invalid('from', 'invalid_period', `from (${from.toISOString()}) must be before to (${to.toISOString()}).`);
  if (to.getTime() > now.getTime())
    throw invalid(
      'to',
      'period_not_ended',
      `to (${to.toISOString()}) is in the future: only a period that has ended is stated, so that its statement never changes.`,
    );
  if (to.getTime() - from.getTime() > MAX_STATEMENT_DAYS * DAY_MS)
    throw invalid('to', 'period_too_long', `A statement covers at most ${MAX_STATEMENT_DAYS} days; ask for several.`);
  return { from, to };
}

// ---- Presenting -------------------------------------------------------------------------------

/** The statement as the API and `cli ledger statement --format json` give it (docs/api/account.md "Statements and corrections"). */
export function statementJson(s: Statement) {
  return {
    account_id: s.accountId,
    from: s.from.toISOString(),
    to: s.to.toISOString(),
    built_at_position: s.builtAtPosition,
    currency: 'USD' as const,
    opening_balance: nanoToUsd(s.openingNano),
    closing_balance: nanoToUsd(s.closingNano),
    credits: s.credits.map((c) => ({ at: c.at, amount: nanoToUsd(c.amountNano), reason: c.reason })),
    charges: s.charges.map((c) => ({ date: c.date, model: c.model, key_id: c.keyId, requests: c.requests, amount: nanoToUsd(c.amountNano), meters: c.meters })),
    totals: {
      credits: nanoToUsd(s.totals.creditsNano),
      charges: nanoToUsd(s.totals.chargesNano),
      ...(s.otherKeysChargesNano === undefined ? {} : { other_keys_charges: nanoToUsd(s.otherKeysChargesNano) }),
      adjustments: nanoToUsd(s.totals.adjustmentsNano),
      by_meter: s.totals.byMeter,
    },
    releases: s.releases.map((r) => ({ at: r.at, hold_id: r.holdId, key_id: r.keyId, held_amount: nanoToUsd(r.heldNano), reason: r.reason })),
    expiries: s.expiries.map((e) => ({ at: e.at, hold_id: e.holdId, key_id: e.keyId, held_amount: nanoToUsd(e.heldNano) })),
    adjustments: s.adjustments.map((a) => ({
      at: a.at,
      adjustment_id: a.adjustmentId,
      kind: a.kind,
      amount: nanoToUsd(a.amountNano),
      reason: a.reason,
      operator: a.operator,
    })),
  };
}

export const STATEMENT_CSV_COLUMNS = [
  'section',
  'at',
  'date',
  'key_id',
  'model',
  'requests',
  'hold_id',
  'adjustment_id',
  'kind',
  'amount',
  'held_amount',
  'meters',
  'reason',
  'operator',
] as const;
type CsvRow = Partial<Record<(typeof STATEMENT_CSV_COLUMNS)[number], string | number>>;

/** RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled. */
export function csvField(value: string | number | undefined): string {
  const text = value === undefined ? '' : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * One row per line, with a `section` column: opening_balance (reason: the account), credit,
 * charge (meters as `meter=quantity;...`), adjustment, release, expiry, closing_balance (reason:
 * the log position it was built at). Amounts are 9-decimal strings.
 */
export function statementCsv(s: Statement): string {
  const rows: CsvRow[] = [
    { section: 'opening_balance', at: s.from.toISOString(), amount: nanoToUsd9(s.openingNano), reason: `account ${s.accountId}` },
    ...s.credits.map((c): CsvRow => ({ section: 'credit', at: c.at, amount: nanoToUsd9(c.amountNano), reason: c.reason })),
    ...s.charges.map((c): CsvRow => ({
      section: 'charge',
      date: c.date,
      key_id: c.keyId,
      model: c.model,
      requests: c.requests,
      amount: nanoToUsd9(c.amountNano),
      meters: Object.entries(c.meters)
        .map(([meter, quantity]) => `${meter}=${quantity}`)
        .join(';'),
    })),
    ...s.adjustments.map((a): CsvRow => ({
      section: 'adjustment',
      at: a.at,
      adjustment_id: a.adjustmentId,
      kind: a.kind,
      amount: nanoToUsd9(a.amountNano),
      reason: a.reason ?? undefined,
      operator: a.operator ?? undefined,
    })),
    ...s.releases.map((r): CsvRow => ({
      section: 'release',
      at: r.at,
      hold_id: r.holdId,
      key_id: r.keyId,
      held_amount: nanoToUsd9(r.heldNano),
      reason: r.reason,
    })),
    ...s.expiries.map((e): CsvRow => ({ section: 'expiry', at: e.at, hold_id: e.holdId, key_id: e.keyId, held_amount: nanoToUsd9(e.heldNano) })),
    { section: 'closing_balance', at: s.to.toISOString(), amount: nanoToUsd9(s.closingNano), reason: `built_at_position ${s.builtAtPosition ?? '(none)'}` },
  ];
  return [STATEMENT_CSV_COLUMNS.join(','), ...rows.map((row) => STATEMENT_CSV_COLUMNS.map((column) => csvField(row[column])).join(','))].join('\n') + '\n';
}
