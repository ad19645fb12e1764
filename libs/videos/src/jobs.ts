/**
 * What a video keeps beside its stream, and the workers' queue of videos (issue 19: leases in
 * PostgreSQL with `FOR UPDATE SKIP LOCKED`, as the batch lines have; it runs the same on PGlite).
 *
 * Content stays out of the events (ARCHITECTURE section 4): the prompt and the first frame's URL
 * are sealed under SVC_ENCRYPTION_KEY here, and the clip and its poster are files of purpose
 * `video` in the file store. The reservation (ids, targets and the amount held, no content) is
 * kept so that any worker can settle the hold.
 *
 * `due_at` mirrors the stream's timer (VideoState.dueAt) so that due work is found with an index
 * rather than by reading every stream; the stream stays the truth. A worker that dies between a
 * decision and the mirror leaves the old, earlier `due_at`: the video is claimed again once the
 * lease runs out, and the worker acts on the stream's state, never on the row's.
 */
import { SealedContent } from '@svc/conversations';
import type { Reservation } from '@svc/metering';
import { ApiError, createSchema, type SqlRunner } from '@svc/platform';
import type { VideoRequest } from './request';

export const VIDEO_JOBS_TABLE = 'video_jobs';

/** A video a worker holds, until `leaseUntil`. */
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

export class VideoJobs {
  private readonly sealed: SealedContent;

  constructor(
    private readonly sql: SqlRunner,
    key: () => Buffer | null,
  ) {
    this.sealed = new SealedContent(
      key,
      () => new ApiError(503, 'service_unavailable', 'Videos need SVC_ENCRYPTION_KEY to keep their prompts.', 'storage_unavailable'),
    );
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
        due_at timestamptz,
        owner text,
        lease_until timestamptz,
        video_file_id text,
        thumbnail_file_id text
      );
      CREATE INDEX IF NOT EXISTS ${VIDEO_JOBS_TABLE}_due ON ${VIDEO_JOBS_TABLE} (due_at) WHERE due_at IS NOT NULL;
    `,
    );
  }

  /** Whether prompts can be kept and read (SVC_ENCRYPTION_KEY is set). */
  get available(): boolean {
    return this.sealed.available;
  }

  /** Keeps a new video's request and hold; due at `dueAt`. */
  async add(job: Omit<ClaimedVideo, 'reservation'> & { reservation: Reservation; request: VideoRequest; dueAt: Date }): Promise<void> {
    await this.sql.query(
      `INSERT INTO ${VIDEO_JOBS_TABLE} (video_id, account_id, workspace_id, key_id, request, reservation, due_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [
        job.videoId,
        job.accountId,
        job.workspaceId,
        job.keyId,
        this.sealed.seal(JSON.stringify(job.request), requestContext(job.videoId)),
        JSON.stringify(job.reservation),
        job.dueAt.toISOString(),
      ],
    );
  }

  /** Claims up to `limit` videos due by `now` whose lease (if any) has run out, for `owner` until `leaseUntil`. */
  async claim(owner: string, now: Date, leaseUntil: Date, limit: number): Promise<ClaimedVideo[]> {
    if (limit <= 0) return [];
    const { rows } = await this.sql.query<Record<string, any>>(
      `UPDATE ${VIDEO_JOBS_TABLE} j SET owner = $1, lease_until = $2
         FROM (SELECT video_id FROM ${VIDEO_JOBS_TABLE}
                WHERE due_at IS NOT NULL AND due_at <= $3 AND (lease_until IS NULL OR lease_until < $3)
                ORDER BY due_at, video_id LIMIT $4 FOR UPDATE SKIP LOCKED) c
        WHERE j.video_id = c.video_id
        RETURNING j.video_id, j.account_id, j.workspace_id, j.key_id, j.reservation`,
      [owner, leaseUntil.toISOString(), now.toISOString(), limit],
    );
    return rows.map((r) => ({
      videoId: r.video_id,
      accountId: r.account_id,
      workspaceId: r.workspace_id,
      keyId: r.key_id,
      reservation: typeof r.reservation === 'string' ? JSON.parse(r.reservation) : r.reservation,
    }));
  }

  /**
   * Gives the video back with its next due time (null: nothing left to do), if `owner` still
   * holds it; false when its lease ran out and another worker has it.
   */
  async reschedule(videoId: string, owner: string, dueAt: Date | null): Promise<boolean> {
    const { rows } = await this.sql.query(
      `UPDATE ${VIDEO_JOBS_TABLE} SET due_at = $3, owner = NULL, lease_until = NULL WHERE video_id = $1 AND owner = $2 RETURNING video_id`,
      [videoId, owner, dueAt?.toISOString() ?? null],
    );
    return rows.length === 1;
  }

  /** Makes a running video due at `at` at the latest (a cancel asked from the API: act on it now). */
  async wake(videoId: string, at: Date): Promise<void> {
    await this.sql.query(`UPDATE ${VIDEO_JOBS_TABLE} SET due_at = LEAST(due_at, $2) WHERE video_id = $1 AND due_at IS NOT NULL`, [videoId, at.toISOString()]);
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

  /** Records where the clip and its poster are kept, if `owner` still holds the video. */
  async keepFiles(videoId: string, owner: string, files: VideoFiles): Promise<boolean> {
    const { rows } = await this.sql.query(
      `UPDATE ${VIDEO_JOBS_TABLE} SET video_file_id = $3, thumbnail_file_id = $4 WHERE video_id = $1 AND owner = $2 RETURNING video_id`,
      [videoId, owner, files.video, files.thumbnail],
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
   * once nothing is left to do, else it stays, due now, with the ids and the hold, so that a
   * worker still bills (or releases) what its end says before forgetting it (VideoRunner).
   */
  async forget(videoId: string, now: Date): Promise<void> {
    const { rows } = await this.sql.query(`DELETE FROM ${VIDEO_JOBS_TABLE} WHERE video_id = $1 AND due_at IS NULL AND owner IS NULL RETURNING video_id`, [
      videoId,
    ]);
    if (rows.length > 0) return;
    await this.sql.query(
      `UPDATE ${VIDEO_JOBS_TABLE} SET request = '', video_file_id = NULL, thumbnail_file_id = NULL, due_at = LEAST(COALESCE(due_at, $2), $2) WHERE video_id = $1`,
      [videoId, now.toISOString()],
    );
  }
}
