import type { Nano } from '@svc/platform';
import type { ProjectedFigures } from './model';

/** A disagreement between a projection's row and the replayed log. */
export interface Mismatch {
  table: 'credit_accounts' | 'credit_holds' | 'key_usage_daily' | 'guardrail_budget_charges' | 'guardrail_hold_budgets';
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

/** Issue 44: each guardrail budget's charges per UTC day, and its open holds. */
export interface BudgetRows {
  usage: { bucket: string; day: string; costNano: Nano }[];
  held: { bucket: string; heldNano: Nano }[];
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

/**
 * Issue 44 item 5: a budget's spend, as the guardrail budgets projection holds it, equals the
 * charges the log counted against it, day by day, and its open holds equal the log's.
 */
export function compareBudgets(expected: ProjectedFigures, rows: BudgetRows): Mismatch[] {
  const out: Mismatch[] = [];
  const projected = new Map(rows.usage.map((r) => [`${r.bucket} ${r.day}`, r.costNano]));
  const replayed = new Map<string, Nano>();
  for (const [bucket, days] of expected.budgetUsage) for (const [day, amount] of days) replayed.set(`${bucket} ${day}`, amount);
  for (const row of [...new Set([...projected.keys(), ...replayed.keys()])].sort()) {
    const p = projected.get(row) ?? 0n;
    const r = replayed.get(row) ?? 0n;
    if (p !== r) out.push({ table: 'guardrail_budget_charges', row, message: `guardrail_budget_charges for ${row}: ${p} but the log says ${r}` });
  }
  const held = new Map(rows.held.map((r) => [r.bucket, r.heldNano]));
  for (const bucket of [...new Set([...held.keys(), ...expected.budgetHeld.keys()])].sort()) {
    const p = held.get(bucket) ?? 0n;
    const r = expected.budgetHeld.get(bucket) ?? 0n;
    if (p !== r) out.push({ table: 'guardrail_hold_budgets', row: bucket, message: `open holds of budget ${bucket}: ${p} but the log says ${r}` });
  }
  return out;
}
