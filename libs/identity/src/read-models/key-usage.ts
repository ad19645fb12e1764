import type { RecordedEvent } from '@svc/eventstore';
import type { AccountEvent } from '@svc/ledger';
import type { SqlExecutor } from '@svc/platform';
import { asTable, eventTime, utcDay, type Projection } from '@svc/projections';

/** Spend per key per UTC day, for key usage per period (spec 2.2): one upsert per batch. */
export const keyUsageProjection: Projection = {
  name: 'key_usage',
  tables: ['key_usage_daily'],
  schema: [
    `CREATE TABLE IF NOT EXISTS key_usage_daily (
      key_id text NOT NULL,
      day date NOT NULL,
      cost_nano bigint NOT NULL,
      PRIMARY KEY (key_id, day)
    )`,
  ],
  // Issue 41 D: a correction adds what it charges beyond the reaper's charge, on its own instant.
  eventTypes: new Set(['UsageCharged', 'UsageCorrected']),
  apply: async (
    events: readonly RecordedEvent<'UsageCharged' | 'UsageCorrected', Extract<AccountEvent, { type: 'UsageCharged' | 'UsageCorrected' }>['data']>[],
    tx,
  ) => {
    const sums = new Map<string, [keyId: string, day: string, costNano: bigint]>();
    for (const e of events) {
      // The decider counts a charge in the window of charged_at (absent on the oldest events).
      const day = utcDay(e.data.charged_at ?? eventTime(e));
      const slot = `${e.data.key_id}\u0000${day}`;
      const sum = sums.get(slot) ?? [e.data.key_id, day, 0n];
      sum[2] += BigInt(e.data.amount_nano);
      sums.set(slot, sum);
    }
    const c = asTable(
      ['text', 'date', 'bigint'],
      [...sums.values()].map(([keyId, day, cost]) => [keyId, day, cost.toString()]),
    );
    await tx.query(
      `INSERT INTO key_usage_daily (key_id, day, cost_nano) SELECT * FROM ${c.table} AS d
       ON CONFLICT (key_id, day) DO UPDATE SET cost_nano = key_usage_daily.cost_nano + EXCLUDED.cost_nano`,
      c.params,
    );
  },
};

export interface KeyUsage {
  lifetimeNano: bigint;
  dailyNano: bigint;
  /** Since Monday 00:00 UTC (spec 3.3). */
  weeklyNano: bigint;
  monthlyNano: bigint;
}

/** Usage of keys per period, as of `now` (the injected clock). */
export async function keyUsage(sql: SqlExecutor, keyIds: string[], now: Date): Promise<Map<string, KeyUsage>> {
  const { rows } = await sql.query<{ key_id: string; lifetime: string; daily: string; weekly: string; monthly: string }>(
    `WITH today AS (SELECT ($2::timestamptz AT TIME ZONE 'UTC')::date AS d)
     SELECT key_id,
            SUM(cost_nano)::text AS lifetime,
            COALESCE(SUM(cost_nano) FILTER (WHERE day = today.d), 0)::text AS daily,
            COALESCE(SUM(cost_nano) FILTER (WHERE day >= date_trunc('week', today.d)::date), 0)::text AS weekly,
            COALESCE(SUM(cost_nano) FILTER (WHERE day >= date_trunc('month', today.d)::date), 0)::text AS monthly
       FROM key_usage_daily, today
      WHERE key_id = ANY($1::text[]) AND day <= today.d
      GROUP BY key_id`,
    [keyIds, now.toISOString()],
  );
  const zero: KeyUsage = { lifetimeNano: 0n, dailyNano: 0n, weeklyNano: 0n, monthlyNano: 0n };
  const out = new Map(keyIds.map((id) => [id, zero]));
  for (const r of rows) {
    out.set(r.key_id, { lifetimeNano: BigInt(r.lifetime), dailyNano: BigInt(r.daily), weeklyNano: BigInt(r.weekly), monthlyNano: BigInt(r.monthly) });
  }
  return out;
}
