import { JobQueue } from '@svc/jobs';
import type { SqlRunner } from '@svc/platform';
import { BATCH_LINE_JOB } from './line-workflow';
import { BatchLines } from './lines';
import { memoryPglite } from '@svc/platform/testing/pglite';

describe('a database whose batch lines kept their own leases in batch_lines, on upgrade', () => {
  let sql: SqlRunner;
  beforeAll(async () => {
    sql = await memoryPglite();
    await JobQueue.init(sql);
    await sql.exec(`
      CREATE TABLE batch_lines (
        batch_id text NOT NULL, line integer NOT NULL, request text NOT NULL, status text NOT NULL DEFAULT 'pending',
        attempt integer NOT NULL DEFAULT 0, owner text, lease_until timestamptz, kept jsonb, outcome text, result text,
        PRIMARY KEY (batch_id, line)
      );
      INSERT INTO batch_lines (batch_id, line, request, status, attempt, owner, lease_until, kept, outcome) VALUES
        ('batch_a', 1, 'sealed', 'pending', 0, NULL, NULL, NULL, NULL),
        ('batch_a', 2, 'sealed', 'running', 2, 'worker-1', '2026-11-02T10:01:00Z', NULL, NULL),
        ('batch_a', 3, 'sealed', 'answered', 1, 'worker-1', '2026-11-02T09:59:00Z', '{"hold": "h"}', NULL),
        ('batch_a', 4, 'sealed', 'done', 1, NULL, NULL, NULL, 'completed');
    `);
  });
  afterAll(() => sql.close());

  it('every line without an outcome becomes a job, a held one still held until its lease ends; the lease columns go, the rest stays; a second start changes nothing', async () => {
    await BatchLines.init(sql);
    await BatchLines.init(sql);
    const { rows } = await sql.query<{ key: string; owner: string | null; epoch: number; lease_until: Date | null }>(
      `SELECT key, owner, epoch, lease_until FROM jobs WHERE kind = $1 ORDER BY key`,
      [BATCH_LINE_JOB],
    );
    expect(rows.map((r) => [r.key, r.owner, r.epoch, r.lease_until && new Date(r.lease_until).toISOString()])).toEqual([
      ['batch_a:1', null, 0, null],
      ['batch_a:2', 'worker-1', 2, '2026-11-02T10:01:00.000Z'],
      ['batch_a:3', 'worker-1', 1, '2026-11-02T09:59:00.000Z'],
    ]);
    const columns = await sql.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns WHERE table_name = 'batch_lines' AND table_schema = current_schema() ORDER BY column_name`,
    );
    expect(columns.rows.map((c) => c.column_name)).toEqual(['attempt', 'batch_id', 'kept', 'line', 'outcome', 'request', 'result', 'status']);
    const lines = new BatchLines(sql, () => null);
    expect(await lines.line('batch_a', 3)).toEqual({ row: { status: 'answered', attempt: 1, kept: { hold: 'h' } }, request: null });

    // The held line goes to no one before its lease ends; then its next holder's attempt is a new one.
    const queue = new JobQueue(sql);
    const claim = (at: string) => queue.claim(BATCH_LINE_JOB, 'worker-2', new Date(at), new Date('2026-11-02T11:00:00Z'), 10, ['batch_a']);
    expect((await claim('2026-11-02T10:00:00Z')).map((j) => [j.key, j.epoch])).toEqual([
      ['batch_a:1', 1],
      ['batch_a:3', 2],
    ]);
    expect((await claim('2026-11-02T10:01:01Z')).map((j) => [j.key, j.epoch])).toEqual([['batch_a:2', 3]]);
  });
});
