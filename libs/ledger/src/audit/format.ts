import type { Position } from '@svc/eventstore';
import { type Nano, nanoToUsdString } from '@svc/platform';
import { BUDGETS_PROJECTION, CREDITS_PROJECTION, KEY_USAGE_PROJECTION } from './read';
import type { LedgerAuditReport } from './run';

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const usd = (nano: Nano) => (nano < 0n ? `-$${nanoToUsdString(-nano)}` : `$${nanoToUsdString(nano)}`);

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
  if (report.violations.length === 0) lines.push('Invariants 1-5: no violations');
  for (const v of report.violations) lines.push(`VIOLATION invariant ${v.invariant} ${v.stream}${v.revision === null ? '' : `@${v.revision}`}: ${v.message}`);
  if (report.projections === null) lines.push('Projections: not compared (they hold the present, not that instant)');
  else {
    const { checkpoints, mismatches } = report.projections;
    const at = (p: Position) => p || '(start)';
    lines.push(
      `Projections compared at their checkpoints: ${CREDITS_PROJECTION} ${at(checkpoints.credits)}, ${KEY_USAGE_PROJECTION} ${at(checkpoints.keyUsage)}, ` +
        `${BUDGETS_PROJECTION} ${at(checkpoints.budgets)}`,
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
