/**
 * What a video keeps beside its stream. Content stays out of the events (ARCHITECTURE section
 * 4): the prompt and the first frame's URL are sealed under SVC_ENCRYPTION_KEY here, and the
 * clip and its poster are files of purpose `video` in the file store. The reservation (ids,
 * targets and the amount held, no content) is kept so that any worker can settle the hold.
 *
 * When a worker looks at the video is the job table's (`(video, <id>)`, libs/jobs); this table
 * kept its own due time and lease until the job table existed, and hands them over on upgrade.
 */
import { SealedContent } from '@svc/conversations';
import type { Reservation } from '@svc/metering';
import { moveLeasesToJobs, scheduleJob } from '@svc/jobs';
import { createSchema, DomainError, type SqlRunner } from '@svc/platform';
import type { VideoRequest } from './request';

export const VIDEO_JOBS_TABLE = 'video_jobs';

/** The job kind of videos in the job table (the workflow's, ./workflow). */
export const VIDEO_JOB_KIND = 'video';

/** A video's ids and hold, as any worker reads them. */
export interface ClaimedVideo {
  videoId: string;
  accountId: string;
  workspaceId: string;
  keyId: string;
  reservation: Reservation;
}

/** The files of a completed video in the file store (purpose `video`). */
export interface VideoFiles {
  video: string | null;
  thumbnail: string | null;
}

const requestContext = (videoId: string) => `video-request:${videoId}`;

/** Without SVC_ENCRYPTION_KEY no prompt can be kept or read: the configuration is at fault, not the request. */
export function videoStorageUnavailable(): DomainError {
  return DomainError.unavailable('Videos need SVC_ENCRYPTION_KEY to keep their prompts.', 'storage_unavailable');
}

export class VideoJobs {
  private readonly sealed: SealedContent;

  constructor(
    private readonly sql: SqlRunner,
    key: () => Buffer | null,
  ) {
    this.sealed = new SealedContent(key, videoStorageUnavailable);
  }

  static async init(sql: SqlRunner): Promise<void> {
    await createSchema(
      sql,
      `
      CREATE TABLE IF NOT EXISTS ${VIDEO_JOBS_TABLE} (
        video_id text PRIMARY KEY,
        account_id text NOT NULL,
        workspace_id text NOT NULL,
        key_id text NOT NULL,
        request text NOT NULL,
        reservation jsonb NOT NULL,
        video_file_id text,
        thumbnail_file_id text
      );
    `,
    );
    // Issue "one job runner": a database of before keeps each video's due time and lease here.
    // Every video still due becomes a job at that time, once, and the columns go: a video held by
    // a worker of the old version keeps its lease, so no new worker steps in before it runs out,
    // and then the workflow carries on from the stream.
    await moveLeasesToJobs(sql, {
      table: VIDEO_JOBS_TABLE,
      probeColumn: 'due_at',
      columns: ['kind', 'key', 'due_at', 'owner', 'lease_until'],
      select: `SELECT '${VIDEO_JOB_KIND}', video_id, due_at, owner, lease_until FROM ${VIDEO_JOBS_TABLE} WHERE due_at IS NOT NULL`,
      dropColumns: ['due_at', 'owner', 'lease_until'],
    });
  }

  /** Whether prompts can be kept and read (SVC_ENCRYPTION_KEY is set). */
  get available(): boolean {
    return this.sealed.available;
  }

  /** Keeps a new video's request and hold, and its job, due at `dueAt`. */
  async add(job: Omit<ClaimedVideo, 'reservation'> & { reservation: Reservation; request: VideoRequest; dueAt: Date }): Promise<void> {
    const sealed = this.sealed.seal(JSON.stringify(job.request), requestContext(job.videoId));
    await this.sql.transaction(async (tx) => {
      await tx.query(`INSERT INTO ${VIDEO_JOBS_TABLE} (video_id, account_id, workspace_id, key_id, request, reservation) VALUES ($1, $2, $3, $4, $5, $6)`, [
        job.videoId,
        job.accountId,
        job.workspaceId,
        job.keyId,
        sealed,
        JSON.stringify(job.reservation),
      ]);
      await scheduleJob(tx, VIDEO_JOB_KIND, job.videoId, job.dueAt);
    });
  }

