import type { AccountEvent } from '../account';
import type { SqlExecutor } from '@svc/platform';
import { asTable, eventTime, type Projection } from '@svc/projections';
import type { AccountRecorded, RecordedOf } from './account-recorded';

export type { AccountRecorded } from './account-recorded';

/** What a batch changes in one account's row. */
interface AccountDelta {
  /** Set when the batch opened the account: its row is inserted, not updated. */
  openedAt: string | null;
  purchasedNano: bigint;
  usedNano: bigint;
  adjustedNano: bigint;
  heldNano: bigint;
  openHolds: number;
  dailyLimit: { nano: string | null } | null;
  /** Every event of the account touches its row: the time of the batch's last one. */
  updatedAt: string;
}

interface OpenHold {
  accountId: string;
  amountNano: string;
  expiresAt: string;
  gatewayId: string | null;
}

/**
 * Balance and lifetime totals per account (GET /v1/credits). A batch is folded in memory and
 * written with a handful of statements: holds placed and closed within it never reach the
 * database; holds closed from earlier batches are deleted in one statement that returns their
 * amounts.
 */
export const creditsProjection: Projection = {
  name: 'credits',
  tables: ['credit_holds', 'credit_accounts'],
  schema: [
    `CREATE TABLE IF NOT EXISTS credit_accounts (
      account_id text PRIMARY KEY,
      purchased_nano bigint NOT NULL DEFAULT 0,
      used_nano bigint NOT NULL DEFAULT 0,
      held_nano bigint NOT NULL DEFAULT 0,
      open_holds integer NOT NULL DEFAULT 0,
      daily_limit_nano bigint,
      opened_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    )`,
    `CREATE TABLE IF NOT EXISTS credit_holds (
      hold_id text PRIMARY KEY,
      account_id text NOT NULL,
      amount_nano bigint NOT NULL,
      expires_at timestamptz NOT NULL
    )`,
    `CREATE INDEX IF NOT EXISTS credit_holds_expiry ON credit_holds (expires_at)`,
    // The serving process that placed the hold (HoldPlaced's metadata), for the hold reaper.
    `ALTER TABLE credit_holds ADD COLUMN IF NOT EXISTS gateway_id text`,
    // Issue 23: credit notes and operator adjustments, signed; the balance is purchased - used + adjusted.
    // No BalanceAdjusted predates the column, so 0 is right for existing rows without a rebuild.
    `ALTER TABLE credit_accounts ADD COLUMN IF NOT EXISTS adjusted_nano bigint NOT NULL DEFAULT 0`,
  ],
  eventTypes: new Set<AccountEvent['type']>([
    'AccountOpened',
    'CreditsAdded',
    'HoldPlaced',
    'UsageCharged',
    'UsageCorrected',
    'HoldReleased',
    'HoldExpired',
    'DailyLimitSet',
    'BalanceAdjusted',
  ]),
  apply: async (events: readonly AccountRecorded[], tx) => {
    const batch = new CreditsBatch();
    for (const e of events) batch.fold(e);
    await deleteClosedEarlier(tx, batch);
    await insertPlaced(tx, batch.placed);
    await writeAccounts(tx, batch.accounts);
  },
};

/** A batch folded in memory: what it changes per account, the holds it leaves open, those of earlier batches it closes. */
class CreditsBatch {
  readonly accounts = new Map<string, AccountDelta>();
  readonly placed = new Map<string, OpenHold>();
  /** Holds of earlier batches closed by this one, with the account each close names. */
  readonly closedEarlier = new Map<string, string>();

