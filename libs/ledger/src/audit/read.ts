import type { EventStore, Position, RecordedEvent } from '@svc/eventstore';
import { START } from '@svc/eventstore';
import type { SqlExecutor, SqlRunner } from '@svc/platform';
import { accountStream } from '../account';
import type { BudgetRows, CreditRows, KeyUsageRow } from './compare';
import { STREAM_PREFIX } from './model';

/** The projections compared, by the names and tables of libs/projections/src/read-models. */
export const CREDITS_PROJECTION = 'credits';
export const KEY_USAGE_PROJECTION = 'key_usage';
/** Issue 44: guardrail budgets' spend (libs/guardrails), read by table as key_usage_daily is. */
export const BUDGETS_PROJECTION = 'guardrail_budgets';

/** Every account event in global order, or one account's stream, a page at a time. */
export async function* readAccountEvents(store: EventStore, account?: string, pageSize = 1000): AsyncGenerator<RecordedEvent> {
  if (account !== undefined) {
    for (let from = 0n; ;) {
      const page = await store.readStream(accountStream(account), { fromRevision: from, maxCount: pageSize });
      if (page.length === 0) return;
      yield* page;
      from = page[page.length - 1].revision + 1n;
    }
  }
  for (let after = START; ;) {
    const page = await store.readAll({ after, maxCount: pageSize });
    if (page.length === 0) return;
    for (const event of page) if (event.stream.startsWith(STREAM_PREFIX)) yield event;
    after = page[page.length - 1].position;
  }
}

export interface ProjectionSnapshot {
  checkpoints: { credits: Position; keyUsage: Position; budgets: Position };
  credits: CreditRows;
  keyUsage: KeyUsageRow[];
  budgets: BudgetRows;
}

/**
 * The projections' rows and checkpoints in one snapshot: each projection writes its rows and
 * checkpoint in one transaction, so under REPEATABLE READ the rows are exactly the log up to
 * the checkpoint, whatever a running worker does meanwhile.
 */
export async function readProjectionSnapshot(sql: SqlRunner, scope: { account?: string; keys?: readonly string[] } = {}): Promise<ProjectionSnapshot> {
  return sql.transaction(async (tx) => {
    await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
    const checkpoint = async (name: string) =>
      (await tx.query<{ position: string }>('SELECT position FROM projection_checkpoints WHERE name = $1', [name])).rows[0]?.position ?? START;
    const byAccount = scope.account === undefined ? '' : ' WHERE account_id = $1';
    const params = scope.account === undefined ? [] : [scope.account];
    const accounts = await tx.query<{
      account_id: string;
      purchased_nano: string;
      used_nano: string;
      adjusted_nano: string;
      held_nano: string;
      open_holds: number;
    }>(`SELECT account_id, purchased_nano::text, used_nano::text, adjusted_nano::text, held_nano::text, open_holds FROM credit_accounts${byAccount}`, params);
    const holds = await tx.query<{ hold_id: string; account_id: string; amount_nano: string }>(
      `SELECT hold_id, account_id, amount_nano::text FROM credit_holds${byAccount}`,
      params,
    );
    return {
      checkpoints: {
        credits: await checkpoint(CREDITS_PROJECTION),
        keyUsage: await checkpoint(KEY_USAGE_PROJECTION),
        budgets: await checkpoint(BUDGETS_PROJECTION),
      },
      credits: {
        accounts: accounts.rows.map((r) => ({
          accountId: r.account_id,
          purchasedNano: BigInt(r.purchased_nano),
          usedNano: BigInt(r.used_nano),
          adjustedNano: BigInt(r.adjusted_nano),
          heldNano: BigInt(r.held_nano),
          openHolds: Number(r.open_holds),
        })),
        holds: holds.rows.map((r) => ({ holdId: r.hold_id, accountId: r.account_id, amountNano: BigInt(r.amount_nano) })),
      },
      keyUsage: await readKeyUsage(tx, scope.keys),
      budgets: await readBudgets(tx, scope.account),
    };
  });
}

async function readBudgets(tx: SqlExecutor, account: string | undefined): Promise<BudgetRows> {
  const where = account === undefined ? '' : ' AND account_id = $1';
  const params = account === undefined ? [] : [account];
  const usage = await tx.query<{ bucket: string; day: string; cost_nano: string }>(
    `SELECT bucket, to_char(charged_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, SUM(amount_nano)::text AS cost_nano
       FROM guardrail_budget_charges WHERE true${where} GROUP BY 1, 2`,
    params,
  );
  const held = await tx.query<{ bucket: string; held_nano: string }>(
    `SELECT bucket, SUM(amount_nano)::text AS held_nano FROM guardrail_hold_budgets WHERE open${where} GROUP BY 1`,
    params,
  );
  return {
    usage: usage.rows.map((r) => ({ bucket: r.bucket, day: r.day, costNano: BigInt(r.cost_nano) })),
    held: held.rows.map((r) => ({ bucket: r.bucket, heldNano: BigInt(r.held_nano) })),
  };
}

async function readKeyUsage(tx: SqlExecutor, keys: readonly string[] | undefined): Promise<KeyUsageRow[]> {
  const { rows } = await tx.query<{ key_id: string; day: string; cost_nano: string }>(
    `SELECT key_id, day::text AS day, cost_nano::text FROM key_usage_daily${keys ? ' WHERE key_id = ANY($1::text[])' : ''}`,
    keys ? [keys] : [],
  );
  return rows.map((r) => ({ keyId: r.key_id, day: r.day, costNano: BigInt(r.cost_nano) }));
}
