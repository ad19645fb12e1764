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
      opened_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    )`,
    `CREATE TABLE IF NOT EXISTS credit_holds (
      hold_id text PRIMARY KEY,
      account_id text NOT NULL,
      amount_nano bigint NOT NULL
    )`,
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
      await tx.query('INSERT INTO credit_holds (hold_id, account_id, amount_nano) VALUES ($1, $2, $3)', [e.data.hold_id, e.data.account_id, e.data.amount_nano]);
      await tx.query(
        'UPDATE credit_accounts SET held_nano = held_nano + $2, open_holds = open_holds + 1, updated_at = $3 WHERE account_id = $1',
        [e.data.account_id, e.data.amount_nano, eventTime(e)],
      );
    },
    UsageCharged: async (e: Ev<'UsageCharged'>, tx) => closeHold(tx, e, e.data.amount_nano),
    HoldReleased: async (e: Ev<'HoldReleased'>, tx) => closeHold(tx, e, '0'),
  },
};

async function closeHold(tx: SqlExecutor, e: Ev<'UsageCharged' | 'HoldReleased'>, chargedNano: string): Promise<void> {
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
}

export async function getCredits(sql: SqlExecutor, accountId: string): Promise<CreditsRow | null> {
  const { rows } = await sql.query<{ purchased_nano: string; used_nano: string; held_nano: string; open_holds: number }>(
    'SELECT purchased_nano, used_nano, held_nano, open_holds FROM credit_accounts WHERE account_id = $1',
    [accountId],
  );
  const r = rows[0];
  if (!r) return null;
  return { purchasedNano: BigInt(r.purchased_nano), usedNano: BigInt(r.used_nano), heldNano: BigInt(r.held_nano), openHolds: Number(r.open_holds) };
}
