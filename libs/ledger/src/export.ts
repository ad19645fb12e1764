import type { Position, RecordedEvent } from '@svc/eventstore';
import { decodePosition, START } from '@svc/eventstore';
import { type Nano, nanoToUsd9 } from '@svc/platform';
import { csvField, eventInstant, parseStatementInstant } from './statement';
import { billedMeters, type MeterUsage } from './pricing';

/**
 * The ledger export (issue 23, `cli ledger export`): one row per money event of the log, in log
 * position order, with the facts a finance team reconciles against (account, key, generation,
 * meters, amounts in USD with 9 decimals). This file holds the pure parts: options, the period
 * rule and the row of an event; ./export-writer.ts writes rows as CSV, JSON lines or Parquet and
 * keeps the checkpoint a killed export restarts from.
 */

/**
 * The events that move money. `BalanceAdjusted` (credit notes and manual adjustments) is named by
 * its type, so that its rows are exported whether or not this build's account events know it.
 */
export const MONEY_EVENT_TYPES = ['CreditsAdded', 'UsageCharged', 'UsageCorrected', 'BalanceAdjusted'] as const;
export type MoneyEventType = (typeof MONEY_EVENT_TYPES)[number];
const MONEY_TYPES: ReadonlySet<string> = new Set(MONEY_EVENT_TYPES);

export const isMoneyEvent = (event: Pick<RecordedEvent, 'type' | 'stream'>): boolean => MONEY_TYPES.has(event.type) && event.stream.startsWith('account-');

/** A CLI option the command refuses, before it reads or writes anything: the message names the option. */
export class LedgerOptionError extends Error {
  override readonly name = 'LedgerOptionError';
  declare readonly option: string;
  constructor(option: string, message: string) {
    super(message);
    // Not enumerable: the CLI prints the error, and the message names the option already.
    Object.defineProperty(this, 'option', { value: option, enumerable: false });
    // A refusal of the operator's input, not a crash: no stack trace under it.
    this.stack = `${this.name}: ${message}`;
  }
}

// ---- Options ----------------------------------------------------------------------------------

/**
 * An ISO 8601 date (its 00:00 UTC) or date-time (UTC when it has no offset), read exactly as
 * statements read theirs, so `ledger export`, `ledger reconcile` and `ledger statement` agree on
 * a period. `Date.parse` alone would take a date-time without offset as local time and roll
 * 2026-02-30 over into March.
 */
export function parseInstant(option: string, text: string): Date {
  const at = parseStatementInstant(text.trim());
  if (at === null)
    throw new LedgerOptionError(
      option,
      `${option} is not an ISO 8601 date or date-time (e.g. 2026-11-01 or 2026-11-01T00:00:00Z; UTC when no offset): ${JSON.stringify(text)}`,
    );
  return at;
}

/** `[from, to)`; an absent bound is open. */
export interface ExportPeriod {
  from?: Date;
  to?: Date;
}

export function parsePeriod(options: { from?: string; to?: string }): ExportPeriod {
  const from = options.from === undefined ? undefined : parseInstant('--from', options.from);
  const to = options.to === undefined ? undefined : parseInstant('--to', options.to);
  if (from && to && from.getTime() >= to.getTime()) {
    throw new LedgerOptionError('--from', `--from (${from.toISOString()}) must be before --to (${to.toISOString()}): the period is [from, to)`);
  }
  return { ...(from ? { from } : {}), ...(to ? { to } : {}) };
}

/** A log position to start after, as `ledger export` prints and writes it. */
export function parseAfter(text: string | undefined): Position {
  if (text === undefined || text.trim() === '') return START;
  try {
    decodePosition(text.trim());
  } catch {
    throw new LedgerOptionError('--after', `--after is not a log position (20 digits, "/", 20 digits, as in <file>.position): ${JSON.stringify(text)}`);
  }
  return text.trim();
}

// ---- The period rule --------------------------------------------------------------------------

/** In `[from, to)`. */
export function inPeriod(event: Pick<RecordedEvent, 'type' | 'data' | 'metadata'>, period: ExportPeriod): boolean {
  if (!period.from && !period.to) return true;
  const ms = eventInstant(event);
  return (!period.from || ms >= period.from.getTime()) && (!period.to || ms < period.to.getTime());
}

// ---- Rows ---------------------------------------------------------------------------------------

/**
 * One money event. Amounts are USD with exactly 9 decimals, as strings (exact; JSON numbers are
 * not). Sign convention:
 * - `amount_usd`: the amount as the event records it: a credit positive, a charge positive (what
 *   the account was charged), an adjustment signed (a credit note positive, a debit negative);
 * - `balance_effect_usd`: what it did to the balance: credits +, charges −, adjustments signed.
 *   Summed per account over a period it is the change of the balance, as a statement shows it.
 * null: the event has no such fact.
 */
export interface MoneyRow {
  position: Position;
  /** metadata.at, as recorded. */
  at: string | null;
  type: string;
  account_id: string;
  key_id: string | null;
  /** The charge's hold id, which is the generation id (GET /v1/generation). */
  generation_id: string | null;
  adjustment_id: string | null;
  /** A BalanceAdjusted's kind: `credit_note` or `adjustment`. */
  kind: string | null;
  /** A credit's or adjustment's reason. */
  reason: string | null;
  model: string | null;
  /** As the pipeline recorded it; a BYOK call's ends in `:byok`. */
  provider: string | null;
  endpoint: string | null;
  amount_usd: string;
  balance_effect_usd: string;
  /** What the provider charges the operator for the generation; null when unknown (not recorded). */
  provider_cost_usd: string | null;
  /** Charges only: the call ran on the account's own provider key. */
  byok: boolean | null;
  /**
   * Charges only: a batch line's (its cost lines have a `batch_discount`); null on a charge
   * recorded without cost lines, where it is not known.
   */
  batch: boolean | null;
  /** Charges only: usage by meter (events older than meters read through their upcaster). */
  meters: MeterUsage | null;
  /** The same amounts in nano-USD, for sums that must be exact; not columns of the export. */
  amount_nano: Nano;
  balance_effect_nano: Nano;
  provider_cost_nano: Nano | null;
}

