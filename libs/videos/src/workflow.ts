/**
 * What the workers do for one video (spec 3.1, 4.15), as a workflow on the job table
 * (ARCHITECTURE section 11): a pure decider over the video's stream and what is kept beside it
 * (the reservation, the request, the files). The job is `(video, <video id>)`, asked for by the
 * gateway when the video is requested, cancelled or deleted; the decider says each time what
 * comes next: submit, poll, cancel at the provider, keep the clip, bill the end, or wait.
 */
import type { Nano } from '@svc/platform';
import type { VideoJob } from '@svc/providers';
import { call, complete, schedule, send, type Due, type Workflow, type WorkflowOutput } from '@svc/jobs';
import { VIDEO_JOB_KIND, type ClaimedVideo } from './jobs';
import type { VideoRequest } from './request';
import { isVideoTerminal, pollDelayMs, videoDecider, type VideoCommand, type VideoError, type VideoEvent, type VideoState } from './video';

export interface VideoWorkflowState {
  video: VideoState;
  /** The ids and the hold kept beside the stream; null once the video is forgotten. */
  kept: ClaimedVideo | null;
  /** The request as validated; null when it no longer opens (the key changed) or was deleted. */
  request: VideoRequest | null;
}

export type VideoEffect =
  | { type: 'Submit' }
  | { type: 'Poll' }
  | { type: 'CancelAtProvider' }
  /** Copies the clip and its poster into the file store and prices the clip (at the provider's reported cost, when it gave one). */
  | { type: 'Keep'; providerCostNano: Nano | null }
  | { type: 'Charge' }
  | { type: 'Release'; errorCode: string }
  /** Removes what was kept beside the stream of a deleted video. */
  | { type: 'Forget' };

export type VideoInput =
  | { type: 'Submitted'; provider: string; providerJobId: string; pollAfterMs: number | null }
  | { type: 'SubmissionRefused'; error: VideoError; retryable: boolean }
  | { type: 'Polled'; provider: string; job: VideoJob }
  /** The provider no longer knows the job (404). */
  | { type: 'PollLost'; provider: string }
  /** A provider hiccup: not the video's end. */
  | { type: 'PollFailed' }
  | { type: 'CancelledAtProvider' }
  | { type: 'Kept'; listedNano: Nano; providerCostNano: Nano | null; hasThumbnail: boolean }
  | { type: 'Settled' }
  | { type: 'Forgotten' };

type Output = WorkflowOutput<VideoCommand, VideoEffect>;

/**
 * How long after a video was asked for a worker may find its stream still empty: the gateway
 * keeps the request, then decides RequestVideo, then makes it due (see CreateVideo, ./create-video).
 * Past this, a request without a stream is one whose gateway died in between: its hold is released.
 */
export const REQUEST_GRACE_MS = 60_000;

function onDue(state: VideoWorkflowState, now: Date): Output[] {
  const { video, kept, request } = state;
  if (kept === null) return [complete()];
  const videoId = kept.videoId;
  // The gateway died between keeping the request and recording it (see REQUEST_GRACE_MS).
  if (video.status === null) return [call({ type: 'Release', errorCode: 'video_not_recorded' })];
  // Also for a video deleted before its end was billed: deleting it does not make it free.
  if (isVideoTerminal(video.status)) {
    return [
      video.status === 'completed'
        ? call({ type: 'Charge' })
        : call({ type: 'Release', errorCode: video.status === 'cancelled' ? 'video_cancelled' : 'video_failed' }),
    ];
  }
  if (video.cancelRequested) return [video.providerJobId === null ? send({ type: 'ConfirmCancel', videoId }) : call({ type: 'CancelAtProvider' })];
  if (video.dueAt !== null && video.dueAt > now) return [schedule(video.dueAt)];
  if (request === null) {
    // The prompt no longer opens (SVC_ENCRYPTION_KEY changed): nothing can be sent, and nothing is billed.
    const error = { code: 'video_request_unavailable', message: 'The request of this video can no longer be read.' };
    return [
      send(video.providerJobId === null ? { type: 'RecordSubmissionFailure', videoId, error, retryable: false } : { type: 'RecordFailure', videoId, error }),
    ];
  }
  return [call(video.providerJobId === null ? { type: 'Submit' } : { type: 'Poll' })];
}

function onPolled(input: Extract<VideoInput, { type: 'Polled' }>, videoId: string): Output[] {
  const { job, provider } = input;
  switch (job.status) {
    case 'queued':
    case 'in_progress':
      return [send({ type: 'RecordProgress', videoId, status: job.status, progress: job.progress, pollAfterMs: job.pollAfterMs })];
    case 'failed':
      return [
        send({ type: 'RecordFailure', videoId, error: job.error ?? { code: 'video_generation_failed', message: `${provider} could not make the video.` } }),
      ];
    case 'cancelled':
      return [send({ type: 'RecordFailure', videoId, error: { code: 'video_cancelled_by_provider', message: `${provider} cancelled the video.` } })];
    case 'completed':
      return [call({ type: 'Keep', providerCostNano: job.costNano })];
  }
}

export const videoWorkflow: Workflow<VideoInput, VideoWorkflowState, VideoCommand, VideoEffect, VideoEvent> = {
  kind: VIDEO_JOB_KIND,
  decide(input: VideoInput | Due, state, now) {
    if (input.type === 'Due') return onDue(state, now);
    const videoId = state.kept?.videoId ?? '';
    switch (input.type) {
      case 'Submitted':
        return [send({ type: 'RecordSubmission', videoId, provider: input.provider, providerJobId: input.providerJobId, pollAfterMs: input.pollAfterMs })];
      case 'SubmissionRefused':
        return [send({ type: 'RecordSubmissionFailure', videoId, error: input.error, retryable: input.retryable })];
      case 'Polled':
        return onPolled(input, videoId);
      case 'PollLost':
        return [send({ type: 'RecordFailure', videoId, error: { code: 'video_lost', message: `${input.provider} no longer knows this video's job.` } })];
      case 'PollFailed':
        return [schedule(new Date(now.getTime() + pollDelayMs(null)))];
      case 'CancelledAtProvider':
        return [send({ type: 'ConfirmCancel', videoId })];
      case 'Kept': {
        // Never above what was held and shown as `usage.estimated_cost`: a provider charging more than its catalog price is the operator's loss, not the caller's surprise.
        const held = BigInt(state.kept?.reservation.heldNano ?? 0);
        const costNano = input.listedNano > held ? held : input.listedNano;
        return [send({ type: 'RecordCompletion', videoId, costNano, hasThumbnail: input.hasThumbnail, providerCostNano: input.providerCostNano })];
      }
      case 'Settled':
        return state.video.deleted ? [call({ type: 'Forget' })] : [complete()];
      case 'Forgotten':
        return [complete()];
    }
  },
  evolve(state, event) {
    return { ...state, video: videoDecider.evolve(state.video, event) };
  },
};
