/**
 * The video router adapter against the simulator's router API over real HTTP: the request in
 * the router's terms, the actual cost exact in nano-USD, files from the job's URLs, cancel.
 */
import { ManualClock } from '@svc/platform';
import type { VideoJob, VideoJobRequest } from '../provider';
import { ProviderError } from '../provider-error';
import { startSimulator, type Simulator } from '../simulator';
import { videorouter } from './index';

const JOB_MS = 1000;
let sim: Simulator;
let clock: ManualClock;
let adapter: ReturnType<typeof videorouter.client>;
beforeAll(async () => {
  clock = new ManualClock();
  sim = await startSimulator({ videoJobMs: JOB_MS, clock });
  adapter = videorouter.client({ baseUrl: sim.url, apiKey: 'sk-router' });
});
afterAll(() => sim.close());

const request = (fields: Partial<VideoJobRequest> = {}): VideoJobRequest => ({
  model: 'kling/v2-master',
  prompt: 'a hummingbird',
  seconds: 5,
  size: null,
  aspect_ratio: null,
  resolution: null,
  image_url: null,
  ...fields,
});
const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (error: unknown) => error,
  );
async function createdAndAged(fields: Partial<VideoJobRequest>, ms: number): Promise<VideoJob> {
  const start = clock.now();
  const job = await adapter.video_create(request(fields));
  clock.set(new Date(start.getTime() + ms));
  return job;
}

it('sends duration as a number with aspect_ratio, resolution and image_url; leaves out what was not given', async () => {
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
  const job = await createdAndAged({ seconds, resolution, prompt: `bird ${seconds} ${resolution}` }, JOB_MS / 2);
  expect(await adapter.video_get(job.id)).toEqual({ ...job, status: 'in_progress', progress: 50 });
  clock.advance(JOB_MS);
  const done = await adapter.video_get(job.id);
  expect(done).toEqual({ ...job, status: 'completed', progress: 100, costNano: nano, url: `${sim.url}/files/videos/${job.id}.mp4` });
  expect(typeof done.costNano).toBe('bigint');
});

it("downloads the clip and the poster from the job's URLs; before completion a 404", async () => {
  const job = await createdAndAged({ seconds: 4 }, JOB_MS / 2);
  const early = await failure(adapter.video_content(job.id, 'video'));
  expect(early).toBeInstanceOf(ProviderError);
  expect(early).toMatchObject({ kind: 'http', status: 404, message: expect.stringContaining('status in_progress') });
  clock.advance(JOB_MS);
  const video = await adapter.video_content(job.id, 'video');
  expect(video.contentType).toBe('video/mp4');
  expect(video.bytes.toString('latin1', 4, 8)).toBe('ftyp');
  const poster = await adapter.video_content(job.id, 'thumbnail');
  expect(poster.contentType).toBe('image/jpeg');
  expect([...poster.bytes.subarray(0, 3)]).toEqual([0xff, 0xd8, 0xff]);
});

it('reports #sim fail as failed, with the error and no cost', async () => {
  const job = await createdAndAged({ prompt: 'x\n#sim {"fail": true}' }, JOB_MS);
  expect(await adapter.video_get(job.id)).toEqual({
    ...job,
    status: 'failed',
    progress: 50,
    error: { code: 'video_generation_failed', message: expect.any(String) },
    costNano: null,
  });
});

it('cancels a stalled job; cancelling again, or a completed job, changes nothing and is not an error', async () => {
  const stalled = await createdAndAged({ prompt: 'x\n#sim {"stall": true}' }, 2 * JOB_MS);
  await expect(adapter.video_cancel(stalled.id)).resolves.toBeUndefined();
  const cancelled = await adapter.video_get(stalled.id);
  expect(cancelled).toEqual({ ...stalled, status: 'cancelled', progress: 99 });
  await expect(adapter.video_cancel(stalled.id)).resolves.toBeUndefined();
  expect(await adapter.video_get(stalled.id)).toEqual(cancelled);

  const finished = await createdAndAged({ seconds: 2 }, JOB_MS);
  await expect(adapter.video_cancel(finished.id)).resolves.toBeUndefined();
  expect(await adapter.video_get(finished.id)).toMatchObject({ status: 'completed', costNano: 200_000_000n });
});

it("turns the router's refusals into ProviderErrors", async () => {
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
