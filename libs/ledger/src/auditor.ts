/**
 * The ledger auditor (issue 4, `cli ledger audit`): replays the `account-*` streams from the
 * event log alone, up to an instant, reports each account's balance, open holds and per-key
 * window spend at that instant, checks the invariants on the log, and compares the
 * replayed figures with the credits and key usage projections.
 *
 * The invariant checks keep their own sums from the events' data instead of trusting the
 * replayed state: a bug in `evolve` then shows up as a disagreement instead of hiding itself.
 *
 * ./audit/account-audit.ts replays one account and checks its events; ./audit/replay.ts replays
 * the log and captures what the projections should hold; ./audit/compare.ts compares the
 * projections' rows with it; ./audit/read.ts reads the log and the projections; ./audit/run.ts
 * is the whole audit; ./audit/format.ts presents it.
 */
export type { AccountReplay, AccountReport, AuditOptions, KeyReport, LedgerAudit, ProjectedFigures, Violation } from './audit/model';
export { auditLedger, LedgerAuditor } from './audit/replay';
export * from './audit/compare';
export * from './audit/read';
export * from './audit/run';
export * from './audit/format';
