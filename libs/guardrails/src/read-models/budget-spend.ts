import type { RecordedEvent } from '@svc/eventstore';
import type { AccountEvent, LimitReset } from '@svc/ledger';
import { windowEndMs, windowStartMs } from '@svc/ledger';
import type { Nano, SqlExecutor } from '@svc/platform';
import { asTable, type Projection } from '@svc/projections';

type A<T extends AccountEvent['type']> = RecordedEvent<T, Extract<AccountEvent, { type: T }>['data']>;
type Read = A<'HoldPlaced'> | A<'UsageCharged'> | A<'UsageCorrected'> | A<'HoldReleased'> | A<'HoldExpired'>;

/**
 * Each guardrail budget's spend (issue 44 item 5): a charge covered by a budget is a row here, so
 * a window's spend is a sum over the rows of that window, equal at any time to the charges the
 * account decided against that budget (the ledger audit checks it). A hold's budgets are kept
 * after it closes: the hold reaper's settlement may be corrected later by its process's own
 * charge, which counts against the same budgets.
 */
export const budgetSpendProjection: Projection = {
  name: 'guardrail_budgets',
  tables: ['guardrail_hold_budgets', 'guardrail_budget_charges'],
  schema: [
    `CREATE TABLE IF NOT EXISTS guardrail_hold_budgets (
      account_id text NOT NULL,
      hold_id text NOT NULL,
      bucket text NOT NULL,
      guardrail_id text NOT NULL,
      scope text NOT NULL,
      subject text NOT NULL,
      amount_nano bigint NOT NULL,
      open boolean NOT NULL,
      PRIMARY KEY (account_id, hold_id, bucket)
    )`,
    `CREATE INDEX IF NOT EXISTS guardrail_hold_budgets_open ON guardrail_hold_budgets (bucket) WHERE open`,
    `CREATE TABLE IF NOT EXISTS guardrail_budget_charges (
      bucket text NOT NULL,
      guardrail_id text NOT NULL,
      scope text NOT NULL,
      subject text NOT NULL,
      account_id text NOT NULL,
      hold_id text NOT NULL,
      amount_nano bigint NOT NULL,
      charged_at timestamptz NOT NULL
    )`,
    `CREATE INDEX IF NOT EXISTS guardrail_budget_charges_window ON guardrail_budget_charges (bucket, charged_at)`,
    `CREATE INDEX IF NOT EXISTS guardrail_budget_charges_guardrail ON guardrail_budget_charges (guardrail_id, charged_at)`,
  ],
  eventTypes: new Set(['HoldPlaced', 'UsageCharged', 'UsageCorrected', 'HoldReleased', 'HoldExpired']),
  // Holds first, then charges, then closings: a hold placed and charged in one batch is joined.
  async apply(events: readonly Read[], tx: SqlExecutor): Promise<void> {
    const holds: unknown[][] = [];
    const charges: unknown[][] = [];
    const closed: unknown[][] = [];
    // Holds placed in this batch under no budget have no row to charge or close: most requests,
    // and in a rebuild's large batches most of them are settled in the batch that placed them.
    const unbudgeted = new Set<string>();
    const holdKey = (e: Read) => `${e.data.account_id}\u0000${e.data.hold_id}`;
    for (const e of events) {
      if (e.type !== 'HoldPlaced' && unbudgeted.has(holdKey(e))) continue;
      switch (e.type) {
        case 'HoldPlaced':
          if (!e.data.budgets?.length) unbudgeted.add(holdKey(e));
          for (const b of e.data.budgets ?? [])
            holds.push([e.data.account_id, e.data.hold_id, b.bucket, b.guardrail_id, b.scope, b.subject, e.data.amount_nano]);
          break;
        case 'UsageCharged':
        case 'UsageCorrected':
          // Charges from before spend windows carry no instant; budgets did not exist then.
          if (e.data.charged_at !== undefined) charges.push([e.data.account_id, e.data.hold_id, e.data.amount_nano, e.data.charged_at]);
          if (e.type === 'UsageCharged') closed.push([e.data.account_id, e.data.hold_id]);
          break;
        case 'HoldReleased':
        case 'HoldExpired':
          closed.push([e.data.account_id, e.data.hold_id]);
          break;
      }
    }
    if (holds.length > 0) {
      const c = asTable(['text', 'text', 'text', 'text', 'text', 'text', 'bigint'], holds);
      await tx.query(
        `INSERT INTO guardrail_hold_budgets (account_id, hold_id, bucket, guardrail_id, scope, subject, amount_nano, open) SELECT *, true FROM ${c.table} AS d`,
        c.params,
      );
    }
    if (charges.length > 0) {
      const c = asTable(['text', 'text', 'bigint', 'timestamptz'], charges);
      await tx.query(
        `INSERT INTO guardrail_budget_charges (bucket, guardrail_id, scope, subject, account_id, hold_id, amount_nano, charged_at)
         SELECT h.bucket, h.guardrail_id, h.scope, h.subject, c.account_id, c.hold_id, c.amount_nano, c.charged_at
           FROM ${c.table} AS c(account_id, hold_id, amount_nano, charged_at)
           JOIN guardrail_hold_budgets h ON h.account_id = c.account_id AND h.hold_id = c.hold_id`,
        c.params,
      );
    }
    if (closed.length > 0) {
      const c = asTable(['text', 'text'], closed);
      await tx.query(
        `UPDATE guardrail_hold_budgets h SET open = false FROM ${c.table} AS c(account_id, hold_id) WHERE h.account_id = c.account_id AND h.hold_id = c.hold_id AND h.open`,
        c.params,
      );
    }
  },
};

export interface BudgetWindow {
  /** Charges in the current window (lifetime for `never`). */
  spent_nano: Nano;
  /** Open holds counted against it: requests still running. */
  held_nano: Nano;
  window_start: Date | null;
  resets_at: Date | null;
}

/** A budget's spend in the window of `reset` that contains `now`, as the read model has it. */
export async function budgetWindow(sql: SqlExecutor, bucket: string, reset: LimitReset, now: Date): Promise<BudgetWindow> {
  const start = reset === 'never' ? null : new Date(windowStartMs(reset, now.getTime()));
  const end = reset === 'never' ? null : new Date(windowEndMs(reset, now.getTime()));
  const { rows } = await sql.query<{ spent: string; held: string }>(
    `SELECT (SELECT COALESCE(SUM(amount_nano), 0)::text FROM guardrail_budget_charges
              WHERE bucket = $1 AND ($2::timestamptz IS NULL OR (charged_at >= $2 AND charged_at < $3))) AS spent,
            (SELECT COALESCE(SUM(amount_nano), 0)::text FROM guardrail_hold_budgets WHERE bucket = $1 AND open) AS held`,
    [bucket, start, end],
  );
  return {
    spent_nano: BigInt(rows[0]!.spent),
    held_nano: BigInt(rows[0]!.held),
    window_start: start,
    resets_at: end,
  };
}
