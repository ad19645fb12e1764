import type { RecordedEvent } from '@svc/eventstore';
import type { VideoError, VideoEvent, VideoStatus } from '../video';
import type { SqlExecutor } from '@svc/platform';
import { perEvent, type Projection } from '@svc/projections';

type V<T extends VideoEvent['type']> = RecordedEvent<T, Extract<VideoEvent, { type: T }>['data']>;

/**
 * Each workspace's videos (spec 2.4, 4.15): what the video stream decided, so that GET /videos
 * and GET /videos/{id} answer without replaying streams. The prompt and the clip are not here:
 * they are content, kept beside the video and purgeable (libs/videos/src/video.ts), while this
 * table is rebuilt from events that are kept for ever. `next_poll_at` copies the stream's
 * timer, so what a worker has due can be read without loading every stream.
 */
export const videosProjection: Projection = perEvent({
  name: 'videos',
  tables: ['videos'],
  schema: [
    `CREATE TABLE IF NOT EXISTS videos (
      video_id text PRIMARY KEY,
      account_id text NOT NULL,
      workspace_id text NOT NULL,
      key_id text NOT NULL,
      model text NOT NULL,
      status text NOT NULL,
      progress integer NOT NULL DEFAULT 0,
      seconds integer NOT NULL,
      aspect_ratio text,
      resolution text,
      size text,
      error jsonb,
      estimated_nano text NOT NULL,
      cost_nano text,
      has_thumbnail boolean NOT NULL DEFAULT false,
      cancel_requested boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL,
      completed_at timestamptz,
      ended_at timestamptz,
      next_poll_at timestamptz
    )`,
    `CREATE INDEX IF NOT EXISTS videos_workspace ON videos (workspace_id, created_at DESC, video_id DESC)`,
  ],
  handlers: {
    VideoRequested: async (e: V<'VideoRequested'>, tx) => {
      const d = e.data;
      await tx.query(
        `INSERT INTO videos (video_id, account_id, workspace_id, key_id, model, status, seconds, aspect_ratio, resolution, size, estimated_nano, created_at, next_poll_at)
         VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (video_id) DO NOTHING`,
        [
          d.video_id,
          d.account_id,
          d.workspace_id,
          d.key_id,
          d.model,
          d.seconds,
          d.aspect_ratio,
          d.resolution,
          d.size,
          d.estimated_nano,
          d.created_at,
          d.next_poll_at,
        ],
      );
    },
    VideoSubmitted: async (e: V<'VideoSubmitted'>, tx) => {
      await tx.query(`UPDATE videos SET next_poll_at = $2 WHERE video_id = $1`, [e.data.video_id, e.data.next_poll_at]);
    },
    // The attempt's error is not the video's: the video fails only when the decider gives up.
    VideoSubmissionFailed: async (e: V<'VideoSubmissionFailed'>, tx) => {
      await tx.query(`UPDATE videos SET next_poll_at = $2 WHERE video_id = $1`, [e.data.video_id, e.data.retry_at]);
    },
    VideoProgressed: async (e: V<'VideoProgressed'>, tx) => {
      await tx.query(`UPDATE videos SET status = $2, progress = $3, next_poll_at = $4 WHERE video_id = $1`, [
        e.data.video_id,
        e.data.status,
        e.data.progress,
        e.data.next_poll_at,
      ]);
    },
    // Asked is not done: the status moves to cancelled only once the worker has stopped the job
    // at the provider (VideoStatus in libs/videos), and a client polling meanwhile sees it running.
    VideoCancelRequested: async (e: V<'VideoCancelRequested'>, tx) => {
      await tx.query(`UPDATE videos SET cancel_requested = true, next_poll_at = $2 WHERE video_id = $1`, [e.data.video_id, e.data.next_poll_at]);
    },
    VideoCompleted: async (e: V<'VideoCompleted'>, tx) => {
      const d = e.data;
      await tx.query(
        `UPDATE videos SET status = 'completed', progress = 100, cost_nano = $2, has_thumbnail = $3, completed_at = $4, ended_at = $4, next_poll_at = NULL WHERE video_id = $1`,
        [d.video_id, d.cost_nano, d.has_thumbnail, d.completed_at],
      );
    },
    VideoFailed: async (e: V<'VideoFailed'>, tx) => {
      await tx.query(`UPDATE videos SET status = 'failed', error = $2, ended_at = $3, next_poll_at = NULL WHERE video_id = $1`, [
        e.data.video_id,
        JSON.stringify(e.data.error),
        e.data.failed_at,
      ]);
    },
    VideoCancelled: async (e: V<'VideoCancelled'>, tx) => {
      await tx.query(`UPDATE videos SET status = 'cancelled', ended_at = $2, next_poll_at = NULL WHERE video_id = $1`, [e.data.video_id, e.data.cancelled_at]);
    },
    // Spec 4.15: a deleted video is gone from the API, so nothing of it is kept to list.
    VideoDeleted: async (e: V<'VideoDeleted'>, tx) => {
      await tx.query(`DELETE FROM videos WHERE video_id = $1`, [e.data.video_id]);
    },
  },
});

