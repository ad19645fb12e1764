/**
 * The workers' side of the video workflow (spec 3.1, 4.15; ARCHITECTURE section 11): claim the
 * videos that are due, do what their state asks (submit, poll, cancel at the provider, fetch
 * the clip), report it to the decider, then bill what the end says. Any worker may run any
 * video; one killed at any point leaves the video leased until its lease runs out, and the next
 * worker carries on from the stream. Billing follows the stream's end and is idempotent by hold
 * id: a video whose end is recorded is charged (or released) until that has landed once.
 */
import type { Clock, Nano } from '@svc/platform';
import type { BinaryResult, VideoJob, VideoJobRequest, VideoVariant } from '@svc/providers';
import { ProviderError } from '@svc/providers';
import type { ClaimedVideo, VideoFiles, VideoJobs } from './jobs';
import type { VideoRequest } from './request';
import { isVideoTerminal, pollDelayMs, type VideoCommand, type VideoError, type VideoState } from './video';

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
  jobs: Pick<VideoJobs, 'claim' | 'reschedule' | 'request' | 'keepFiles' | 'files' | 'remove'>;
  load(videoId: string): Promise<VideoState>;
  /** Decides on the video's stream; resolves with the state after it. */
  decide(command: VideoCommand): Promise<VideoState>;
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
  /** Runs one step of a video inside a trace of its own (its provider calls, charge or release); absent without tracing. */
  trace?<T>(name: string, attributes: Record<string, string | number>, fn: () => Promise<T>): Promise<T>;
}

/**
 * How long after a video was asked for a worker may find its stream still empty: the gateway
 * keeps the request, then decides RequestVideo, then makes it due (see the videos controller).
 * Past this, a request without a stream is one whose gateway died in between: its hold is released.
 */
export const REQUEST_GRACE_MS = 60_000;

export class VideoRunner {
  private readonly running = new Set<Promise<void>>();
  private stopping = false;

  constructor(private readonly deps: VideoRunnerDeps) {}

  /** One pass: the videos due now, each taken one step further; resolves once those steps are done. */
  async runOnce(): Promise<number> {
    if (this.stopping) return 0;
    const now = this.deps.clock.now();
    const claimed = await this.deps.jobs.claim(this.deps.owner, now, new Date(now.getTime() + this.deps.leaseMs), this.deps.concurrency);
    const { trace } = this.deps;
    const traced = (job: ClaimedVideo) =>
      trace ? trace('video step', { 'svc.video_id': job.videoId, 'svc.account_id': job.accountId }, () => this.run(job)) : this.run(job);
    await Promise.all(claimed.map((job) => this.track(traced(job))));
    return claimed.length;
  }

  /** Starts nothing more and waits for the steps under way. */
  async stop(): Promise<void> {
    this.stopping = true;
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }

  private track(step: Promise<void>): Promise<void> {
    this.running.add(step);
    return step.finally(() => this.running.delete(step));
  }

  private async run(job: ClaimedVideo): Promise<void> {
    const { deps } = this;
    try {
      let state = await deps.load(job.videoId);
      if (state.status === null) {
        // The gateway died between keeping the request and recording it (see REQUEST_GRACE_MS).
        await deps.release(job, 'video_not_recorded');
        await deps.jobs.reschedule(job.videoId, deps.owner, null);
        return;
      }
      if (!isVideoTerminal(state.status)) state = await this.step(job, state);
      // Also for a video deleted before its end was billed: deleting it does not make it free.
      if (isVideoTerminal(state.status)) await this.settle(job, state);
      if (state.deleted) await deps.jobs.remove(job.videoId);
      else await deps.jobs.reschedule(job.videoId, deps.owner, state.dueAt);
    } catch (err) {
      // The lease keeps it from the others until it runs out; then any worker tries again from the stream.
      deps.warn(`video ${job.videoId}: ${(err as Error).message}; tried again once its lease runs out`);
    }
  }

  /** The one thing the video's state asks for now. */
  private async step(job: ClaimedVideo, state: VideoState): Promise<VideoState> {
    const { videoId } = job;
    if (state.cancelRequested) {
      if (state.providerJobId !== null) await (await this.target(job, state)).cancelVideo(state.providerJobId);
      return this.deps.decide({ type: 'ConfirmCancel', videoId });
    }
    const request = await this.deps.jobs.request(videoId);
    if (request === null) {
      // The prompt no longer opens (SVC_ENCRYPTION_KEY changed): nothing can be sent, and nothing is billed.
      const error = { code: 'video_request_unavailable', message: 'The request of this video can no longer be read.' };
      return state.providerJobId === null
        ? this.deps.decide({ type: 'RecordSubmissionFailure', videoId, error, retryable: false })
        : this.deps.decide({ type: 'RecordFailure', videoId, error });
    }
    if (state.providerJobId === null) return this.submit(job, request);
    return this.poll(job, state, request);
  }