  /** The video's ids and hold; null once it is forgotten. */
  async get(videoId: string): Promise<ClaimedVideo | null> {
    const { rows } = await this.sql.query<Record<string, any>>(
      `SELECT video_id, account_id, workspace_id, key_id, reservation FROM ${VIDEO_JOBS_TABLE} WHERE video_id = $1`,
      [videoId],
    );
    if (rows.length === 0) return null;
    const r = rows[0];
    return {
      videoId: r.video_id,
      accountId: r.account_id,
      workspaceId: r.workspace_id,
      keyId: r.key_id,
      reservation: typeof r.reservation === 'string' ? JSON.parse(r.reservation) : r.reservation,
    };
  }

  /** Makes the video due at `at` at the latest (a cancel asked from the API: act on it now). */
  async wake(videoId: string, at: Date): Promise<void> {
    await scheduleJob(this.sql, VIDEO_JOB_KIND, videoId, at);
  }

  /** The request as validated (its prompt and first frame are the caller's content); null when the video is unknown or they no longer open (the key changed). */
  async request(videoId: string): Promise<VideoRequest | null> {
    const { rows } = await this.sql.query<{ request: string }>(`SELECT request FROM ${VIDEO_JOBS_TABLE} WHERE video_id = $1`, [videoId]);
    // '' once the video is deleted (forget).
    const plain = rows[0]?.request ? this.sealed.open(rows[0].request, requestContext(videoId)) : null;
    return plain === null ? null : JSON.parse(plain);
  }

  /** The prompts of many videos at once (a list page). */
  async prompts(videoIds: readonly string[]): Promise<Map<string, string | null>> {
    if (videoIds.length === 0) return new Map();
    const { rows } = await this.sql.query<{ video_id: string; request: string }>(
      `SELECT video_id, request FROM ${VIDEO_JOBS_TABLE} WHERE video_id = ANY($1::text[])`,
      [videoIds],
    );
    return new Map(
      rows.map((r) => [
        r.video_id,
        r.request ? ((JSON.parse(this.sealed.open(r.request, requestContext(r.video_id)) ?? 'null') as VideoRequest | null)?.prompt ?? null) : null,
      ]),
    );
  }

  /** Records where the clip and its poster are kept, unless another worker kept them first (false). */
  async keepFiles(videoId: string, files: VideoFiles): Promise<boolean> {
    const { rows } = await this.sql.query(
      `UPDATE ${VIDEO_JOBS_TABLE} SET video_file_id = $2, thumbnail_file_id = $3 WHERE video_id = $1 AND video_file_id IS NULL RETURNING video_id`,
      [videoId, files.video, files.thumbnail],
    );
    return rows.length === 1;
  }

  async files(videoId: string): Promise<VideoFiles> {
    const { rows } = await this.sql.query<{ video_file_id: string | null; thumbnail_file_id: string | null }>(
      `SELECT video_file_id, thumbnail_file_id FROM ${VIDEO_JOBS_TABLE} WHERE video_id = $1`,
      [videoId],
    );
    return { video: rows[0]?.video_file_id ?? null, thumbnail: rows[0]?.thumbnail_file_id ?? null };
  }

  /** Forgets a video whose hold is settled; its files are the caller's to remove first. */
  async remove(videoId: string): Promise<void> {
    await this.sql.query(`DELETE FROM ${VIDEO_JOBS_TABLE} WHERE video_id = $1`, [videoId]);
  }

  /**
   * A deleted video's content goes at once (the prompt, the files' ids); its row goes with it
   * when no job is left for it, else it stays, due now, with the ids and the hold, so that a
   * worker still bills (or releases) what its end says before forgetting it (./workflow).
   */
  async forget(videoId: string, now: Date): Promise<void> {
    const { rows } = await this.sql.query(
      `DELETE FROM ${VIDEO_JOBS_TABLE} WHERE video_id = $1 AND NOT EXISTS (SELECT 1 FROM jobs WHERE kind = $2 AND key = $1) RETURNING video_id`,
      [videoId, VIDEO_JOB_KIND],
    );
    if (rows.length > 0) return;
    await this.sql.query(`UPDATE ${VIDEO_JOBS_TABLE} SET request = '', video_file_id = NULL, thumbnail_file_id = NULL WHERE video_id = $1`, [videoId]);
    await scheduleJob(this.sql, VIDEO_JOB_KIND, videoId, now);
  }
}
