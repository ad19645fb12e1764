/**
 * A workspace's videos after they are asked for (spec 4.15): read with their prompts, listed,
 * cancelled or deleted, and their clip and poster once completed. Another workspace's video is
 * as unknown as a missing one.
 */
import type { AggregateStore } from '@svc/eventstore';
import type { FileRecord, SqlFileStore } from '@svc/files';
import type { Caller } from '@svc/identity';
import { type Clock, DomainError, type SqlRunner } from '@svc/platform';
import type { ProjectionRunner } from '@svc/projections';
import type { VideoVariant } from '@svc/providers';
import type { VideoJobs } from './jobs';
import { getVideo, listVideos, type VideoRow } from './read-models/videos';
import { isVideoTerminal, videoDecider, videoStream, type VideoCommand } from './video';

const VIDEO_ID = /^video_[0-9a-f]{24}$/;

/** Whether `id` has the shape of a video's id (`video_` and 24 hex digits); any other is no video's. */
export const isVideoId = (id: string) => VIDEO_ID.test(id);

export interface VideosDeps {
  clock: Clock;
  /** The read database: every answer is the videos read model's. */
  sql: SqlRunner;
  aggregates: Pick<AggregateStore, 'handle'>;
  projections: Pick<ProjectionRunner, 'waitFor'>;
  jobs: Pick<VideoJobs, 'request' | 'prompts' | 'files' | 'wake' | 'forget'>;
  /** The file store of purpose `video`: the clips and their posters. */
  files: Pick<SqlFileStore, 'get' | 'delete'>;
}

/** A video and its prompt; the prompt is null once it no longer opens (the key changed) or the video was deleted. */
export interface VideoWithPrompt {
  video: VideoRow;
  prompt: string | null;
}

/** What DELETE did: a video not ended yet is being cancelled; an ended one is gone with its files. */
export type RemovedVideo = ({ deleted: false } & VideoWithPrompt) | { deleted: true; videoId: string };

/** The video of the workspace, or the 404 `video_not_found` naming `id`. */
export async function findVideo(sql: SqlRunner, workspaceId: string, id: string): Promise<VideoRow> {
  const row = isVideoId(id) ? await getVideo(sql, workspaceId, id) : null;
  if (!row) throw DomainError.notFound(`No video with id '${id}' exists for this workspace.`, 'video_not_found', 'id');
  return row;
}

export class Videos {
  constructor(private readonly deps: VideosDeps) {}

  async get(caller: Caller, id: string): Promise<VideoWithPrompt> {
    const video = await findVideo(this.deps.sql, caller.workspaceId, id);
    return { video, prompt: (await this.deps.jobs.request(id))?.prompt ?? null };
  }

  /** A page of the workspace's videos in `order` of creation, after the video `after`, with their prompts. */
  async list(caller: Caller, page: { after: string | null; fetch: number }, order: 'asc' | 'desc'): Promise<VideoWithPrompt[]> {
    const rows = await listVideos(this.deps.sql, caller.workspaceId, page.after, page.fetch, order);
    const prompts = await this.deps.jobs.prompts(rows.map((r) => r.videoId));
    return rows.map((video) => ({ video, prompt: prompts.get(video.videoId) ?? null }));
  }

  /**
   * Spec 4.15 "DELETE deletes". A queued or running video is cancelled (free, see VideoStatus):
   * it is answered as it stands, `cancelled` once a worker has stopped it at the provider,
   * normally within seconds. An ended video is deleted with its clip, and is not found after.
   */
  async remove(caller: Caller, id: string): Promise<RemovedVideo> {
    const { sql, jobs, files, clock } = this.deps;
    const row = await findVideo(sql, caller.workspaceId, id);
    if (!isVideoTerminal(row.status)) {
      await this.decide({ type: 'RequestCancel', videoId: id }, caller);
      await jobs.wake(id, clock.now());
      const video = await findVideo(sql, caller.workspaceId, id);
      return { deleted: false, video, prompt: (await jobs.request(id))?.prompt ?? null };
    }
    const kept = await jobs.files(id);
    await this.decide({ type: 'DeleteVideo', videoId: id }, caller);
    // Content after the decision: a crash in between leaves files nobody can reach, never a video without its clip.
    for (const fileId of [kept.video, kept.thumbnail]) if (fileId !== null) await files.delete(caller.workspaceId, fileId);
    // Not free for being deleted: a worker still settles a hold the end has not settled yet.
    await jobs.forget(id, clock.now());
    return { deleted: true, videoId: id };
  }

  /** The file a completed video has for `variant` (the clip or its poster), or the 404/409 saying why there is none. */
  async content(workspaceId: string, id: string, variant: VideoVariant): Promise<FileRecord> {
    const row = await findVideo(this.deps.sql, workspaceId, id);
    if (!isVideoTerminal(row.status))
      throw DomainError.conflict(`Video ${id} is ${row.status}: its content is ready once it has completed.`, 'video_not_ready', 'id');
    if (row.status !== 'completed') throw DomainError.notFound(`Video ${id} is ${row.status}: it has no content.`, 'video_content_not_found', 'id');
    const kept = await this.deps.jobs.files(id);
    const fileId = variant === 'thumbnail' ? kept.thumbnail : kept.video;
    const file = fileId === null ? null : await this.deps.files.get(workspaceId, fileId);
    if (!file)
      throw DomainError.notFound(`Video ${id} has no ${variant === 'thumbnail' ? 'thumbnail' : 'clip'} to serve.`, 'video_content_not_found', 'variant');
    return file;
  }

  /** Decides on the video's stream and waits until the videos read model shows it (read your writes). */
  private async decide(command: VideoCommand, caller: Caller): Promise<void> {
    const handled = await this.deps.aggregates.handle(videoDecider, videoStream(command.videoId), command, {
      actor: `key:${caller.keyId}`,
      correlationId: command.videoId,
    });
    if (handled.appended) await this.deps.projections.waitFor(handled.appended.position, ['videos']);
  }
}
