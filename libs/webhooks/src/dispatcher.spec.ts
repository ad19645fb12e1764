import { JobQueue } from '@svc/jobs';
import type { SqlRunner } from '@svc/platform';
import { WEBHOOK_DELIVERY_JOB } from './delivery-workflow';
import { upgradeWebhookClaims } from './dispatcher';
import { memoryPglite } from '@svc/platform/testing/pglite';

describe('a database whose deliveries were claimed in webhook_claims, on upgrade', () => {
  let sql: SqlRunner;
  beforeAll(async () => {
    sql = await memoryPglite();
    await JobQueue.init(sql);
    await sql.exec(`
      CREATE TABLE webhook_claims (event_id text NOT NULL, attempt integer NOT NULL, owner text NOT NULL, lease_until timestamptz NOT NULL, PRIMARY KEY (event_id, attempt));
      INSERT INTO webhook_claims VALUES ('evt_retry', 1, 'worker-1', '2026-11-02T10:01:00Z');
      CREATE TABLE webhook_events (event_id text PRIMARY KEY, state text NOT NULL, next_attempt_at timestamptz);
      INSERT INTO webhook_events VALUES
        ('evt_new', 'pending', '2026-11-02T10:00:00Z'),
        ('evt_retry', 'pending', '2026-11-02T10:30:00Z'),
        ('evt_redeliver', 'delivered', '2026-11-02T10:05:00Z'),
        ('evt_done', 'delivered', NULL),
        ('evt_cancelled', 'cancelled', NULL);
    `);
  });
  afterAll(() => sql.close());

  it('every event still due becomes a job at its due time, and the claims table goes; a second start changes nothing', async () => {
    await upgradeWebhookClaims(sql);
    await upgradeWebhookClaims(sql);
    const { rows } = await sql.query<{ key: string; due_at: Date }>(`SELECT key, due_at FROM jobs WHERE kind = $1 ORDER BY key`, [WEBHOOK_DELIVERY_JOB]);
    expect(rows.map((r) => [r.key, new Date(r.due_at).toISOString()])).toEqual([
      ['evt_new', '2026-11-02T10:00:00.000Z'],
      ['evt_redeliver', '2026-11-02T10:05:00.000Z'],
      ['evt_retry', '2026-11-02T10:30:00.000Z'],
    ]);
    expect((await sql.query(`SELECT to_regclass('webhook_claims') AS t`)).rows[0]).toEqual({ t: null });
  });
});
