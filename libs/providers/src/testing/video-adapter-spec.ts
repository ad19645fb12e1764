import { ManualClock } from '@svc/platform';
import type { Calls, VideoJob, VideoJobRequest } from '../provider';
import { ProviderError } from '../provider-error';
import { startSimulator, type Simulator, type SimulatorOptions } from '../simulator';

/** How long a simulated job takes, on the clock the cases move by hand. */
export const VIDEO_JOB_MS = 1000;

export type VideoAdapter = Pick<Calls, 'video_create' | 'video_get' | 'video_cancel' | 'video_content'>;

export interface VideoAdapterCase {
  /** The adapter under test, on the simulator at `baseUrl`. */
  client(baseUrl: string): VideoAdapter;
  /** A request its provider takes; each case adds its own fields to it. */
  request: VideoJobRequest;
  /** The simulator's options beside its clock and job length. */
  simulator?: Omit<SimulatorOptions, 'clock' | 'videoJobMs'>;
  /** How a job reads once cancelled: gone (a 404, as OpenAI, which cancels by DELETE) or `cancelled`. */
  cancelled: 'gone' | 'cancelled';
}

/** What the provider's own cases use: set before the first case runs. */
export interface VideoAdapterHarness {
  readonly sim: Simulator;
  readonly clock: ManualClock;
  readonly adapter: VideoAdapter;
  request(fields?: Partial<VideoJobRequest>): VideoJobRequest;
  /** Creates a job and moves the clock `ms` past its creation. */
  createdAndAged(fields: Partial<VideoJobRequest>, ms: number): Promise<VideoJob>;
}

/** What `promise` rejects with; null when it resolves. */
export const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (error: unknown) => error,
  );

/**
 * The cases every video adapter shares, against the simulator over real HTTP: a job polled to
 * completed and its clip and poster downloaded (a 404 before), `#sim fail` read as a failed job
 * with the provider's error and no cost, and cancel, which stops a stalled job and is never an
 * error. Declared where it is called, before the adapter's own cases, which use the harness
 * it returns for what only their provider does.
 */
export function describeVideoAdapter(adapterCase: VideoAdapterCase): VideoAdapterHarness {
  let sim: Simulator;
  let clock: ManualClock;
  let adapter: VideoAdapter;
  beforeAll(async () => {
    clock = new ManualClock();
    sim = await startSimulator({ ...adapterCase.simulator, videoJobMs: VIDEO_JOB_MS, clock });
    adapter = adapterCase.client(sim.url);
  });
  afterAll(() => sim.close());

  const request = (fields: Partial<VideoJobRequest> = {}): VideoJobRequest => ({ ...adapterCase.request, ...fields });
  const createdAndAged = async (fields: Partial<VideoJobRequest>, ms: number): Promise<VideoJob> => {
    const start = clock.now();
    const job = await adapter.video_create(request(fields));
    clock.set(new Date(start.getTime() + ms));
    return job;
  };

  it('polls a job to completed, then downloads the MP4 and the JPEG poster; before completion the content is a 404', async () => {
    const job = await createdAndAged({}, VIDEO_JOB_MS / 2);
    expect(await adapter.video_get(job.id)).toMatchObject({ id: job.id, status: 'in_progress', progress: 50 });
    const early = await failure(adapter.video_content(job.id, 'video'));
    expect(early).toBeInstanceOf(ProviderError);
    expect(early).toMatchObject({ kind: 'http', status: 404, retryable: false, message: expect.stringContaining('in_progress') });

    clock.advance(VIDEO_JOB_MS);
    expect(await adapter.video_get(job.id)).toMatchObject({ id: job.id, status: 'completed', progress: 100 });
    const video = await adapter.video_content(job.id, 'video');
    expect(video.contentType).toBe('video/mp4');
    expect(video.bytes.toString('latin1', 4, 8)).toBe('ftyp');
    const poster = await adapter.video_content(job.id, 'thumbnail');
    expect(poster.contentType).toBe('image/jpeg');
    expect([...poster.bytes.subarray(0, 3)]).toEqual([0xff, 0xd8, 0xff]);
    expect(poster.latencyMs).toBeGreaterThanOrEqual(0);
  });

  it("reports #sim fail as a failed job, half done, with the provider's error and no cost", async () => {
    const job = await createdAndAged({ prompt: 'storm\n#sim {"fail": true}' }, VIDEO_JOB_MS);
    expect(await adapter.video_get(job.id)).toEqual({
      ...job,
      status: 'failed',
      progress: 50,
      error: { code: 'video_generation_failed', message: expect.stringContaining('#sim fail') },
      costNano: null,
    });
  });

  it(`cancels a stalled job (${adapterCase.cancelled} after); cancelling again, or a finished job, is not an error`, async () => {
    const stalled = await createdAndAged({ prompt: 'x\n#sim {"stall": true}' }, 2 * VIDEO_JOB_MS);
    expect(await adapter.video_get(stalled.id)).toMatchObject({ status: 'in_progress', progress: 99 });
    const readsCancelled = async () => {
      if (adapterCase.cancelled === 'gone') expect(await failure(adapter.video_get(stalled.id))).toMatchObject({ kind: 'http', status: 404 });
      else expect(await adapter.video_get(stalled.id)).toEqual({ ...stalled, status: 'cancelled', progress: 99 });
    };
    await expect(adapter.video_cancel(stalled.id)).resolves.toBeUndefined();
    await readsCancelled();
    await expect(adapter.video_cancel(stalled.id)).resolves.toBeUndefined();
    await readsCancelled();

    const finished = await createdAndAged({}, VIDEO_JOB_MS);
    const completed = await adapter.video_get(finished.id);
    expect(completed).toMatchObject({ status: 'completed' });
    await expect(adapter.video_cancel(finished.id)).resolves.toBeUndefined();
    // A cancel changes nothing of a finished job that is still there to read.
    if (adapterCase.cancelled === 'cancelled') expect(await adapter.video_get(finished.id)).toEqual(completed);
  });

  return {
    get sim() {
      return sim;
    },
    get clock() {
      return clock;
    },
    get adapter() {
      return adapter;
    },
    request,
    createdAndAged,
  };
}
