import { JobQueue } from '@svc/jobs';
import type { SqlRunner } from '@svc/platform';
import { VIDEO_JOB_KIND, VideoJobs } from './jobs';
import { memoryPglite } from '@svc/platform/testing/pglite';

describe('a database whose videos kept their own due time and lease in video_jobs, on upgrade', () => {
  let sql: SqlRunner;
  beforeAll(async () => {
    sql = await memoryPglite();
    await JobQueue.init(sql);
    await sql.exec(`
      CREATE TABLE video_jobs (
        video_id text PRIMARY KEY, account_id text NOT NULL, workspace_id text NOT NULL, key_id text NOT NULL,
        request text NOT NULL, reservation jsonb NOT NULL, due_at timestamptz, owner text, lease_until timestamptz,
        video_file_id text, thumbnail_file_id text
      );
      INSERT INTO video_jobs VALUES
        ('video_polling', 'a1', 'w1', 'k1', 'sealed', '{}', '2026-11-02T10:00:05Z', NULL, NULL, NULL, NULL),
        ('video_held', 'a1', 'w1', 'k1', 'sealed', '{}', '2026-11-02T10:00:00Z', 'worker-1', '2026-11-02T10:01:00Z', NULL, NULL),
        ('video_done', 'a1', 'w1', 'k1', 'sealed', '{}', NULL, NULL, NULL, 'file_1', NULL);
    `);
  });
  afterAll(() => sql.close());

  it('every video still due becomes a job at its due time, a held one still held until its lease ends; the lease columns go, the content stays; a second start changes nothing', async () => {
    await VideoJobs.init(sql);
    await VideoJobs.init(sql);
    const { rows } = await sql.query<{ key: string; due_at: Date; owner: string | null }>(`SELECT key, due_at, owner FROM jobs WHERE kind = $1 ORDER BY key`, [
      VIDEO_JOB_KIND,
    ]);
    expect(rows.map((r) => [r.key, new Date(r.due_at).toISOString(), r.owner])).toEqual([
      ['video_held', '2026-11-02T10:00:00.000Z', 'worker-1'],
      ['video_polling', '2026-11-02T10:00:05.000Z', null],
    ]);
    const columns = await sql.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns WHERE table_name = 'video_jobs' AND table_schema = current_schema() ORDER BY column_name`,
    );
    expect(columns.rows.map((c) => c.column_name)).not.toEqual(expect.arrayContaining(['due_at']));
    expect(columns.rows.map((c) => c.column_name)).not.toEqual(expect.arrayContaining(['lease_until']));
    expect(await new VideoJobs(sql, () => null).files('video_done')).toEqual({ video: 'file_1', thumbnail: null });
  });
});
