import type { Decider, Position } from '@svc/eventstore';
import type { Nano } from '@svc/platform';
import type { AccountEvent, AccountState } from '../account';
import type { Period } from '../spend-window';

/** The streams audited: one per account. */
export const STREAM_PREFIX = 'account-';

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
  /**
   * The invariant (1-4; 5: no hold takes a guardrail budget's window past its limit, issue
   * 44), or 0 for an event the replay cannot place.
   */
  invariant: 0 | 1 | 2 | 3 | 4 | 5;
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
  /** Issue 44, guardrail_budget_charges: budget bucket -> UTC day -> charges it covers. */
  budgetUsage: Map<string, Map<string, Nano>>;
  /** guardrail_hold_budgets, open rows: budget bucket -> open holds counted against it. */
  budgetHeld: Map<string, Nano>;
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
