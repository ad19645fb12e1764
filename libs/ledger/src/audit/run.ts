import type { EventStore, RecordedEvent } from '@svc/eventstore';
import type { SqlRunner } from '@svc/platform';
import { compareBudgets, compareCredits, compareKeyUsage, type Mismatch } from './compare';
import type { AuditOptions, LedgerAudit } from './model';
import { readAccountEvents, readProjectionSnapshot, type ProjectionSnapshot } from './read';
import { auditLedger } from './replay';

export interface LedgerAuditReport extends LedgerAudit {
  /** null when the audit is at an earlier instant: the projections hold the present. */
  projections: { checkpoints: ProjectionSnapshot['checkpoints']; mismatches: Mismatch[] } | null;
}

export class NoSuchAccountError extends Error {
  override readonly name = 'NoSuchAccountError';
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
  const audit = await auditLedger(readAccountEvents(store, account), {
    ...options,
    captureAt: [checkpoints.credits, checkpoints.keyUsage, checkpoints.budgets],
  });
  if (account !== undefined && audit.accounts.length === 0) throw new NoSuchAccountError(`account ${account} has no events`);
  const mismatches = [
    ...compareCredits(audit.captured.get(checkpoints.credits)!, snapshot.credits),
    ...compareKeyUsage(audit.captured.get(checkpoints.keyUsage)!, snapshot.keyUsage, keys),
    ...compareBudgets(audit.captured.get(checkpoints.budgets)!, snapshot.budgets),
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
