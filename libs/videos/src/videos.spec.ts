import { randomBytes } from 'node:crypto';
import { loadCatalog, ProviderStats } from '@svc/catalog';
import type { FileRecord } from '@svc/files';
import type { Caller } from '@svc/identity';
import type { Reservation } from '@svc/metering';
import { testCaller } from '@svc/metering/testing/pipeline-fixtures';
import { type ApiError, ManualClock } from '@svc/platform';
import { rejectionOf } from '@svc/platform/testing/errors';
import { CreateVideo } from './create-video';
import { videoDecider, videoStream, type VideoCommand } from './video';
import { videoWorld } from './testing/video-world';
import { Videos } from './videos';

/**
 * A video after it was asked for, on a real event store, read model and job table: read with
 * its prompt, its content served only once completed, and DELETE cancelling it while it runs and
 * deleting it (with its files) once it has ended.
 */
describe("a workspace's videos (spec 4.15)", () => {
  const clock = new ManualClock(new Date('2026-11-02T10:00:00.000Z'));
  const key = randomBytes(32);
  const caller = testCaller();
  const world = videoWorld(clock, key);
  let videos: Videos;
  const stored = new Map<string, FileRecord>();
  const deleted: string[] = [];

  const create = async (prompt = 'a paper boat') => {
    const calls = {
      hold: async (_c: Caller, _r: unknown, _q: unknown, holdId: string) => ({ id: holdId, heldNano: '400000000', targets: [] }) as unknown as Reservation,
      release: async () => undefined,
    };
    const routing = { catalog: loadCatalog(), clock, providerStats: new ProviderStats() };
    const creating = new CreateVideo({
      clock,
      sql: world.sql,
      aggregates: world.aggregates,
      projections: world.runner,
      routing,
      jobs: world.jobs,
      calls,
      allowPrivateUrls: false,
    });
    return (await creating.run(caller, { prompt })).video.videoId;
  };
  const decide = async (command: VideoCommand) => {
    const handled = await world.aggregates.handle(videoDecider, videoStream(command.videoId), command);
    if (handled.appended) await world.runner.waitFor(handled.appended.position, ['videos'], 10_000);
  };
  const shape = (err: ApiError) => [err.status, err.type, err.code, err.param];

  beforeAll(() => {
    const files = {
      get: async (_workspaceId: string, id: string) => stored.get(id) ?? null,
      delete: async (_workspaceId: string, id: string) => deleted.push(id) > 0,
    };
    videos = new Videos({ clock, sql: world.sql, aggregates: world.aggregates, projections: world.runner, jobs: world.jobs, files });
  });

  it("reads a video with its prompt; an id of another workspace, or one that is no video's, is 404 video_not_found", async () => {
    const id = await create('a paper boat');
    expect(await videos.get(caller, id)).toMatchObject({ video: { videoId: id, status: 'queued' }, prompt: 'a paper boat' });
    expect((await videos.list(caller, { after: null, fetch: 10 }, 'desc')).find((v) => v.video.videoId === id)?.prompt).toBe('a paper boat');
    const elsewhere = { ...caller, workspaceId: 'ws-other' } as Caller;
    expect(shape(await rejectionOf(videos.get(elsewhere, id)))).toEqual([404, 'not_found_error', 'video_not_found', 'id']);
    expect(shape(await rejectionOf(videos.get(caller, 'video_nope')))).toEqual([404, 'not_found_error', 'video_not_found', 'id']);
  });

  it('given a video still running, its content is 409 video_not_ready, and DELETE asks for its cancel and answers it as it stands', async () => {
    const id = await create();
    expect(shape(await rejectionOf(videos.content(caller.workspaceId, id, 'video')))).toEqual([409, 'invalid_request_error', 'video_not_ready', 'id']);
    const removed = await videos.remove(caller, id);
    expect(removed).toMatchObject({ deleted: false, video: { videoId: id, status: 'queued', cancelRequested: true }, prompt: 'a paper boat' });
  });

  it('given a cancelled video, it has no content (404 naming id), and DELETE deletes it: not found after, its prompt gone', async () => {
    const id = await create();
    await decide({ type: 'RequestCancel', videoId: id });
    await decide({ type: 'ConfirmCancel', videoId: id });
    expect(shape(await rejectionOf(videos.content(caller.workspaceId, id, 'video')))).toEqual([404, 'not_found_error', 'video_content_not_found', 'id']);
    expect(await videos.remove(caller, id)).toEqual({ deleted: true, videoId: id });
    expect(shape(await rejectionOf(videos.get(caller, id)))).toEqual([404, 'not_found_error', 'video_not_found', 'id']);
    expect(await world.jobs.request(id)).toBeNull();
  });

  it('given a completed video, its clip is served, a poster it lacks is 404 naming variant, and DELETE removes its files after the decision', async () => {
    const id = await create();
    await decide({ type: 'RecordSubmission', videoId: id, provider: 'sim', providerJobId: 'job-1', pollAfterMs: null });
    await decide({ type: 'RecordCompletion', videoId: id, costNano: 400_000_000n, hasThumbnail: false });
    const clip = { id: `file-${id}`, filename: 'clip.mp4', bytes: 10 } as FileRecord;
    stored.set(clip.id, clip);
    await world.jobs.keepFiles(id, { video: clip.id, thumbnail: null });
    expect(await videos.content(caller.workspaceId, id, 'video')).toBe(clip);
    expect(shape(await rejectionOf(videos.content(caller.workspaceId, id, 'thumbnail')))).toEqual([
      404,
      'not_found_error',
      'video_content_not_found',
      'variant',
    ]);
    expect(await videos.remove(caller, id)).toEqual({ deleted: true, videoId: id });
    expect(deleted).toEqual([clip.id]);
  });
});