export interface VideoRow {
  videoId: string;
  accountId: string;
  workspaceId: string;
  keyId: string;
  model: string;
  status: VideoStatus;
  progress: number;
  seconds: number;
  aspectRatio: string | null;
  resolution: string | null;
  size: string | null;
  error: VideoError | null;
  estimatedNano: bigint;
  costNano: bigint | null;
  hasThumbnail: boolean;
  cancelRequested: boolean;
  createdAt: Date;
  completedAt: Date | null;
  /** When it completed, failed or was cancelled. */
  endedAt: Date | null;
  /** When a worker should act on it next; null once it has ended. */
  nextPollAt: Date | null;
}

const json = <T>(v: unknown): T | null => (v === null || v === undefined ? null : ((typeof v === 'string' ? JSON.parse(v) : v) as T));
const time = (v: unknown): Date | null => (v === null || v === undefined ? null : new Date(v as string));

const videoRow = (r: Record<string, any>): VideoRow => ({
  videoId: r.video_id,
  accountId: r.account_id,
  workspaceId: r.workspace_id,
  keyId: r.key_id,
  model: r.model,
  status: r.status,
  progress: r.progress,
  seconds: r.seconds,
  aspectRatio: r.aspect_ratio,
  resolution: r.resolution,
  size: r.size,
  error: json(r.error),
  estimatedNano: BigInt(r.estimated_nano),
  costNano: r.cost_nano === null || r.cost_nano === undefined ? null : BigInt(r.cost_nano),
  hasThumbnail: r.has_thumbnail,
  cancelRequested: r.cancel_requested,
  createdAt: new Date(r.created_at),
  completedAt: time(r.completed_at),
  endedAt: time(r.ended_at),
  nextPollAt: time(r.next_poll_at),
});

export async function getVideo(sql: SqlExecutor, workspaceId: string, videoId: string): Promise<VideoRow | null> {
  const { rows } = await sql.query<Record<string, any>>('SELECT * FROM videos WHERE video_id = $1 AND workspace_id = $2', [videoId, workspaceId]);
  return rows[0] ? videoRow(rows[0]) : null;
}

/**
 * OpenAI's video list (spec 4.15, the common videos shape: `after`, `limit`, `order`): `limit`
 * videos past the video `after` in the order asked. Ties on created_at are broken by id so that
 * a cursor never skips or repeats a video.
 */
export async function listVideos(sql: SqlExecutor, workspaceId: string, after: string | null, limit: number, order: 'asc' | 'desc'): Promise<VideoRow[]> {
  // Only these two fixed fragments are spliced into the SQL; `order` picks one of them.
  const [past, direction] = order === 'asc' ? ['>', 'ASC'] : ['<', 'DESC'];
  const { rows } = await sql.query<Record<string, any>>(
    `SELECT * FROM videos WHERE workspace_id = $1
       AND ($2::text IS NULL OR (created_at, video_id) ${past} (SELECT created_at, video_id FROM videos WHERE video_id = $2 AND workspace_id = $1))
     ORDER BY created_at ${direction}, video_id ${direction} LIMIT $3`,
    [workspaceId, after, limit],
  );
  return rows.map(videoRow);
}
