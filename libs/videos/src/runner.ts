/**
 * The workers' side of the video workflow (spec 3.1, 4.15; ARCHITECTURE section 11): the
 * decider (./workflow) chooses each step, the job table's processor carries it out, and this
 * file is what the steps do for real: the provider calls, the clip kept, the charge or release.
 * Any worker may run any video; one killed at any point leaves the video leased until its lease
 * runs out, and the next worker carries on from the stream. Billing follows the stream's end
 * and is idempotent by hold id: a video whose end is recorded is charged (or released) until
 * that has landed once.
 */
import { WorkflowProcessor, type JobQueue, type Lease, type ProcessorOptions } from '@svc/jobs';
import type { Clock, Nano } from '@svc/platform';
import type { BinaryResult, VideoJob, VideoJobRequest, VideoVariant } from '@svc/providers';
import { ProviderError } from '@svc/providers';
import type { ClaimedVideo, VideoFiles, VideoJobs } from './jobs';
import type { VideoRequest } from './request';
import type { VideoCommand, VideoError, VideoEvent, VideoState } from './video';
import { videoWorkflow, type VideoEffect, type VideoInput, type VideoWorkflowState } from './workflow';

/** One provider that may make the clip: the catalog provider's name (recorded on the stream) and its client. */
export interface VideoTarget {
  provider: string;
  /** The provider's own model id. */
  upstreamModel: string;
  createVideo(body: VideoJobRequest): Promise<VideoJob>;
  getVideo(id: string): Promise<VideoJob>;
  cancelVideo(id: string): Promise<void>;
  videoContent(id: string, variant: VideoVariant): Promise<BinaryResult>;
}

export interface VideoRunnerDeps {
  clock: Clock;
  queue: Pick<JobQueue, 'claim' | 'reschedule' | 'complete'>;
  jobs: Pick<VideoJobs, 'get' | 'request' | 'keepFiles' | 'files' | 'remove'>;
  load(videoId: string): Promise<VideoState>;
  /** Decides on the video's stream; resolves with the events recorded. */
  decide(command: VideoCommand): Promise<VideoEvent[]>;
  /** The reservation's providers, in the order to try them. */
  targets(job: ClaimedVideo): Promise<VideoTarget[]>;
  /** The catalog's price of a clip made by `provider`: its reported cost when it gives one, else the seconds at its price. */
  costOf(job: ClaimedVideo, provider: string, request: VideoRequest, providerCostNano: Nano | null): Promise<Nano>;
  /** Charges the end recorded on the stream (VideoCompleted's cost) against the hold; a hold settled already is not an error. */
  charge(job: ClaimedVideo, state: VideoState): Promise<void>;
  /** Releases the hold (a failed or cancelled video is free); a hold settled already is not an error. */
  release(job: ClaimedVideo, errorCode: string): Promise<void>;
  /** Keeps a clip or poster as a file of purpose `video`; resolves with its id. */
  store(job: ClaimedVideo, variant: VideoVariant, content: BinaryResult): Promise<string>;
  owner: string;
  /** Longer than the slowest step (a submission trying every provider, a clip's download). */
  leaseMs: number;
  /** Videos one pass of this worker takes on at once. */
  concurrency: number;
  warn(message: string): void;
  trace?: ProcessorOptions['trace'];
}

export type VideoRunner = WorkflowProcessor<VideoInput, VideoWorkflowState, VideoCommand, VideoEffect, VideoEvent>;

export function videoRunner(deps: VideoRunnerDeps): VideoRunner {
  const effects = new VideoEffects(deps);
  return new WorkflowProcessor(
    videoWorkflow,
    {
      load: async (job) => {
        const [video, kept] = await Promise.all([deps.load(job.key), deps.jobs.get(job.key)]);
        return { video, kept, request: kept === null ? null : await deps.jobs.request(job.key) };
      },
      send: (_job, command) => deps.decide(command),
      call: (job, effect, state) => effects.run(job, effect, state),
    },
    deps,
  );
}

class VideoEffects {
  constructor(private readonly deps: VideoRunnerDeps) {}

