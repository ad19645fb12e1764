import { AggregateStore, SqlEventStore } from '@svc/eventstore';
import { ManualClock, type SqlRunner } from '@svc/platform';
import { videoDecider, videoStream, type VideoCommand } from '@svc/videos';
import { ProjectionRunner } from '@svc/projections';
import { getVideo, listVideos, videosProjection } from './videos';
import { memoryPglite } from '@svc/platform/testing/pglite';

/**
 * The videos read model (spec 2.4, 3.1, 4.15) fed with what the video decider decides, through
 * the runner as in production: each life a video can have, and the list the API pages through.
 */
describe('the videos read model', () => {
  const clock = new ManualClock(new Date('2026-11-02T10:00:00.000Z'));
  let sql: SqlRunner;
  let store: SqlEventStore;
  let runner: ProjectionRunner;
  let aggregates: AggregateStore;

  /** Decides `command` at the clock's time, then lets the projection catch up with it. */
  const video = async (command: VideoCommand) => {
    const handled = await aggregates.handle(videoDecider, videoStream(command.videoId), command);
    if (handled.appended) await runner.waitFor(handled.appended.position, ['videos'], 10_000);
    return handled;
  };
  const request = (videoId: string, workspaceId = 'ws1') =>
    video({
      type: 'RequestVideo',
      videoId,
      accountId: 'acct1',
      workspaceId,
      keyId: 'key1',
      model: 'sim/video',
      seconds: 8,
      aspectRatio: '16:9',
      resolution: '720p',
      size: null,
      holdId: `hold-${videoId}`,
      estimatedNano: 800_000_000n,
    });

  beforeAll(async () => {
    sql = await memoryPglite();
    store = new SqlEventStore(sql);
    await store.init();
    runner = new ProjectionRunner(sql, store, [videosProjection], { idleMs: 20 });
    await runner.init();
    runner.start();
    aggregates = new AggregateStore(store, clock);
  }, 60_000);

  afterAll(async () => {
    await runner?.stop();
    await store?.close();
    await sql?.close();
  });

  it('follows a video from queued to completed: the poll timer while it runs, cost and times at the end', async () => {
    await request('video_done');
    expect(await getVideo(sql, 'ws1', 'video_done')).toEqual({
      videoId: 'video_done',
      accountId: 'acct1',
      workspaceId: 'ws1',
      keyId: 'key1',
      model: 'sim/video',
      status: 'queued',
      progress: 0,
      seconds: 8,
      aspectRatio: '16:9',
      resolution: '720p',
      size: null,
      error: null,
      estimatedNano: 800_000_000n,
      costNano: null,
      hasThumbnail: false,
      cancelRequested: false,
      createdAt: new Date('2026-11-02T10:00:00.000Z'),
      completedAt: null,
      endedAt: null,
      // Submit at once.
      nextPollAt: new Date('2026-11-02T10:00:00.000Z'),
    });

    clock.advance(1_000);
    await video({ type: 'RecordSubmission', videoId: 'video_done', provider: 'sim', providerJobId: 'job-1', pollAfterMs: 10_000 });
    expect(await getVideo(sql, 'ws1', 'video_done')).toMatchObject({ status: 'queued', nextPollAt: new Date('2026-11-02T10:00:11.000Z') });

    clock.advance(10_000);
    await video({ type: 'RecordProgress', videoId: 'video_done', status: 'in_progress', progress: 40, pollAfterMs: null });
    expect(await getVideo(sql, 'ws1', 'video_done')).toMatchObject({ status: 'in_progress', progress: 40, nextPollAt: new Date('2026-11-02T10:00:16.000Z') });

    clock.advance(5_000);
    await video({ type: 'RecordCompletion', videoId: 'video_done', costNano: 750_000_001n, hasThumbnail: true });
    expect(await getVideo(sql, 'ws1', 'video_done')).toMatchObject({
      status: 'completed',
      progress: 100,
      costNano: 750_000_001n,
      hasThumbnail: true,
      error: null,
      cancelRequested: false,
      completedAt: new Date('2026-11-02T10:00:16.000Z'),
      endedAt: new Date('2026-11-02T10:00:16.000Z'),
      nextPollAt: null,
    });
    // Another workspace does not see it.
    expect(await getVideo(sql, 'ws2', 'video_done')).toBeNull();
  });

  it('retries a failed submission at the retry time, and records the error only once the video fails', async () => {
    clock.advance(60_000);
    await request('video_bad');
    const error = { code: 'upstream_error', message: 'The provider refused the job.' };
    await video({ type: 'RecordSubmissionFailure', videoId: 'video_bad', error, retryable: true });
    // Spec 2.4 `error` is the video's, and a retry may still succeed: nothing shown yet.
    expect(await getVideo(sql, 'ws1', 'video_bad')).toMatchObject({ status: 'queued', error: null, nextPollAt: new Date(clock.now().getTime() + 5_000) });

    clock.advance(5_000);
    const refused = { code: 'invalid_prompt', message: 'The provider will not make this clip.' };
    await video({ type: 'RecordSubmissionFailure', videoId: 'video_bad', error: refused, retryable: false });
    expect(await getVideo(sql, 'ws1', 'video_bad')).toMatchObject({
      status: 'failed',
      error: refused,
      costNano: null,
      completedAt: null,
      endedAt: clock.now(),
      nextPollAt: null,
    });
  });

  it('keeps a video running once a cancel is asked, until the provider has stopped it', async () => {
    clock.advance(60_000);
    await request('video_off');
    await video({ type: 'RecordSubmission', videoId: 'video_off', provider: 'sim', providerJobId: 'job-2', pollAfterMs: null });
    clock.advance(2_000);
    await video({ type: 'RequestCancel', videoId: 'video_off' });
    // The worker acts on the cancel at once.
    expect(await getVideo(sql, 'ws1', 'video_off')).toMatchObject({ status: 'queued', cancelRequested: true, endedAt: null, nextPollAt: clock.now() });

    clock.advance(3_000);
    await video({ type: 'ConfirmCancel', videoId: 'video_off' });
    expect(await getVideo(sql, 'ws1', 'video_off')).toMatchObject({
      status: 'cancelled',
      cancelRequested: true,
      costNano: null,
      completedAt: null,
      endedAt: clock.now(),
      nextPollAt: null,
    });
  });

  it('forgets a deleted video (spec 4.15 DELETE)', async () => {
    clock.advance(60_000);
    await request('video_gone');
    await video({ type: 'RequestCancel', videoId: 'video_gone' });
    await video({ type: 'RecordSubmissionFailure', videoId: 'video_gone', error: { code: 'x', message: 'x' }, retryable: true });
    expect(await getVideo(sql, 'ws1', 'video_gone')).toMatchObject({ status: 'cancelled' });
    await video({ type: 'DeleteVideo', videoId: 'video_gone' });
    expect(await getVideo(sql, 'ws1', 'video_gone')).toBeNull();
    expect((await listVideos(sql, 'ws1', null, 100, 'desc')).map((v) => v.videoId)).not.toContain('video_gone');
  });

  it('lists a workspace newest or oldest first, a page at a time after a cursor', async () => {
    clock.advance(60_000);
    // Two asked at the same instant: the id orders them, so a cursor between them skips neither.
    await request('video_b');
    await request('video_a');
    await request('video_other', 'ws2');
    const newest = ['video_b', 'video_a', 'video_off', 'video_bad', 'video_done'];
    const ids = async (after: string | null, limit: number, order: 'asc' | 'desc') => (await listVideos(sql, 'ws1', after, limit, order)).map((v) => v.videoId);

    expect(await ids(null, 10, 'desc')).toEqual(newest);
    expect(await ids(null, 10, 'asc')).toEqual([...newest].reverse());
    expect(await ids(null, 2, 'desc')).toEqual(['video_b', 'video_a']);
    expect(await ids('video_a', 2, 'desc')).toEqual(['video_off', 'video_bad']);
    expect(await ids('video_bad', 2, 'desc')).toEqual(['video_done']);
    expect(await ids('video_done', 2, 'asc')).toEqual(['video_bad', 'video_off']);
    expect(await ids('video_off', 2, 'asc')).toEqual(['video_a', 'video_b']);
    expect(await ids('video_b', 2, 'asc')).toEqual([]);
    // A cursor of another workspace finds nothing rather than another workspace's position.
    expect(await ids('video_other', 10, 'desc')).toEqual([]);
    expect((await listVideos(sql, 'ws2', null, 10, 'desc')).map((v) => v.videoId)).toEqual(['video_other']);
  });
});
