import { randomBytes } from 'node:crypto';
import { loadCatalog, ProviderStats } from '@svc/catalog';
import type { Caller } from '@svc/identity';
import type { Reservation, RoutedModel } from '@svc/metering';
import { testCaller } from '@svc/metering/testing/pipeline-fixtures';
import { type ApiError, ManualClock } from '@svc/platform';
import { rejectionOf } from '@svc/platform/testing/errors';
import { CreateVideo, type CreateVideoDeps } from './create-video';
import { VIDEO_JOB_KIND, VideoJobs } from './jobs';
import type { VideoRequest } from './request';
import { videoWorld } from './testing/video-world';

/**
 * POST /videos as the use case runs it, on a real event store, read model and job table: what
 * it refuses and in which order, what it holds, keeps and records. The pipeline's hold is a fake
 * that remembers what it was asked for.
 */
describe('creating a video (spec 4.15)', () => {
  const clock = new ManualClock(new Date('2026-11-02T10:00:00.000Z'));
  const catalog = loadCatalog();
  const routing = { catalog, clock, providerStats: new ProviderStats() };
  const key = randomBytes(32);
  const world = videoWorld(clock, key);
  let holds: { model: string; request: VideoRequest; holdId: string }[];
  let released: string[];

  const calls: CreateVideoDeps['calls'] = {
    hold: async (_caller: Caller, routed: { models: RoutedModel[] }, request: VideoRequest, holdId: string) => {
      holds.push({ model: routed.models[0].model.id, request, holdId });
      return { id: holdId, heldNano: String(BigInt(request.seconds) * 100_000_000n), targets: [] } as unknown as Reservation;
    },
    release: async (_job, errorCode) => {
      released.push(errorCode);
    },
  };
  const useCase = (deps: Partial<CreateVideoDeps> = {}) =>
    new CreateVideo({
      clock,
      sql: world.sql,
      aggregates: world.aggregates,
      projections: world.runner,
      routing,
      jobs: world.jobs,
      calls,
      allowPrivateUrls: false,
      ...deps,
    });
  /** The error object the edge answers for what creating `body` throws. */
  const refusal = (body: unknown, deps: Partial<CreateVideoDeps> = {}, caller = testCaller()): Promise<ApiError> =>
    rejectionOf(useCase(deps).run(caller, body));
  const shape = (err: ApiError) => [err.status, err.type, err.code, err.param];

  beforeEach(() => {
    holds = [];
    released = [];
  });

  it('given a request that names no model, when created, then the first video model the key may use makes it: held, kept, recorded queued and due', async () => {
    const created = await useCase().run(testCaller(), { prompt: 'a paper boat', seconds: 8 });
    expect(holds).toEqual([{ model: 'sim/video', request: created.request, holdId: created.holdId }]);
    expect(created.video).toMatchObject({ model: 'sim/video', status: 'queued', seconds: 8, estimatedNano: 800_000_000n, workspaceId: 'ws1' });
    expect(await world.jobs.request(created.video.videoId)).toEqual(created.request);
    const { rows } = await world.sql.query<{ due_at: Date }>(`SELECT due_at FROM jobs WHERE kind = $1 AND key = $2`, [VIDEO_JOB_KIND, created.video.videoId]);
    expect(new Date(rows[0].due_at)).toEqual(clock.now());

    const routerOnly = { ...testCaller(), allowed_models: ['sim/video-router'] } as Caller;
    expect((await useCase().run(routerOnly, { prompt: 'a paper boat' })).video.model).toBe('sim/video-router');
    expect(shape(await refusal({ prompt: 'a paper boat' }, {}, { ...testCaller(), allowed_models: ['sim/echo'] } as Caller))).toEqual([
      404,
      'not_found_error',
      'model_not_found',
      'model',
    ]);
  });

  it('refuses a body that is not an object, then a model that is not a string, then one that is not a video model, holding nothing', async () => {
    expect(shape(await refusal(['a paper boat']))).toEqual([400, 'invalid_request_error', null, null]);
    expect((await refusal(null)).message).toBe('The request body must be a JSON object (or a multipart form).');
    expect(shape(await refusal({ model: 4, prompt: 'a paper boat' }))).toEqual([400, 'invalid_request_error', null, 'model']);
    expect(shape(await refusal({ model: 'sim/nope', prompt: 'a paper boat' }))).toEqual([404, 'not_found_error', 'model_not_found', 'model']);
    expect(shape(await refusal({ model: 'sim/echo', prompt: 'a paper boat' }))).toEqual([400, 'invalid_request_error', 'model_type_mismatch', 'model']);
    expect(holds).toEqual([]);
  });

  it("checks the fields against the model, then the first frame's host, then whether prompts can be kept: without SVC_ENCRYPTION_KEY a valid request is a 503 and nothing is held", async () => {
    const keyless = { jobs: new VideoJobs(world.sql, () => null) };
    expect(shape(await refusal({ prompt: 'a paper boat', seconds: 5, image_url: 'https://localhost/f.png' }, keyless))).toEqual([
      400,
      'invalid_request_error',
      null,
      'seconds',
    ]);
    const privateHost = await refusal({ prompt: 'a paper boat', image_url: 'https://localhost/f.png' }, keyless);
    expect(shape(privateHost)).toEqual([400, 'invalid_request_error', null, 'image_url']);
    expect(privateHost.message).toMatch(/^image_url must be a public https URL of the first frame: /);
    expect(shape(await refusal({ prompt: 'a paper boat' }, keyless))).toEqual([503, 'service_unavailable', 'storage_unavailable', null]);
    expect(holds).toEqual([]);
  });

  it('given a request that cannot be kept, when created, then its hold is released and nothing is recorded', async () => {
    const handle = jest.fn();
    const failing = { jobs: { available: true, add: () => Promise.reject(new Error('disk full')), wake: () => Promise.resolve() }, aggregates: { handle } };
    await expect(useCase(failing).run(testCaller(), { prompt: 'a paper boat' })).rejects.toThrow('disk full');
    expect(holds).toHaveLength(1);
    expect(released).toEqual(['video_not_recorded']);
    expect(handle).not.toHaveBeenCalled();
  });
});
