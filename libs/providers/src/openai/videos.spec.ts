/**
 * The OpenAI-compatible adapter's video methods against the simulator's Videos API over real
 * HTTP (WIRE-FORMATS 2): what every video adapter does (../testing/video-adapter-spec), and what
 * is OpenAI's own: the request as OpenAI takes it, the poll-after header, a job with no cost or
 * URL, content asked for by variant, DELETE as cancel, and its refusals as ProviderErrors.
 */
import { ProviderError } from '../provider-error';
import { startSimulator } from '../simulator';
import { describeVideoAdapter, failure, VIDEO_JOB_MS } from '../testing/video-adapter-spec';
import { openai } from './index';

const video = describeVideoAdapter({
  client: (baseUrl) => openai.client({ baseUrl, apiKey: 'sk-sim' }),
  request: { model: 'sora-2', prompt: 'a paper boat on a river', seconds: 4, size: null, aspect_ratio: null, resolution: null, image_url: null },
  simulator: { videoPollAfterMs: 250 },
  cancelled: 'gone',
});

it('sends seconds as a string, the size, and the image as input_reference; answers a queued VideoJob with the poll-after header', async () => {
  const job = await video.adapter.video_create(video.request({ seconds: 8, size: '1280x720', image_url: 'https://img.example/f.png' }));
  expect(video.sim.received.at(-1)).toEqual({
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
  const { adapter, sim, request } = video;
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

it('reads a job without cost or URL, running and completed alike, and asks for its content by variant', async () => {
  const { adapter, sim, clock } = video;
  const job = await video.createdAndAged({ seconds: 8, size: '720x1280' }, 600);
  expect(await adapter.video_get(job.id)).toEqual({ ...job, status: 'in_progress', progress: 60 });
  clock.advance(VIDEO_JOB_MS);
  expect(await adapter.video_get(job.id)).toEqual({ ...job, status: 'completed', progress: 100 });
  const clip = await adapter.video_content(job.id, 'video');
  expect(clip.bytes.toString('latin1', 4, 12)).toBe('ftypisom');
  expect(sim.received.at(-1)).toEqual({ variant: 'video' });
});

it("turns OpenAI's refusals and failures into ProviderErrors with its message", async () => {
  const { adapter, sim, request } = video;
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
    let job = await client.video_create(video.request({ seconds: 12, size: '1792x1024' }));
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
