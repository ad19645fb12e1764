/** Reading a provider's job object into a VideoJob: statuses, progress, errors, cost in nano-USD, poll-after. */
import { givenFields, videoJobFrom } from './video';

const routerFields = (job: Record<string, unknown>) => ({ costUsd: (job.usage as { cost?: unknown } | null)?.cost, url: job.video_url });
const read = (json: unknown, headers?: Record<string, string | string[]>) => videoJobFrom(json, headers, 'test', routerFields);
const failure = (f: () => unknown) => {
  try {
    f();
    return null;
  } catch (error) {
    return error;
  }
};

it('maps the shared fields, a completed job at 100 whatever it says', () => {
  expect(read({ id: 'v1', status: 'in_progress', progress: 41.6, error: null })).toEqual({
    id: 'v1',
    status: 'in_progress',
    progress: 42,
    error: null,
    costNano: null,
    pollAfterMs: null,
    url: null,
  });
  expect(read({ id: 'v1', status: 'completed', progress: 97, video_url: 'https://cdn/x.mp4' })).toMatchObject({ progress: 100, url: 'https://cdn/x.mp4' });
  expect(read({ id: 'v1', status: 'queued' })).toMatchObject({ progress: 0 });
  expect(read({ id: 'v1', status: 'in_progress', progress: 250 })).toMatchObject({ progress: 100 });
  expect(read({ id: 'v1', status: 'in_progress', progress: -3 })).toMatchObject({ progress: 0 });
});

it.each([
  [0.8, 800_000_000n],
  [0.35, 350_000_000n],
  [7 * 0.05, 350_000_000n], // 0.35000000000000003: noise below the nano
  [0.1 + 0.2, 300_000_000n],
  [1e-7, 100n],
  [0.000000001, 1n],
  [6, 6_000_000_000n],
  [0, 0n],
  ['1.234567891', 1_234_567_891n],
])('reads usage.cost %p as exactly %p nano-USD', (cost, nano) => {
  expect(read({ id: 'v', status: 'completed', usage: { cost } }).costNano).toBe(nano);
});

it.each([[-0.5], ['12 USD'], [{}], [Number.NaN], ['0.0000000001']])('refuses a cost of %p as an invalid response', (cost) => {
  expect(failure(() => read({ id: 'v', status: 'completed', usage: { cost } }))).toMatchObject({
    kind: 'invalid_response',
    status: 502,
    message: expect.stringContaining('not a USD amount'),
  });
});

it('has no cost where the provider reports none', () => {
  expect(read({ id: 'v', status: 'completed', usage: null }).costNano).toBeNull();
  expect(videoJobFrom({ id: 'v', status: 'completed', usage: { cost: 1 } }, undefined, 'OpenAI', () => ({})).costNano).toBeNull();
});

it('refuses a job without an id or with a status it does not know', () => {
  for (const json of [null, [], { status: 'queued' }, { id: '', status: 'queued' }, { id: 'v', status: 'done' }, { id: 'v' }]) {
    expect(failure(() => read(json))).toMatchObject({ kind: 'invalid_response', status: 502 });
  }
});

it('always gives a failed job an error to show, in {code, message}', () => {
  expect(read({ id: 'v', status: 'failed', error: { code: 'moderation_blocked', message: 'blocked' } }).error).toEqual({
    code: 'moderation_blocked',
    message: 'blocked',
  });
  expect(read({ id: 'v', status: 'failed', error: { message: 'out of GPUs' } }).error).toEqual({ code: 'video_generation_failed', message: 'out of GPUs' });
  expect(read({ id: 'v', status: 'failed', error: 'timeout' }).error).toEqual({ code: 'video_generation_failed', message: 'timeout' });
  expect(read({ id: 'v', status: 'failed', error: null }).error).toEqual({
    code: 'video_generation_failed',
    message: expect.stringContaining('without a reason'),
  });
});

it('reads openai-poll-after-ms when it is a whole number of milliseconds', () => {
  expect(read({ id: 'v', status: 'queued' }, { 'openai-poll-after-ms': '1500' }).pollAfterMs).toBe(1500);
  expect(read({ id: 'v', status: 'queued' }, { 'openai-poll-after-ms': ['250', '900'] }).pollAfterMs).toBe(250);
  expect(read({ id: 'v', status: 'queued' }, { 'openai-poll-after-ms': 'soon' }).pollAfterMs).toBeNull();
  expect(read({ id: 'v', status: 'queued' }, { 'retry-after': '3' }).pollAfterMs).toBeNull();
});

it('sends only the fields that were given', () => {
  expect(givenFields({ model: 'm', prompt: 'p', seconds: 4, size: null, aspect_ratio: '16:9', resolution: null, image_url: null })).toEqual({
    model: 'm',
    prompt: 'p',
    seconds: 4,
    aspect_ratio: '16:9',
  });
});
