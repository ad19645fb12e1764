import type { SqlRunner } from '@svc/platform';
import { moveLeasesToJobs, type LeaseMove } from './move-leases';
import { JobQueue } from './queue';
import { memoryPglite } from '@svc/platform/testing/pglite';

describe("an old table's leases moved into the job table at start-up", () => {
  let sql: SqlRunner;
  const move: LeaseMove = {
    table: 'old_tasks',
    probeColumn: 'lease_until',
    columns: ['kind', 'key', 'due_at', 'owner', 'lease_until'],
    select: `SELECT 'task', id, due_at, owner, lease_until FROM old_tasks WHERE due_at IS NOT NULL`,
    dropColumns: ['due_at', 'owner', 'lease_until'],
  };
  const columns = async () =>
    (
      await sql.query<{ column_name: string }>(
        `SELECT column_name FROM information_schema.columns WHERE table_name = 'old_tasks' AND table_schema = current_schema() ORDER BY column_name`,
      )
    ).rows.map((c) => c.column_name);

  beforeAll(async () => {
    sql = await memoryPglite();
    await JobQueue.init(sql);
    await sql.exec(`
      CREATE TABLE old_tasks (id text PRIMARY KEY, payload text, due_at timestamptz, owner text, lease_until timestamptz);
      INSERT INTO old_tasks VALUES
        ('held', 'p1', '2026-11-02T10:00:00Z', 'worker-1', '2026-11-02T10:01:00Z'),
        ('due', 'p2', '2026-11-02T10:00:05Z', NULL, NULL),
        ('scheduled', 'p3', '2026-11-02T10:00:09Z', NULL, NULL),
        ('ended', 'p4', NULL, NULL, NULL);
      INSERT INTO jobs (kind, key, due_at) VALUES ('task', 'scheduled', '2026-11-02T11:00:00Z');
    `);
  });
  afterAll(() => sql.close());

  it('makes a job of each row selected, leaves a job already there as it is, drops the columns, and does nothing the second time', async () => {
    await moveLeasesToJobs(sql, move);
    await moveLeasesToJobs(sql, move);
    const { rows } = await sql.query<{ key: string; due_at: Date; owner: string | null }>(
      `SELECT key, due_at, owner FROM jobs WHERE kind = 'task' ORDER BY key`,
    );
    expect(rows.map((r) => [r.key, new Date(r.due_at).toISOString(), r.owner])).toEqual([
      ['due', '2026-11-02T10:00:05.000Z', null],
      ['held', '2026-11-02T10:00:00.000Z', 'worker-1'],
      ['scheduled', '2026-11-02T11:00:00.000Z', null],
    ]);
    expect(await columns()).toEqual(['id', 'payload']);
  });
});
