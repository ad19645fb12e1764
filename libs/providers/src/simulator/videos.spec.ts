/**
 * The simulator's video routes over real HTTP, as the providers' own clients call them: OpenAI's
 * Videos API and the router's, their wire shapes, the job timeline on a clock moved by hand,
 * validation, directives, and the files served.
 */
import { ManualClock } from '@svc/platform';
import OpenAI, { toFile } from 'openai';
import { startSimulator, type Simulator } from './server';

const JOB_MS = 1000;
let sim: Simulator;
let clock: ManualClock;
beforeAll(async () => {
  clock = new ManualClock(new Date('2026-11-02T10:00:00Z'));
  sim = await startSimulator({ videoJobMs: JOB_MS, clock });
});
afterAll(() => sim.close());

const AUTH = { authorization: 'Bearer sk-sim' };
const JSON_HEADERS = { ...AUTH, 'content-type': 'application/json' };
const STARTED = Date.parse('2026-11-02T10:00:00Z') / 1000;

type Wire = Record<string, unknown>;
interface Answer {
  status: number;
  headers: Headers;
  bytes: Buffer;
  json: Wire;
}

async function send(path: string, init: RequestInit = {}): Promise<Answer> {
  const response = await fetch(path.startsWith('http') ? path : `${sim.url}${path}`, {
    ...init,
    headers: { ...AUTH, ...(init.headers as Record<string, string>) },
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  const json = response.headers.get('content-type')?.startsWith('application/json') ? (JSON.parse(bytes.toString('utf8')) as Wire) : {};
  return { status: response.status, headers: response.headers, bytes, json };
}

const post = (path: string, body: unknown) => send(path, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(body) });
const get = (path: string) => send(path);
const del = (path: string) => send(path, { method: 'DELETE' });
const at = (ms: number, from: Date) => clock.set(new Date(from.getTime() + ms));

const openAiError = (status: number, param: string | null, code: string | null, message: unknown = expect.any(String)) => ({
  status,
  json: { error: { message, type: status === 404 ? 'not_found_error' : 'invalid_request_error', param, code } },
});

/** The seconds an MP4's mvhd says it lasts: enough to tell the clip from any other body. */
function mp4Seconds(bytes: Buffer): number {
  expect(bytes.toString('latin1', 4, 8)).toBe('ftyp');
  const moov = bytes.indexOf('mvhd', 0, 'latin1');
  expect(moov).toBeGreaterThan(0);
  return bytes.readUInt32BE(moov + 4 + 16) / bytes.readUInt32BE(moov + 4 + 12);
}

describe('OpenAI Videos API', () => {
  it('answers the Video object, queued, with openai-poll-after-ms, and keeps the body in received', async () => {
    const created = clock.now();
    const { status, json, headers } = await post('/videos', { model: 'sora-2-pro', prompt: 'a red fox in the snow', seconds: '8', size: '1280x720' });
    expect(status).toBe(200);
    expect(headers.get('openai-poll-after-ms')).toBe('100');
    expect(json).toEqual({
      id: expect.stringMatching(/^video_sim_\d+$/),
      object: 'video',
      model: 'sora-2-pro',
      status: 'queued',
      progress: 0,
      created_at: Math.floor(created.getTime() / 1000),
      completed_at: null,
      expires_at: null,
      prompt: 'a red fox in the snow',
      seconds: '8',
      size: '1280x720',
      remixed_from_video_id: null,
      error: null,
    });
    expect(sim.received.at(-1)).toEqual({ model: 'sora-2-pro', prompt: 'a red fox in the snow', seconds: '8', size: '1280x720' });
  });

  it('defaults to sora-2, 4 seconds, 720x1280', async () => {
    expect((await post('/videos', { prompt: 'p' })).json).toMatchObject({ model: 'sora-2', seconds: '4', size: '720x1280' });
  });

  it('moves queued -> in_progress -> completed with the clock; content is 404 until completed, then the MP4 and a JPEG poster', async () => {
    const created = clock.now();
    const { json } = await post('/videos', { prompt: 'waves', seconds: '12', size: '1792x1024' });
    const id = json.id as string;
    const poll = async () => {
      const answer = await get(`/videos/${id}`);
      expect(answer.headers.get('openai-poll-after-ms')).toBe('100');
      return answer.json;
    };
    at(199, created);
    expect(await poll()).toMatchObject({ status: 'queued', progress: 0 });
    at(200, created);
    expect(await poll()).toMatchObject({ status: 'in_progress', progress: 20 });
    at(555, created);
    expect(await poll()).toMatchObject({ status: 'in_progress', progress: 55, completed_at: null });
    expect(await get(`/videos/${id}/content`)).toMatchObject(
      openAiError(404, null, 'video_not_ready', `video ${id} has no content: its status is in_progress`),
    );

    at(JOB_MS, created);
    const done = await poll();
    expect(done).toMatchObject({ status: 'completed', progress: 100, error: null, completed_at: STARTED + Math.floor(JOB_MS / 1000) });
    expect(done.expires_at).toBe((done.completed_at as number) + 24 * 3600);

    const video = await get(`/videos/${id}/content`);
    expect(video.status).toBe(200);
    expect(video.headers.get('content-type')).toBe('video/mp4');
    expect(mp4Seconds(video.bytes)).toBe(12);
    expect(sim.received.at(-1)).toEqual({});
    const explicit = await get(`/videos/${id}/content?variant=video`);
    expect(explicit.bytes.equals(video.bytes)).toBe(true);
    expect(sim.received.at(-1)).toEqual({ variant: 'video' });

    const poster = await get(`/videos/${id}/content?variant=thumbnail`);
    expect(poster.headers.get('content-type')).toBe('image/jpeg');
    expect([...poster.bytes.subarray(0, 3)]).toEqual([0xff, 0xd8, 0xff]);
    expect(await get(`/videos/${id}/content?variant=spritesheet`)).toMatchObject(openAiError(400, 'variant', 'invalid_value'));
  });

  it("refuses what OpenAI refuses, in OpenAI's words", async () => {
    expect(await post('/videos', { prompt: 'p', seconds: 4 })).toMatchObject(
      openAiError(400, 'seconds', 'invalid_type', "Invalid type for 'seconds': expected one of '4', '8', or '12', but got an integer instead."),
    );
    expect(await post('/videos', { prompt: 'p', seconds: '5' })).toMatchObject(
      openAiError(400, 'seconds', 'invalid_value', "Invalid value: '5'. Supported values are: '4', '8', and '12'."),
    );
    expect(await post('/videos', { prompt: 'p', size: '1920x1080' })).toMatchObject(
      openAiError(400, 'size', 'invalid_value', "Invalid value: '1920x1080'. Supported values are: '720x1280', '1280x720', '1024x1792', and '1792x1024'."),
    );
    expect(await post('/videos', { prompt: 'p', duration: 4 })).toMatchObject(
      openAiError(400, 'duration', 'unknown_parameter', "Unknown parameter: 'duration'."),
    );
    expect(await post('/videos', { model: 'sora-2' })).toMatchObject(
      openAiError(400, 'prompt', 'missing_required_parameter', "Missing required parameter: 'prompt'."),
    );
    expect(await post('/videos', { prompt: '' })).toMatchObject(openAiError(400, 'prompt', 'invalid_value'));
    expect(await post('/videos', { prompt: 'x'.repeat(32_001) })).toMatchObject(openAiError(400, 'prompt', 'invalid_value'));
    expect(await post('/videos', { prompt: 'p', model: 7 })).toMatchObject(openAiError(400, 'model', 'invalid_type'));
    for (const reference of [{ image_url: 'https://x/a.png', file_id: 'file_1' }, {}, { image_url: 3 }, 'https://x/a.png']) {
      expect(await post('/videos', { prompt: 'p', input_reference: reference })).toMatchObject(openAiError(400, 'input_reference', 'invalid_value'));
    }
    expect((await post('/videos', { prompt: 'p', input_reference: { image_url: 'https://x/a.png' } })).status).toBe(200);
    expect((await post('/videos', { prompt: 'p', input_reference: { file_id: 'file_1' } })).status).toBe(200);
    expect(await send('/videos', { method: 'POST', headers: JSON_HEADERS, body: '{"prompt":' })).toMatchObject(
      openAiError(400, null, null, 'request body is not valid JSON'),
    );
    const keyless = await fetch(`${sim.url}/videos`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"prompt": "p"}' });
    expect(keyless.status).toBe(401);
  });

  it('takes a multipart body with the reference image as a file', async () => {
    const form = new FormData();
    form.append('prompt', 'from this frame');
    form.append('seconds', '4');
    form.append('size', '720x1280');
    form.append('input_reference', new Blob([Buffer.from('not really a png')], { type: 'image/png' }), 'frame.png');
    const { status, json } = await send('/videos', { method: 'POST', body: form });
    expect(status).toBe(200);
    expect(json).toMatchObject({ status: 'queued', prompt: 'from this frame', seconds: '4', size: '720x1280', model: 'sora-2' });
    expect(sim.received.at(-1)).toEqual({
      model: undefined,
      prompt: 'from this frame',
      seconds: '4',
      size: '720x1280',
      file: { bytes: 16, filename: 'frame.png' },
    });

    const wrong = new FormData();
    wrong.append('prompt', 'p');
    wrong.append('seconds', '6');
    expect(await send('/videos', { method: 'POST', body: wrong })).toMatchObject(openAiError(400, 'seconds', 'invalid_value'));
    const unknown = new FormData();
    unknown.append('prompt', 'p');
    unknown.append('image', new Blob([Buffer.from('x')]), 'x.png');
    expect(await send('/videos', { method: 'POST', body: unknown })).toMatchObject(openAiError(400, 'image', 'unknown_parameter'));
  });

  it('#sim fail: true fails the job once half done; fail: <status> fails the request itself', async () => {
    const created = clock.now();
    const id = (await post('/videos', { prompt: 'a storm\n#sim {"fail": true}' })).json.id as string;
    at(JOB_MS / 2 - 1, created);
    expect((await get(`/videos/${id}`)).json).toMatchObject({ status: 'in_progress', progress: 49, error: null });
    at(JOB_MS / 2, created);
    const failed = (await get(`/videos/${id}`)).json;
    expect(failed).toMatchObject({
      status: 'failed',
      progress: 50,
      error: { code: 'video_generation_failed', message: expect.stringContaining('#sim fail') },
      expires_at: null,
    });
    at(10 * JOB_MS, created);
    expect((await get(`/videos/${id}`)).json).toEqual(failed);
    expect(await get(`/videos/${id}/content`)).toMatchObject(openAiError(404, null, 'video_not_ready'));

    expect(await post('/videos', { prompt: 'p\n#sim {"fail": 503}' })).toMatchObject({
      status: 503,
      json: { error: { message: 'simulated failure (#sim fail 503)', type: 'api_error', code: 'sim_failure', param: null } },
    });
    expect(await post('/videos', { model: 'sora-2-pro', prompt: 'p\n#sim {"fail_models": {"sora-2-pro": 429}}' })).toMatchObject({ status: 429 });
    expect(await post('/videos', { prompt: 'p\n#sim {"fail": "yes"}' })).toMatchObject(
      openAiError(400, null, 'invalid_sim_directive', '#sim: invalid value for "fail"'),
    );
  });

  it('#sim stall keeps the job in progress; DELETE stops and removes it, and deletes finished ones', async () => {
    const created = clock.now();
    const stalled = (await post('/videos', { prompt: 'forever\n#sim {"stall": true}' })).json.id as string;
    const finished = (await post('/videos', { prompt: 'soon' })).json.id as string;
    at(100 * JOB_MS, created);
    expect((await get(`/videos/${stalled}`)).json).toMatchObject({ status: 'in_progress', progress: 99 });
    expect((await get(`/videos/${finished}`)).json).toMatchObject({ status: 'completed' });
    for (const id of [stalled, finished]) {
      expect(await del(`/videos/${id}`)).toMatchObject({ status: 200, json: { id, object: 'video.deleted', deleted: true } });
      expect(await get(`/videos/${id}`)).toMatchObject(openAiError(404, 'video_id', 'video_not_found'));
      expect(await get(`/videos/${id}/content`)).toMatchObject(openAiError(404, 'video_id', 'video_not_found'));
      expect(await del(`/videos/${id}`)).toMatchObject({ status: 404 });
    }
  });

  it('renders the same clip for the same request (directives aside), another for another prompt', async () => {
    const created = clock.now();
    const ids = [];
    for (const prompt of ['a lighthouse', 'a lighthouse\n#sim {"delay_ms": 1}', 'a lighthouse at night'])
      ids.push((await post('/videos', { prompt })).json.id as string);
    at(JOB_MS, created);
    const [a, b, c] = await Promise.all(ids.map(async (id) => (await get(`/videos/${id}/content`)).bytes));
    expect(a.equals(b)).toBe(true);
    expect(a.equals(c)).toBe(false);
  });
});

describe('the official openai SDK', () => {
  it('creates (as multipart, with a reference image), retrieves, downloads and deletes a video', async () => {
    const client = new OpenAI({ baseURL: sim.url, apiKey: 'sk-sim', maxRetries: 0 });
    const created = clock.now();
    const video = await client.videos.create({
      model: 'sora-2',
      prompt: 'a kite over the sea',
      seconds: '8',
      size: '1280x720',
      input_reference: await toFile(Buffer.from('reference image bytes'), 'kite.png', { type: 'image/png' }),
    });
    expect(video).toMatchObject({ object: 'video', status: 'queued', seconds: '8', size: '1280x720' });
    expect(sim.received.at(-1)).toMatchObject({ model: 'sora-2', seconds: '8', file: { bytes: 21, filename: 'kite.png' } });
    at(JOB_MS, created);
    expect(await client.videos.retrieve(video.id)).toMatchObject({ id: video.id, status: 'completed', progress: 100 });
    const content = await client.videos.downloadContent(video.id);
    expect(mp4Seconds(Buffer.from(await content.arrayBuffer()))).toBe(8);
    const poster = await client.videos.downloadContent(video.id, { variant: 'thumbnail' });
    expect(poster.headers.get('content-type')).toBe('image/jpeg');
    await poster.arrayBuffer();
    expect(await client.videos.delete(video.id)).toEqual({ id: video.id, object: 'video.deleted', deleted: true });
    await expect(client.videos.retrieve(video.id)).rejects.toMatchObject({ status: 404 });
  });
});

describe("the router's video API", () => {
  const generation = (id: string) => get(`/videos/generations/${id}`);

  it('answers the generation object, queued, with no cost and no files yet', async () => {
    const created = clock.now();
    const { status, json, headers } = await post('/videos/generations', {
      model: 'kling/v2',
      prompt: 'a cat',
      duration: 8,
      aspect_ratio: '9:16',
      resolution: '1080p',
      image_url: 'https://img.example/first.png',
    });
    expect(status).toBe(200);
    expect(headers.get('openai-poll-after-ms')).toBeNull();
    expect(json).toEqual({
      id: expect.stringMatching(/^vgen_sim_\d+$/),
      object: 'video.generation',
      model: 'kling/v2',
      status: 'queued',
      progress: 0,
      created_at: Math.floor(created.getTime() / 1000),
      completed_at: null,
      duration: 8,
      aspect_ratio: '9:16',
      resolution: '1080p',
      error: null,
      usage: null,
      video_url: null,
      thumbnail_url: null,
    });
    expect(sim.received.at(-1)).toEqual({
      model: 'kling/v2',
      prompt: 'a cat',
      duration: 8,
      aspect_ratio: '9:16',
      resolution: '1080p',
      image_url: 'https://img.example/first.png',
    });
  });

  it('takes null as absent: 5 seconds, 16:9, 720p', async () => {
    const { json } = await post('/videos/generations', { model: 'm', prompt: 'p', duration: null, aspect_ratio: null, resolution: null, image_url: null });
    expect(json).toMatchObject({ duration: 5, aspect_ratio: '16:9', resolution: '720p' });
  });

  it.each([
    [8, '720p', 0.8],
    [3, '720p', 0.3],
    [7, '480p', 0.35],
    [3, '1080p', 0.9],
    [20, '1080p', 6],
  ])('%is at %s costs exactly $%d once completed; the files are served without a key', async (duration, resolution, cost) => {
    const created = clock.now();
    const { json } = await post('/videos/generations', { model: 'm', prompt: `clip ${duration} ${resolution}`, duration, resolution });
    const id = json.id as string;
    at(JOB_MS / 2, created);
    const running = (await generation(id)).json;
    expect(running).toMatchObject({ status: 'in_progress', progress: 50, usage: null, video_url: null });
    const early = await fetch(`${sim.url}/files/videos/${id}.mp4`);
    expect(early.status).toBe(404);
    await early.arrayBuffer();

    at(JOB_MS, created);
    const done = (await generation(id)).json;
    expect(done).toMatchObject({ status: 'completed', progress: 100, error: null, usage: { cost }, completed_at: expect.any(Number) });
    expect(done.video_url).toBe(`${sim.url}/files/videos/${id}.mp4`);
    expect(done.thumbnail_url).toBe(`${sim.url}/files/videos/${id}.jpg`);
    const video = await fetch(done.video_url as string);
    expect(video.headers.get('content-type')).toBe('video/mp4');
    expect(mp4Seconds(Buffer.from(await video.arrayBuffer()))).toBe(duration);
    const poster = await fetch(done.thumbnail_url as string);
    expect(poster.headers.get('content-type')).toBe('image/jpeg');
    expect([...Buffer.from(await poster.arrayBuffer()).subarray(0, 3)]).toEqual([0xff, 0xd8, 0xff]);
  });

  it('refuses bad fields with 400 naming the field', async () => {
    const base = { model: 'm', prompt: 'p' };
    for (const [field, value] of [
      ['duration', '8'],
      ['duration', 0],
      ['duration', 21],
      ['duration', 2.5],
      ['aspect_ratio', '2:1'],
      ['resolution', '4k'],
      ['image_url', 'ftp://x/a.png'],
      ['size', '1280x720'],
      ['seconds', 8],
    ] as const) {
      expect({ field, value, ...(await post('/videos/generations', { ...base, [field]: value })) }).toMatchObject({
        field,
        value,
        status: 400,
        json: { error: { param: field } },
      });
    }
    expect(await post('/videos/generations', { prompt: 'p' })).toMatchObject({ status: 400, json: { error: { param: 'model' } } });
    expect(await post('/videos/generations', { model: 'm', prompt: ' ' })).toMatchObject({ status: 400, json: { error: { param: 'prompt' } } });
  });

  it('cancels a running job (cost 0, progress kept), and leaves a finished one as it was', async () => {
    const created = clock.now();
    const stalled = (await post('/videos/generations', { model: 'm', prompt: 'x\n#sim {"stall": true}' })).json.id as string;
    const finished = (await post('/videos/generations', { model: 'm', prompt: 'y', duration: 4 })).json.id as string;
    at(3 * JOB_MS, created);
    expect((await generation(stalled)).json).toMatchObject({ status: 'in_progress', progress: 99 });
    const cancelled = await post(`/videos/generations/${stalled}/cancel`, undefined);
    expect(cancelled).toMatchObject({
      status: 200,
      json: { id: stalled, status: 'cancelled', progress: 99, usage: { cost: 0 }, video_url: null, completed_at: Math.floor(created.getTime() / 1000) + 3 },
    });
    at(5 * JOB_MS, created);
    expect((await post(`/videos/generations/${stalled}/cancel`, undefined)).json).toEqual(cancelled.json);
    expect((await generation(stalled)).json).toEqual(cancelled.json);

    const done = (await generation(finished)).json;
    expect(done).toMatchObject({ status: 'completed', usage: { cost: 0.4 } });
    expect((await post(`/videos/generations/${finished}/cancel`, undefined)).json).toEqual(done);
  });

  it('fails a #sim fail job with cost 0 and no files', async () => {
    const created = clock.now();
    const id = (await post('/videos/generations', { model: 'm', prompt: 'z\n#sim {"fail": true}' })).json.id as string;
    at(JOB_MS, created);
    expect((await generation(id)).json).toMatchObject({
      status: 'failed',
      progress: 50,
      error: { code: 'video_generation_failed' },
      usage: { cost: 0 },
      video_url: null,
      thumbnail_url: null,
    });
  });

  it("keeps each API's jobs to itself", async () => {
    const openAi = (await post('/videos', { prompt: 'p' })).json.id as string;
    const router = (await post('/videos/generations', { model: 'm', prompt: 'p' })).json.id as string;
    expect(await generation(openAi)).toMatchObject({ status: 404 });
    expect(await get(`/videos/${router}`)).toMatchObject({ status: 404 });
    expect(await del(`/videos/${router}`)).toMatchObject({ status: 404 });
    expect(await get('/videos/generations/nope%ZZ')).toMatchObject({ status: 404 });
    clock.advance(JOB_MS);
    const file = await fetch(`${sim.url}/files/videos/${openAi}.mp4`);
    expect(file.status).toBe(404);
    await file.arrayBuffer();
  });
});

it('runs on the real clock by default: a 200 ms job completes after about 200 ms', async () => {
  const fast = await startSimulator({ videoJobMs: 200 });
  try {
    const started = Date.now();
    const create = await fetch(`${fast.url}/videos`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ prompt: 'quick' }) });
    expect(create.headers.get('openai-poll-after-ms')).toBe('20');
    const { id } = (await create.json()) as { id: string };
    let status = '';
    while (status !== 'completed' && Date.now() - started < 5000) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      status = ((await (await fetch(`${fast.url}/videos/${id}`, { headers: AUTH })).json()) as { status: string }).status;
    }
    expect(status).toBe('completed');
    expect(Date.now() - started).toBeGreaterThanOrEqual(200);
  } finally {
    await fast.close();
  }
});