/** The columns of every format, in order. */
export const EXPORT_COLUMNS = [
  'position',
  'at',
  'type',
  'account_id',
  'key_id',
  'generation_id',
  'adjustment_id',
  'kind',
  'reason',
  'model',
  'provider',
  'endpoint',
  'amount_usd',
  'balance_effect_usd',
  'provider_cost_usd',
  'byok',
  'batch',
  'meters',
] as const satisfies readonly (keyof MoneyRow)[];
export type ExportColumn = (typeof EXPORT_COLUMNS)[number];

export const BYOK_SUFFIX = ':byok';
export const isByokProvider = (provider: string | null | undefined): boolean => typeof provider === 'string' && provider.endsWith(BYOK_SUFFIX);

const str = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null);

/** A signed decimal nano amount; a malformed one stops the export rather than exporting a wrong sum. */
function nano(value: unknown, event: RecordedEvent, field: string): Nano {
  if (typeof value === 'string' && /^-?\d+$/.test(value)) return BigInt(value);
  if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt(value);
  throw new Error(`${event.type} at ${event.position} (${event.stream}@${event.revision}): ${field} is not an amount in nano-USD: ${JSON.stringify(value)}`);
}

/** The row of a money event; null for any other event. */
export function moneyRow(event: RecordedEvent): MoneyRow | null {
  if (!isMoneyEvent(event)) return null;
  const data = (event.data ?? {}) as Record<string, unknown>;
  const base = {
    position: event.position,
    at: str(event.metadata?.at),
    type: event.type,
    account_id: str(data.account_id) ?? event.stream.slice('account-'.length),
    key_id: null,
    generation_id: null,
    adjustment_id: null,
    kind: null,
    reason: null,
    model: null,
    provider: null,
    endpoint: null,
    provider_cost_usd: null,
    provider_cost_nano: null,
    byok: null,
    batch: null,
    meters: null,
  } satisfies Partial<MoneyRow>;
  switch (event.type as MoneyEventType) {
    case 'CreditsAdded': {
      const amount = nano(data.amount_nano, event, 'amount_nano');
      return { ...base, reason: str(data.reason), ...amounts(amount, amount) };
    }
    case 'BalanceAdjusted': {
      const amount = nano(data.amount_nano, event, 'amount_nano');
      return { ...base, adjustment_id: str(data.adjustment_id), kind: str(data.kind), reason: str(data.reason), ...amounts(amount, amount) };
    }
    // Issue 41 D: a correction is a row of its own, with what it adds (amount and meters).
    case 'UsageCharged':
    case 'UsageCorrected': {
      const amount = nano(data.amount_nano, event, 'amount_nano');
      const provider = str(data.provider);
      const cost =
        data.provider_cost_nano === undefined || data.provider_cost_nano === null ? null : nano(data.provider_cost_nano, event, 'provider_cost_nano');
      return {
        ...base,
        key_id: str(data.key_id),
        generation_id: str(data.hold_id),
        model: str(data.model),
        provider,
        endpoint: str(data.endpoint),
        provider_cost_nano: cost,
        provider_cost_usd: cost === null ? null : nanoToUsd9(cost),
        byok: isByokProvider(provider),
        batch: Array.isArray(data.lines) ? data.lines.some((line: { meter?: unknown }) => line?.meter === 'batch_discount') : null,
        meters: billedMeters(event.type === 'UsageCorrected' ? (data.usage_added as MeterUsage) : ((data.usage as MeterUsage | undefined) ?? {})),
        ...amounts(amount, -amount),
      };
    }
  }
}

function amounts(amount: Nano, effect: Nano) {
  return { amount_nano: amount, amount_usd: nanoToUsd9(amount), balance_effect_nano: effect, balance_effect_usd: nanoToUsd9(effect) };
}

// ---- Text formats -----------------------------------------------------------------------------

export type ExportFormat = 'csv' | 'jsonl' | 'parquet';
export const EXPORT_FORMATS: readonly ExportFormat[] = ['csv', 'jsonl', 'parquet'];

export function parseFormat(text: string | undefined): ExportFormat {
  const format = (text ?? 'csv').toLowerCase();
  if (!(EXPORT_FORMATS as readonly string[]).includes(format))
    throw new LedgerOptionError('--format', `--format must be one of ${EXPORT_FORMATS.join(', ')}: ${JSON.stringify(text)}`);
  return format as ExportFormat;
}

export const csvHeader = (): string => `${EXPORT_COLUMNS.join(',')}\r\n`;

/** The meters as a JSON object in one column; empty cells where the event has no such fact. */
export function csvLine(row: MoneyRow): string {
  const cells = EXPORT_COLUMNS.map((column) => {
    const value = row[column];
    if (value === null) return '';
    if (column === 'meters') return csvField(JSON.stringify(value));
    return csvField(String(value));
  });
  return `${cells.join(',')}\r\n`;
}

/** One JSON object per line, every column present (null where the event has no such fact). */
export function jsonlLine(row: MoneyRow): string {
  const out: Record<string, unknown> = {};
  for (const column of EXPORT_COLUMNS) out[column] = row[column];
  return `${JSON.stringify(out)}\n`;
}