  /** Spec 4.2 rule 6 for a job: each provider in turn until one takes it; a refusal of the request ends the search. */
  private async submit(job: ClaimedVideo, request: VideoRequest): Promise<VideoState> {
    const { videoId } = job;
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
        return await this.deps.decide({
          type: 'RecordSubmission',
          videoId,
          provider: target.provider,
          providerJobId: submitted.id,
          pollAfterMs: submitted.pollAfterMs,
        });
      } catch (err) {
        if (!(err instanceof ProviderError)) throw err;
        last = { code: err.kind === 'http' ? `upstream_${err.status}` : `upstream_${err.kind}`, message: err.message };
        if (err.retryable) continue;
        return this.deps.decide({ type: 'RecordSubmissionFailure', videoId, error: last, retryable: false });
      }
    }
    return this.deps.decide({ type: 'RecordSubmissionFailure', videoId, error: last, retryable: true });
  }

  private async poll(job: ClaimedVideo, state: VideoState, request: VideoRequest): Promise<VideoState> {
    const { videoId } = job;
    const target = await this.target(job, state);
    let found: VideoJob;
    try {
      found = await target.getVideo(state.providerJobId!);
    } catch (err) {
      if (err instanceof ProviderError && err.kind === 'http' && err.status === 404) {
        return this.deps.decide({
          type: 'RecordFailure',
          videoId,
          error: { code: 'video_lost', message: `${target.provider} no longer knows this video's job.` },
        });
      }
      // A provider hiccup is not the video's end: the next poll asks again.
      this.deps.warn(`video ${videoId}: polling ${target.provider} failed (${(err as Error).message}); asking again later`);
      return { ...state, dueAt: new Date(this.deps.clock.now().getTime() + pollDelayMs(null)) };
    }
    switch (found.status) {
      case 'queued':
      case 'in_progress':
        return this.deps.decide({ type: 'RecordProgress', videoId, status: found.status, progress: found.progress, pollAfterMs: found.pollAfterMs });
      case 'failed':
        return this.deps.decide({
          type: 'RecordFailure',
          videoId,
          error: found.error ?? { code: 'video_generation_failed', message: `${target.provider} could not make the video.` },
        });
      case 'cancelled':
        return this.deps.decide({
          type: 'RecordFailure',
          videoId,
          error: { code: 'video_cancelled_by_provider', message: `${target.provider} cancelled the video.` },
        });
      case 'completed': {
        const files = await this.keep(job, target, state.providerJobId!);
        const listed = await this.deps.costOf(job, target.provider, request, found.costNano);
        // Never above what was held and shown as `usage.estimated_cost`: a provider charging more than its catalog price is the operator's loss, not the caller's surprise.
        const held = BigInt(job.reservation.heldNano);
        if (listed > held) this.deps.warn(`video ${videoId}: ${target.provider} reported ${listed} nano-USD, above the ${held} held; charged ${held}`);
        const costNano = listed > held ? held : listed;
        return this.deps.decide({ type: 'RecordCompletion', videoId, costNano, hasThumbnail: files.thumbnail !== null, providerCostNano: found.costNano });
      }
    }
  }

  /** The clip and its poster copied into the file store (once: a worker that died after it finds them there). */
  private async keep(job: ClaimedVideo, target: VideoTarget, providerJobId: string): Promise<VideoFiles> {
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
    if (!(await this.deps.jobs.keepFiles(job.videoId, this.deps.owner, files))) throw new Error('lost its lease while keeping the clip');
    return files;
  }

  private async settle(job: ClaimedVideo, state: VideoState): Promise<void> {
    if (state.status === 'completed') {
      await this.deps.charge(job, state);
    } else {
      await this.deps.release(job, state.status === 'cancelled' ? 'video_cancelled' : 'video_failed');
    }
  }

  private async target(job: ClaimedVideo, state: VideoState): Promise<VideoTarget> {
    const target = (await this.deps.targets(job)).find((t) => t.provider === state.provider);
    if (!target) throw new Error(`provider ${state.provider} of this video is no longer configured`);
    return target;
  }
}
