/**
 * The video router adapter against the simulator's router API over real HTTP: what every video
 * adapter does (../testing/video-adapter-spec), and what is the router's own: the request in its
 * terms, the actual cost exact in nano-USD with the clip's URL, a cancelled job that stays
 * readable, and its refusals.
 */
import { describeVideoAdapter, failure, VIDEO_JOB_MS } from '../testing/video-adapter-spec';
import { videorouter } from './index';

const video = describeVideoAdapter({
  client: (baseUrl) => videorouter.client({ baseUrl, apiKey: 'sk-router' }),
  request: { model: 'kling/v2-master', prompt: 'a hummingbird', seconds: 5, size: null, aspect_ratio: null, resolution: null, image_url: null },
  cancelled: 'cancelled',
});

it('sends duration as a number with aspect_ratio, resolution and image_url; leaves out what was not given', async () => {
  const { adapter, sim, request } = video;
  const job = await adapter.video_create(request({ seconds: 8, aspect_ratio: '9:16', resolution: '1080p', image_url: 'https://img.example/first.png' }));
  expect(sim.received.at(-1)).toEqual({
    model: 'kling/v2-master',
    prompt: 'a hummingbird',
    duration: 8,
    aspect_ratio: '9:16',
    resolution: '1080p',
    image_url: 'https://img.example/first.png',
  });
  expect(job).toEqual({
    id: expect.stringMatching(/^vgen_sim_\d+$/),
    status: 'queued',
    progress: 0,
    error: null,
    costNano: null,
    pollAfterMs: null,
    url: null,
  });
  await adapter.video_create(request());
  expect(sim.received.at(-1)).toEqual({ model: 'kling/v2-master', prompt: 'a hummingbird', duration: 5 });
});

it('turns a size into the ratio and resolution it names', async () => {
  const { adapter, sim, request } = video;
  await adapter.video_create(request({ size: '1280x720' }));
  expect(sim.received.at(-1)).toEqual({ model: 'kling/v2-master', prompt: 'a hummingbird', duration: 5, aspect_ratio: '16:9', resolution: '720p' });
  await adapter.video_create(request({ size: '1080x1920', resolution: '480p' }));
  expect(sim.received.at(-1)).toMatchObject({ aspect_ratio: '9:16', resolution: '480p' });
});

it.each([
  [8, '720p', 800_000_000n],
  [3, '720p', 300_000_000n],
  [7, '480p', 350_000_000n],
  [3, '1080p', 900_000_000n],
  [20, '1080p', 6_000_000_000n],
])('%is at %s: no cost while running, exactly %p nano-USD once completed, with the MP4 URL', async (seconds, resolution, nano) => {
  const { adapter, sim, clock } = video;
  const job = await video.createdAndAged({ seconds, resolution, prompt: `bird ${seconds} ${resolution}` }, VIDEO_JOB_MS / 2);
  expect(await adapter.video_get(job.id)).toEqual({ ...job, status: 'in_progress', progress: 50 });
  clock.advance(VIDEO_JOB_MS);
  const done = await adapter.video_get(job.id);
  expect(done).toEqual({ ...job, status: 'completed', progress: 100, costNano: nano, url: `${sim.url}/files/videos/${job.id}.mp4` });
  expect(typeof done.costNano).toBe('bigint');
});

it("says why a clip cannot be downloaded yet: the job's status", async () => {
  const job = await video.createdAndAged({ seconds: 4 }, VIDEO_JOB_MS / 2);
  expect(await failure(video.adapter.video_content(job.id, 'video'))).toMatchObject({ status: 404, message: expect.stringContaining('status in_progress') });
});

it("turns the router's refusals into ProviderErrors", async () => {
  const { adapter, request } = video;
  expect(await failure(adapter.video_create(request({ seconds: 21 })))).toMatchObject({
    kind: 'http',
    status: 400,
    retryable: false,
    upstreamBody: { error: { param: 'duration' } },
  });
  expect(await failure(adapter.video_create(request({ aspect_ratio: '2:1' })))).toMatchObject({
    status: 400,
    message: expect.stringContaining('aspect_ratio'),
  });
  expect(await failure(adapter.video_create(request({ prompt: 'p\n#sim {"fail": 502}' })))).toMatchObject({ status: 502, retryable: true });
  expect(await failure(adapter.video_get('vgen_nope'))).toMatchObject({ status: 404 });
  expect(await failure(adapter.video_cancel('vgen_nope'))).toMatchObject({ status: 404 });
});
