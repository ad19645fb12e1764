import type { AccountEvent } from '../../../ledger/src/account';
import type { SqlExecutor } from '../../../platform/src/sql';
import { eventTime, type Projection } from '../projection';
import type { RecordedEvent } from '../../../eventstore/src/port';

type Ev<T extends AccountEvent['type']> = RecordedEvent<T, Extract<AccountEvent, { type: T }>['data']>;

/** Balance and lifetime totals per account (GET /v1/credits). */
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
  ],
  handlers: {
    AccountOpened: async (e: Ev<'AccountOpened'>, tx) => {
      await tx.query('INSERT INTO credit_accounts (account_id, opened_at, updated_at) VALUES ($1, $2, $2)', [e.data.account_id, eventTime(e)]);
    },
    CreditsAdded: async (e: Ev<'CreditsAdded'>, tx) => {
      await tx.query('UPDATE credit_accounts SET purchased_nano = purchased_nano + $2, updated_at = $3 WHERE account_id = $1', [
        e.data.account_id,
        e.data.amount_nano,
        eventTime(e),
      ]);
    },
    HoldPlaced: async (e: Ev<'HoldPlaced'>, tx) => {
      await tx.query('INSERT INTO credit_holds (hold_id, account_id, amount_nano, expires_at) VALUES ($1, $2, $3, $4)', [
        e.data.hold_id,
        e.data.account_id,
        e.data.amount_nano,
        e.data.expires_at,
      ]);
      await tx.query(
        'UPDATE credit_accounts SET held_nano = held_nano + $2, open_holds = open_holds + 1, updated_at = $3 WHERE account_id = $1',
        [e.data.account_id, e.data.amount_nano, eventTime(e)],
      );
    },
    UsageCharged: async (e: Ev<'UsageCharged'>, tx) => closeHold(tx, e, e.data.amount_nano),
    HoldReleased: async (e: Ev<'HoldReleased'>, tx) => closeHold(tx, e, '0'),
    HoldExpired: async (e: Ev<'HoldExpired'>, tx) => closeHold(tx, e, '0'),
    DailyLimitSet: async (e: Ev<'DailyLimitSet'>, tx) => {
      await tx.query('UPDATE credit_accounts SET daily_limit_nano = $2, updated_at = $3 WHERE account_id = $1', [e.data.account_id, e.data.limit_nano, eventTime(e)]);
    },
  },
};

async function closeHold(tx: SqlExecutor, e: Ev<'UsageCharged' | 'HoldReleased' | 'HoldExpired'>, chargedNano: string): Promise<void> {
  const { rows } = await tx.query<{ amount_nano: string }>('DELETE FROM credit_holds WHERE hold_id = $1 RETURNING amount_nano', [e.data.hold_id]);
  const held = rows[0]?.amount_nano ?? '0';
  await tx.query(
    `UPDATE credit_accounts SET held_nano = held_nano - $2, open_holds = open_holds - $3, used_nano = used_nano + $4, updated_at = $5
     WHERE account_id = $1`,
    [e.data.account_id, held, rows.length, chargedNano, eventTime(e)],
  );
}

export interface CreditsRow {
  purchasedNano: bigint;
  usedNano: bigint;
  heldNano: bigint;
  openHolds: number;
  dailyLimitNano: bigint | null;
}

export async function getCredits(sql: SqlExecutor, accountId: string): Promise<CreditsRow | null> {
  const { rows } = await sql.query<{ purchased_nano: string; used_nano: string; held_nano: string; open_holds: number; daily_limit_nano: string | null }>(
    'SELECT purchased_nano, used_nano, held_nano, open_holds, daily_limit_nano FROM credit_accounts WHERE account_id = $1',
    [accountId],
  );
  const r = rows[0];
  if (!r) return null;
  return {
    purchasedNano: BigInt(r.purchased_nano),
    usedNano: BigInt(r.used_nano),
    heldNano: BigInt(r.held_nano),
    openHolds: Number(r.open_holds),
    dailyLimitNano: r.daily_limit_nano === null ? null : BigInt(r.daily_limit_nano),
  };
}

/** Accounts with a hold open past its expiry at `now`, for the expiry sweeper. */
export async function accountsWithExpiredHolds(sql: SqlExecutor, now: Date, limit = 1000): Promise<string[]> {
  const { rows } = await sql.query<{ account_id: string }>(
    'SELECT DISTINCT account_id FROM credit_holds WHERE expires_at <= $1 ORDER BY account_id LIMIT $2',
    [now.toISOString(), limit],
  );
  return rows.map((r) => r.account_id);
}