  fold(e: AccountRecorded): void {
    const at = eventTime(e);
    let delta = this.accounts.get(e.data.account_id);
    if (e.type === 'AccountOpened' || !delta) {
      delta = { openedAt: null, purchasedNano: 0n, usedNano: 0n, adjustedNano: 0n, heldNano: 0n, openHolds: 0, dailyLimit: null, updatedAt: at };
      this.accounts.set(e.data.account_id, delta);
    }
    delta.updatedAt = at;
    switch (e.type) {
      case 'AccountOpened':
        delta.openedAt = at;
        break;
      case 'CreditsAdded':
        delta.purchasedNano += BigInt(e.data.amount_nano);
        break;
      case 'BalanceAdjusted':
        delta.adjustedNano += BigInt(e.data.amount_nano);
        break;
      case 'HoldPlaced':
        this.holdPlaced(e, delta);
        break;
      // Issue 41 D: its hold was closed by the reaper's charge; only the difference is new.
      case 'UsageCorrected':
        delta.usedNano += BigInt(e.data.amount_nano);
        break;
      case 'UsageCharged':
      case 'HoldReleased':
      case 'HoldExpired':
        this.holdClosed(e, delta);
        break;
      case 'DailyLimitSet':
        delta.dailyLimit = { nano: e.data.limit_nano };
        break;
    }
  }

  private holdPlaced(e: RecordedOf<'HoldPlaced'>, delta: AccountDelta): void {
    this.placed.set(e.data.hold_id, {
      accountId: e.data.account_id,
      amountNano: e.data.amount_nano,
      expiresAt: e.data.expires_at,
      gatewayId: typeof e.metadata.gateway === 'string' ? e.metadata.gateway : null,
    });
    delta.heldNano += BigInt(e.data.amount_nano);
    delta.openHolds += 1;
  }

  private holdClosed(e: RecordedOf<'UsageCharged' | 'HoldReleased' | 'HoldExpired'>, delta: AccountDelta): void {
    if (e.type === 'UsageCharged') delta.usedNano += BigInt(e.data.amount_nano);
    const hold = this.placed.get(e.data.hold_id);
    if (hold) {
      this.placed.delete(e.data.hold_id);
      delta.heldNano -= BigInt(hold.amountNano);
      delta.openHolds -= 1;
    } else if (!this.closedEarlier.has(e.data.hold_id)) this.closedEarlier.set(e.data.hold_id, e.data.account_id);
  }
}

/** The holds of earlier batches this one closed, deleted; their amounts leave their accounts' deltas. */
async function deleteClosedEarlier(tx: SqlExecutor, { accounts, closedEarlier }: CreditsBatch): Promise<void> {
  if (closedEarlier.size === 0) return;
  const { rows } = await tx.query<{ hold_id: string; amount_nano: string }>(
    'DELETE FROM credit_holds WHERE hold_id = ANY($1::text[]) RETURNING hold_id, amount_nano',
    [[...closedEarlier.keys()]],
  );
  for (const r of rows) {
    const delta = accounts.get(closedEarlier.get(r.hold_id)!)!;
    delta.heldNano -= BigInt(r.amount_nano);
    delta.openHolds -= 1;
  }
}

async function insertPlaced(tx: SqlExecutor, placed: Map<string, OpenHold>): Promise<void> {
  if (placed.size === 0) return;
  const holds = asTable(
    ['text', 'text', 'bigint', 'timestamptz', 'text'],
    [...placed].map(([id, h]) => [id, h.accountId, h.amountNano, h.expiresAt, h.gatewayId]),
  );
  await tx.query(`INSERT INTO credit_holds (hold_id, account_id, amount_nano, expires_at, gateway_id) SELECT * FROM ${holds.table} AS d`, holds.params);
}

const ACCOUNT_COLUMNS = ['text', 'bigint', 'bigint', 'bigint', 'bigint', 'integer', 'boolean', 'bigint', 'timestamptz', 'timestamptz'];

const accountRow = ([id, d]: [string, AccountDelta]) => [
  id,
  d.purchasedNano.toString(),
  d.usedNano.toString(),
  d.heldNano.toString(),
  d.adjustedNano.toString(),
  d.openHolds,
  d.dailyLimit !== null,
  d.dailyLimit?.nano ?? null,
  d.openedAt,
  d.updatedAt,
];

