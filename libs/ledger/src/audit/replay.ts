import type { Position, RecordedEvent } from '@svc/eventstore';
import type { Nano } from '@svc/platform';
import { accountDecider, heldNano } from '../account';
import { AccountAudit } from './account-audit';
import { STREAM_PREFIX, type AccountReplay, type AuditOptions, type LedgerAudit, type ProjectedFigures, type Violation } from './model';

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
    const figures: ProjectedFigures = { accounts: new Map(), holds: new Map(), keyUsage: new Map(), budgetUsage: new Map(), budgetHeld: new Map() };
    for (const audit of this.accounts.values()) {
      const { accountId, state, keyDays, budgetDays } = audit;
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
      mergeDays(figures.keyUsage, keyDays);
      mergeDays(figures.budgetUsage, budgetDays);
      for (const [bucket, held] of audit.budgetHeld()) figures.budgetHeld.set(bucket, (figures.budgetHeld.get(bucket) ?? 0n) + held);
    }
    this.captured.set(position, figures);
  }
}

function mergeDays(into: Map<string, Map<string, Nano>>, from: Map<string, Map<string, Nano>>): void {
  for (const [id, days] of from) {
    const merged = into.get(id) ?? new Map<string, Nano>();
    for (const [day, amount] of days) merged.set(day, (merged.get(day) ?? 0n) + amount);
    into.set(id, merged);
  }
}

export async function auditLedger(events: AsyncIterable<RecordedEvent> | Iterable<RecordedEvent>, options: AuditOptions = {}): Promise<LedgerAudit> {
  const auditor = new LedgerAuditor(options);
  for await (const event of events) auditor.observe(event);
  return auditor.finish();
}
