import { nanoToUsd, nanoToUsd9 } from '@svc/platform';
import type { Statement } from './model';

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