  async run(job: Lease, effect: VideoEffect, state: VideoWorkflowState): Promise<VideoInput> {
    const kept = state.kept as ClaimedVideo;
    switch (effect.type) {
      case 'Submit':
        return this.submit(kept, state.request as VideoRequest);
      case 'Poll':
        return this.poll(kept, state.video);
      case 'CancelAtProvider':
        await (await this.target(kept, state.video)).cancelVideo(state.video.providerJobId!);
        return { type: 'CancelledAtProvider' };
      case 'Keep':
        return this.keep(kept, state, effect.providerCostNano);
      case 'Charge':
        await this.deps.charge(kept, state.video);
        return { type: 'Settled' };
      case 'Release':
        await this.deps.release(kept, effect.errorCode);
        return { type: 'Settled' };
      case 'Forget':
        await this.deps.jobs.remove(job.key);
        return { type: 'Forgotten' };
    }
  }

  /** Spec 4.2 rule 6 for a job: each provider in turn until one takes it; a refusal of the request ends the search. */
  private async submit(job: ClaimedVideo, request: VideoRequest): Promise<VideoInput> {
    let last: VideoError = { code: 'no_provider_available', message: 'No provider could take the video.' };
    for (const target of await this.deps.targets(job)) {
      try {
        const body: VideoJobRequest = {
          model: target.upstreamModel,
          prompt: request.prompt,
          seconds: request.seconds,
          size: request.exactSize,
          aspect_ratio: request.exactSize === null ? request.aspectRatio : null,
          resolution: request.resolution,
          image_url: request.imageUrl,
        };
        const submitted = await target.createVideo(body);
        return { type: 'Submitted', provider: target.provider, providerJobId: submitted.id, pollAfterMs: submitted.pollAfterMs };
      } catch (err) {
        if (!(err instanceof ProviderError)) throw err;
        last = { code: err.kind === 'http' ? `upstream_${err.status}` : `upstream_${err.kind}`, message: err.message };
        if (err.retryable) continue;
        return { type: 'SubmissionRefused', error: last, retryable: false };
      }
    }
    return { type: 'SubmissionRefused', error: last, retryable: true };
  }

  private async poll(job: ClaimedVideo, state: VideoState): Promise<VideoInput> {
    const target = await this.target(job, state);
    try {
      return { type: 'Polled', provider: target.provider, job: await target.getVideo(state.providerJobId!) };
    } catch (err) {
      if (err instanceof ProviderError && err.kind === 'http' && err.status === 404) return { type: 'PollLost', provider: target.provider };
      this.deps.warn(`video ${job.videoId}: polling ${target.provider} failed (${(err as Error).message}); asking again later`);
      return { type: 'PollFailed' };
    }
  }

  /** The clip and its poster copied into the file store (once: a worker that died after it finds them there), and its price. */
  private async keep(job: ClaimedVideo, state: VideoWorkflowState, providerCostNano: Nano | null): Promise<VideoInput> {
    const target = await this.target(job, state.video);
    const files = await this.files(job, target, state.video.providerJobId!);
    const listedNano = await this.deps.costOf(job, target.provider, state.request as VideoRequest, providerCostNano);
    const held = BigInt(job.reservation.heldNano);
    if (listedNano > held) this.deps.warn(`video ${job.videoId}: ${target.provider} reported ${listedNano} nano-USD, above the ${held} held; charged ${held}`);
    return { type: 'Kept', listedNano, providerCostNano, hasThumbnail: files.thumbnail !== null };
  }

  private async files(job: ClaimedVideo, target: VideoTarget, providerJobId: string): Promise<VideoFiles> {
    const kept = await this.deps.jobs.files(job.videoId);
    if (kept.video !== null) return kept;
    const video = await this.deps.store(job, 'video', await target.videoContent(providerJobId, 'video'));
    let thumbnail: string | null = null;
    try {
      thumbnail = await this.deps.store(job, 'thumbnail', await target.videoContent(providerJobId, 'thumbnail'));
    } catch (err) {
      // A poster is a courtesy: the clip is what was paid for.
      if (!(err instanceof ProviderError)) throw err;
      this.deps.warn(`video ${job.videoId}: no thumbnail from ${target.provider} (${err.message})`);
    }
    const files = { video, thumbnail };
    if (!(await this.deps.jobs.keepFiles(job.videoId, files))) throw new Error('another worker kept the clip first');
    return files;
  }

  private async target(job: ClaimedVideo, state: VideoState): Promise<VideoTarget> {
    const target = (await this.deps.targets(job)).find((t) => t.provider === state.provider);
    if (!target) throw new Error(`provider ${state.provider} of this video is no longer configured`);
    return target;
  }
}
