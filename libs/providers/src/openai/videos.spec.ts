/**
 * The OpenAI-compatible adapter's video methods against the simulator's Videos API over real
 * HTTP (WIRE-FORMATS 2): the request as OpenAI takes it, the Video object as a VideoJob, the
 * poll-after header, content, DELETE as cancel, and errors as ProviderErrors.
 */
import { ManualClock } from '@svc/platform';
import type { VideoJob, VideoJobRequest } from '../provider';
import { ProviderError } from '../provider-error';
import { startSimulator, type Simulator } from '../simulator';
import { openai } from './index';

const JOB_MS = 1000;
let sim: Simulator;
let clock: ManualClock;
let adapter: ReturnType<typeof openai.client>;
beforeAll(async () => {
  clock = new ManualClock();
  sim = await startSimulator({ videoJobMs: JOB_MS, videoPollAfterMs: 250, clock });
  adapter = openai.client({ baseUrl: sim.url, apiKey: 'sk-sim' });
});
afterAll(() => sim.close());

const request = (fields: Partial<VideoJobRequest> = {}): VideoJobRequest => ({
  model: 'sora-2',
  prompt: 'a paper boat on a river',
  seconds: 4,
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
/** Creates a job and moves the clock `ms` past its creation. */
async function createdAndAged(fields: Partial<VideoJobRequest>, ms: number): Promise<VideoJob> {
  const start = clock.now();
  const job = await adapter.video_create(request(fields));
  clock.set(new Date(start.getTime() + ms));
  return job;
}

it('sends seconds as a string, the size, and the image as input_reference; answers a queued VideoJob with the poll-after header', async () => {
  const job = await adapter.video_create(request({ seconds: 8, size: '1280x720', image_url: 'https://img.example/f.png' }));
  expect(sim.received.at(-1)).toEqual({
    model: 'sora-2',
    prompt: 'a paper boat on a river',
    seconds: '8',
    size: '1280x720',
    input_reference: { image_url: 'https://img.example/f.png' },
  });
  expect(job).toEqual({
    id: expect.stringMatching(/^video_sim_\d+$/),
    status: 'queued',
    progress: 0,
    error: null,
    costNano: null,
    pollAfterMs: 250,
    url: null,
  });
});

it('turns an aspect ratio (and resolution) into the size it names, and refuses one OpenAI has not before calling', async () => {
  await adapter.video_create(request({ aspect_ratio: '9:16' }));
  expect(sim.received.at(-1)).toMatchObject({ size: '720x1280' });
  await adapter.video_create(request({ aspect_ratio: '16:9', resolution: '1024p', size: null }));
  expect(sim.received.at(-1)).toMatchObject({ size: '1792x1024' });
  expect(sim.received.at(-1)).not.toHaveProperty('resolution');
  expect(sim.received.at(-1)).not.toHaveProperty('aspect_ratio');
  const before = sim.requests;
  expect(await failure(adapter.video_create(request({ aspect_ratio: '1:1' })))).toMatchObject({
    kind: 'http',
    status: 400,
    message: expect.stringContaining('not 1:1 720p'),
  });
  expect(sim.requests).toBe(before);
});

it('polls to completed, then downloads the MP4 and the JPEG poster', async () => {
  const job = await createdAndAged({ seconds: 8, size: '720x1280' }, 600);
  expect(await adapter.video_get(job.id)).toEqual({ ...job, status: 'in_progress', progress: 60 });
  expect(await failure(adapter.video_content(job.id, 'video'))).toMatchObject({
    kind: 'http',
    status: 404,
    retryable: false,
    message: expect.stringContaining('in_progress'),
  });

  clock.advance(JOB_MS);
  expect(await adapter.video_get(job.id)).toEqual({ ...job, status: 'completed', progress: 100 });
  const video = await adapter.video_content(job.id, 'video');
  expect(video.contentType).toBe('video/mp4');
  expect(video.bytes.toString('latin1', 4, 12)).toBe('ftypisom');
  expect(sim.received.at(-1)).toEqual({ variant: 'video' });
  const poster = await adapter.video_content(job.id, 'thumbnail');
  expect(poster.contentType).toBe('image/jpeg');
  expect([...poster.bytes.subarray(0, 3)]).toEqual([0xff, 0xd8, 0xff]);
  expect(poster.latencyMs).toBeGreaterThanOrEqual(0);
});

it("reports #sim fail as a failed job with the provider's error", async () => {
  const job = await createdAndAged({ prompt: 'storm\n#sim {"fail": true}' }, JOB_MS);
  expect(await adapter.video_get(job.id)).toEqual({
    ...job,
    status: 'failed',
    progress: 50,
    error: { code: 'video_generation_failed', message: expect.stringContaining('#sim fail') },
  });
});

it('cancels a stalled job by DELETE; cancelling again, or a finished job, is not an error', async () => {
  const stalled = await createdAndAged({ prompt: 'x\n#sim {"stall": true}' }, 5 * JOB_MS);
  expect(await adapter.video_get(stalled.id)).toMatchObject({ status: 'in_progress', progress: 99 });
  await expect(adapter.video_cancel(stalled.id)).resolves.toBeUndefined();
  expect(await failure(adapter.video_get(stalled.id))).toMatchObject({ kind: 'http', status: 404 });
  await expect(adapter.video_cancel(stalled.id)).resolves.toBeUndefined();

  const finished = await createdAndAged({}, JOB_MS);
  expect(await adapter.video_get(finished.id)).toMatchObject({ status: 'completed' });
  await expect(adapter.video_cancel(finished.id)).resolves.toBeUndefined();
});

it("turns OpenAI's refusals and failures into ProviderErrors with its message", async () => {
  const bad = await failure(adapter.video_create(request({ seconds: 5 })));
  expect(bad).toBeInstanceOf(ProviderError);
  expect(bad).toMatchObject({
    kind: 'http',
    status: 400,
    retryable: false,
    message: "Invalid value: '5'. Supported values are: '4', '8', and '12'.",
    upstreamBody: { error: { param: 'seconds', code: 'invalid_value' } },
  });
  expect(await failure(adapter.video_create(request({ size: '1920x1080' })))).toMatchObject({ status: 400, upstreamBody: { error: { param: 'size' } } });
  expect(await failure(adapter.video_create(request({ prompt: 'p\n#sim {"fail": 503}' })))).toMatchObject({ kind: 'http', status: 503, retryable: true });
  expect(await failure(adapter.video_get('video_nope'))).toMatchObject({ kind: 'http', status: 404, upstreamBody: { error: { code: 'video_not_found' } } });
  const keyless = openai.client({ baseUrl: sim.url, apiKey: '' });
  expect(await failure(keyless.video_create(request()))).toMatchObject({ status: 401 });
});

it('round trip on the real clock: polling as openai-poll-after-ms says reaches completed', async () => {
  const fast = await startSimulator({ videoJobMs: 200 });
  try {
    const client = openai.client({ baseUrl: fast.url, apiKey: 'sk-sim' });
    let job = await client.video_create(request({ seconds: 12, size: '1792x1024' }));
    expect(job.pollAfterMs).toBe(20);
    const statuses = new Set<string>([job.status]);
    for (let polls = 0; job.status !== 'completed' && polls < 100; polls++) {
      await new Promise((resolve) => setTimeout(resolve, job.pollAfterMs ?? 1000));
      job = await client.video_get(job.id);
      statuses.add(job.status);
    }
    expect(job.status).toBe('completed');
    expect([...statuses]).toEqual(['queued', 'in_progress', 'completed']);
    expect((await client.video_content(job.id, 'video')).bytes.toString('latin1', 4, 8)).toBe('ftyp');
  } finally {
    await fast.close();
  }
});