/** The rows of the accounts the batch opened, inserted; the others' deltas added to their rows. */
async function writeAccounts(tx: SqlExecutor, accounts: Map<string, AccountDelta>): Promise<void> {
  const opened = [...accounts].filter(([, d]) => d.openedAt !== null);
  if (opened.length > 0) {
    const c = asTable(ACCOUNT_COLUMNS, opened.map(accountRow));
    await tx.query(
      `INSERT INTO credit_accounts (account_id, purchased_nano, used_nano, held_nano, adjusted_nano, open_holds, daily_limit_nano, opened_at, updated_at)
         SELECT account_id, purchased, used, held, adjusted, open_holds, daily_limit, opened_at, updated_at
           FROM ${c.table} AS d(account_id, purchased, used, held, adjusted, open_holds, limit_set, daily_limit, opened_at, updated_at)`,
      c.params,
    );
  }
  const existing = [...accounts].filter(([, d]) => d.openedAt === null);
  if (existing.length > 0) {
    const c = asTable(ACCOUNT_COLUMNS, existing.map(accountRow));
    // An account the log never opened has no row, and stays without one.
    await tx.query(
      `UPDATE credit_accounts a SET purchased_nano = a.purchased_nano + d.purchased, used_nano = a.used_nano + d.used,
                held_nano = a.held_nano + d.held, adjusted_nano = a.adjusted_nano + d.adjusted, open_holds = a.open_holds + d.open_holds,
                daily_limit_nano = CASE WHEN d.limit_set THEN d.daily_limit ELSE a.daily_limit_nano END, updated_at = d.updated_at
           FROM ${c.table} AS d(account_id, purchased, used, held, adjusted, open_holds, limit_set, daily_limit, opened_at, updated_at)
          WHERE a.account_id = d.account_id`,
      c.params,
    );
  }
}

export interface CreditsRow {
  purchasedNano: bigint;
  usedNano: bigint;
  /** Issue 23: credit notes and operator adjustments, signed. */
  adjustedNano: bigint;
  heldNano: bigint;
  openHolds: number;
  dailyLimitNano: bigint | null;
}

export async function getCredits(sql: SqlExecutor, accountId: string): Promise<CreditsRow | null> {
  const { rows } = await sql.query<{
    purchased_nano: string;
    used_nano: string;
    adjusted_nano: string;
    held_nano: string;
    open_holds: number;
    daily_limit_nano: string | null;
  }>('SELECT purchased_nano, used_nano, adjusted_nano, held_nano, open_holds, daily_limit_nano FROM credit_accounts WHERE account_id = $1', [accountId]);
  const r = rows[0];
  if (!r) return null;
  return {
    purchasedNano: BigInt(r.purchased_nano),
    usedNano: BigInt(r.used_nano),
    adjustedNano: BigInt(r.adjusted_nano),
    heldNano: BigInt(r.held_nano),
    openHolds: Number(r.open_holds),
    dailyLimitNano: r.daily_limit_nano === null ? null : BigInt(r.daily_limit_nano),
  };
}

/** Accounts with a hold open past its expiry at `now`, for the expiry sweeper. */
export async function accountsWithExpiredHolds(sql: SqlExecutor, now: Date, limit = 1000): Promise<string[]> {
  const { rows } = await sql.query<{ account_id: string }>('SELECT DISTINCT account_id FROM credit_holds WHERE expires_at <= $1 ORDER BY account_id LIMIT $2', [
    now.toISOString(),
    limit,
  ]);
  return rows.map((r) => r.account_id);
}

/** The settled balance GET /v1/credits and GET /admin/accounts/{id} show: credits - usage + adjustments (issue 23). */
export function balanceOf(row: Pick<CreditsRow, 'purchasedNano' | 'usedNano' | 'adjustedNano'>): bigint {
  return row.purchasedNano - row.usedNano + row.adjustedNano;
}
