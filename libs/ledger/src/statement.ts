import type { EventStore, Position, RecordedEvent } from '@svc/eventstore';
import type { Nano } from '@svc/platform';
import type { AccountEvent } from './account';
import { NoSuchAccountError, readAccountEvents } from './auditor';
import { billedMeters, type MeterUsage } from './pricing';
import type { ChargeLine, Statement, StatementPeriod } from './statement/model';
import { parseStatementPeriod } from './statement/period';

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
 *
 * ./statement/period.ts reads the period asked for; ./statement/present.ts gives the statement
 * as JSON and CSV.
 */

export type { ChargeLine, Statement, StatementPeriod } from './statement/model';
export { MAX_STATEMENT_DAYS, parseStatementInstant, parseStatementPeriod } from './statement/period';
export { csvField, STATEMENT_CSV_COLUMNS, statementCsv, statementJson } from './statement/present';

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
