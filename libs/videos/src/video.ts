/**
 * A video job (spec 2.4, 3.1, 4.15; OpenAI's video object, WIRE-FORMATS 2) as a workflow
 * (ARCHITECTURE section 11): a pure decider on the stream `video-<id>` whose events carry its
 * timers (`next_poll_at`, `retry_at`), so a worker restarted at any point finds what is due from
 * the stream alone. A worker submits the job to a provider, polls it, and reports back through
 * the commands below; the decider says what that means.
 *
 * The events carry ids, counts and costs, never content: the prompt, the first frame and the
 * clip are kept beside the video (sealed, purgeable as prompt logs are), because events are
 * immutable and kept for ever. The provider's MP4 and thumbnail URLs count as content too: a
 * signed URL hands the clip to whoever holds it, and it expires. So VideoCompleted says only
 * whether there is a thumbnail; the worker copies the files beside the video before it reports
 * completion, and the API's `url` is the gateway's own GET /videos/{id}/content.
 *
 * Billing follows the end (spec 1 rule 7): VideoCompleted charges `cost_nano`, the provider's
 * actual cost, against `hold_id`; VideoFailed and VideoCancelled release the hold. Each goes
 * through the metering pipeline under the hold's id, so a worker retrying never bills twice.
 */
import { DomainError, type Decider, type DomainEvent } from '@svc/eventstore';
import type { Nano } from '@svc/platform';

export const videoStream = (videoId: string) => `video-${videoId}`;

/**
 * Spec 2.4. `cancelled`: the caller asked to cancel before the video completed. A cancelled
 * video is free (its hold is released, nothing is charged) and has no content, even when the
 * provider had already finished the clip before the cancellation reached it: once asked,
 * cancellation wins over any later outcome, so the caller is never billed for a clip they
 * called off. Only queued and in-progress videos can be cancelled; the status changes once the
 * gateway has stopped the job at the provider, normally within seconds.
 */
export type VideoStatus = 'queued' | 'in_progress' | 'completed' | 'failed' | 'cancelled';

/** The `error` of the video object (spec 2.4). */
export interface VideoError {
  code: string;
  message: string;
}

/**
 * Provider poll-after hints (OpenAI's `openai-poll-after-ms`, WIRE-FORMATS 2) are honoured
 * within these bounds: a hint of 0 must not make a worker hammer the provider, and a huge one
 * must not strand a job. Without a hint, DEFAULT_POLL_MS: clips take minutes, not milliseconds.
 */
export const POLL_FLOOR_MS = 2_000;
export const POLL_CEILING_MS = 60_000;
export const DEFAULT_POLL_MS = 5_000;

/**
 * Submission retries: capped exponential backoff (5 s, 10 s, 20 s, 40 s, 60 s), then the video
 * fails after MAX_SUBMISSION_ATTEMPTS attempts, about two and a quarter minutes after it was
 * asked for. No jitter: the decider is pure, and claims are spread by the workers' leases.
 */
export const SUBMISSION_RETRY_BASE_MS = 5_000;
export const SUBMISSION_RETRY_CAP_MS = 60_000;
export const MAX_SUBMISSION_ATTEMPTS = 6;

/**
 * A video not finished this long after it was asked for fails (`video_timeout`) rather than
 * holding the caller's credit for ever behind a provider that never answers.
 */
export const VIDEO_DEADLINE_MS = 60 * 60_000;

/** The wait before the next poll, from the provider's hint in ms (null or nonsense: none). */
export function pollDelayMs(hintMs: number | null): number {
  if (hintMs === null || !Number.isFinite(hintMs)) return DEFAULT_POLL_MS;
  return Math.min(POLL_CEILING_MS, Math.max(POLL_FLOOR_MS, Math.round(hintMs)));
}

/** The wait after failed submission attempt `attempt` (1-based). */
export function submissionRetryDelayMs(attempt: number): number {
  return Math.min(SUBMISSION_RETRY_CAP_MS, SUBMISSION_RETRY_BASE_MS * 2 ** (attempt - 1));
}

export type VideoEvent =
  | DomainEvent<
      'VideoRequested',
      {
        video_id: string;
        account_id: string;
        workspace_id: string;
        key_id: string;
        /** The catalog model's id. */
        model: string;
        seconds: number;
        /** Null when the model offers no choice (the provider's own). */
        aspect_ratio: string | null;
        resolution: string | null;
        size: string | null;
        hold_id: string;
        /** Nano-USD, decimal string (JSON has no integers past 2^53): the hold, and `usage.estimated_cost`. */
        estimated_nano: string;
        created_at: string;
        /** The timer: submit at once. */
        next_poll_at: string;
      }
    >
  | DomainEvent<'VideoSubmitted', { video_id: string; provider: string; provider_job_id: string; next_poll_at: string }>
  | DomainEvent<'VideoSubmissionFailed', { video_id: string; attempt: number; error: VideoError; retry_at: string }>
  | DomainEvent<'VideoProgressed', { video_id: string; status: 'queued' | 'in_progress'; progress: number; next_poll_at: string }>
  /** The end events name the account and model: the webhook outbox (spec 6.1) maps each event alone. */
  | DomainEvent<
      'VideoCompleted',
      {
        video_id: string;
        account_id: string;
        model: string;
        cost_nano: string;
        has_thumbnail: boolean;
        completed_at: string;
        /**
         * Issue 41 item 15: the cost a router reported (nano-USD), which the charge was priced at
         * instead of the seconds, so the charge can be explained line by line. Absent when the
         * provider reported none, and on events written before it was kept.
         */
        provider_cost_nano?: string;
      }
    >
  | DomainEvent<'VideoFailed', { video_id: string; account_id: string; model: string; error: VideoError; failed_at: string }>
  /** The timer is set to now: the worker stops the job at the provider at once. */
  | DomainEvent<'VideoCancelRequested', { video_id: string; requested_at: string; next_poll_at: string }>
  | DomainEvent<'VideoCancelled', { video_id: string; cancelled_at: string }>
  /** Spec 4.15 DELETE of an ended video: its clip is purged and the video is gone from the API. */
  | DomainEvent<'VideoDeleted', { video_id: string; deleted_at: string }>;

export type VideoCommand =
  | {
      type: 'RequestVideo';
      videoId: string;
      accountId: string;
      workspaceId: string;
      keyId: string;
      model: string;
      seconds: number;
      aspectRatio: string | null;
      resolution: string | null;
      size: string | null;
      holdId: string;
      estimatedNano: Nano;
    }
  /** The provider accepted the job; `pollAfterMs` is its hint, if it gave one. */
  | { type: 'RecordSubmission'; videoId: string; provider: string; providerJobId: string; pollAfterMs: number | null }
  /** The provider did not take the job; `retryable` false for an answer that will not change (a 400). */
  | { type: 'RecordSubmissionFailure'; videoId: string; error: VideoError; retryable: boolean }
  /** A poll found the job still running; `progress` is the provider's percentage. */
  | { type: 'RecordProgress'; videoId: string; status: 'queued' | 'in_progress'; progress: number; pollAfterMs: number | null }
  /** The clip and its thumbnail are stored beside the video; `costNano` is what the provider charged. */
  | { type: 'RecordCompletion'; videoId: string; costNano: Nano; hasThumbnail: boolean; providerCostNano?: Nano | null }
  | { type: 'RecordFailure'; videoId: string; error: VideoError }
  | { type: 'RequestCancel'; videoId: string }
  /** The job is stopped at the provider, or never reached it. */
  | { type: 'ConfirmCancel'; videoId: string }
  | { type: 'DeleteVideo'; videoId: string };

export interface VideoState {
  status: VideoStatus | null;
  cancelRequested: boolean;
  deleted: boolean;
  createdAt: Date | null;
  accountId: string | null;
  model: string | null;
  /** The clip's length: what a completed video's charge records. */
  seconds: number;
  holdId: string | null;
  /** What VideoCompleted charged; null until then. */
  costNano: bigint | null;
  /** The cost the provider reported, when it did (VideoCompleted's `provider_cost_nano`). */
  providerCostNano?: bigint | null;
  provider: string | null;
  providerJobId: string | null;
  /** Failed submission attempts so far. */
  attempts: number;
  progress: number;
  /** When a worker should act next (submit, retry, poll, cancel); null once the video has ended. */
  dueAt: Date | null;
}

const TERMINAL: readonly VideoStatus[] = ['completed', 'failed', 'cancelled'];
export const isVideoTerminal = (status: VideoStatus | null) => status !== null && TERMINAL.includes(status);

function requireRunning(state: VideoState, videoId: string, action: string): VideoStatus {
  if (state.status === null || state.deleted) throw new DomainError('video_not_found', `No video ${videoId}.`);
  if (isVideoTerminal(state.status))
    throw new DomainError('video_invalid_state', `Video ${videoId} is ${state.status}: it cannot ${action}.`, { status: state.status });
  return state.status;
}

function requireSubmitted(state: VideoState, videoId: string, action: string): void {
  requireRunning(state, videoId, action);
  if (state.providerJobId === null) throw new DomainError('video_not_submitted', `Video ${videoId} has no provider job yet: it cannot ${action}.`);
}

const deadlineOf = (state: VideoState) => new Date((state.createdAt?.getTime() ?? 0) + VIDEO_DEADLINE_MS);

/** The next poll: at once when a cancel waits, else after the hint, never past the deadline. */
function nextPoll(state: VideoState, now: Date, hintMs: number | null): string {
  if (state.cancelRequested) return now.toISOString();
  return new Date(Math.min(now.getTime() + pollDelayMs(hintMs), deadlineOf(state).getTime())).toISOString();
}

const cancelled = (videoId: string, now: Date): VideoEvent => ({ type: 'VideoCancelled', data: { video_id: videoId, cancelled_at: now.toISOString() } });

const failedWith = (state: VideoState, videoId: string, error: VideoError, now: Date): VideoEvent => ({
  type: 'VideoFailed',
  data: { video_id: videoId, account_id: state.accountId!, model: state.model!, error, failed_at: now.toISOString() },
});

function request(command: Extract<VideoCommand, { type: 'RequestVideo' }>, state: VideoState, now: Date): VideoEvent[] {
  if (state.status !== null) throw new DomainError('video_exists', `Video ${command.videoId} exists already.`);
  if (!Number.isInteger(command.seconds) || command.seconds <= 0)
    throw new DomainError('invalid_video_seconds', `A clip lasts a positive whole number of seconds, not ${command.seconds}.`);
  if (command.estimatedNano < 0n) throw new DomainError('invalid_video_cost', 'The estimate cannot be negative.');
  const at = now.toISOString();
  return [
    {
      type: 'VideoRequested',
      data: {
        video_id: command.videoId,
        account_id: command.accountId,
        workspace_id: command.workspaceId,
        key_id: command.keyId,
        model: command.model,
        seconds: command.seconds,
        aspect_ratio: command.aspectRatio,
        resolution: command.resolution,
        size: command.size,
        hold_id: command.holdId,
        estimated_nano: command.estimatedNano.toString(),
        created_at: at,
        next_poll_at: at,
      },
    },
  ];
}

function recordSubmission(command: Extract<VideoCommand, { type: 'RecordSubmission' }>, state: VideoState, now: Date): VideoEvent[] {
  requireRunning(state, command.videoId, 'be submitted');
  if (state.providerJobId !== null) {
    // A worker that crashed after recording reports the same job again: it is recorded already.
    if (state.provider === command.provider && state.providerJobId === command.providerJobId) return [];
    throw new DomainError('video_already_submitted', `Video ${command.videoId} runs as ${state.provider} job ${state.providerJobId} already.`);
  }
  // Recorded even when a cancel waits: the job exists at the provider and must be stopped there.
  return [
    {
      type: 'VideoSubmitted',
      data: {
        video_id: command.videoId,
        provider: command.provider,
        provider_job_id: command.providerJobId,
        next_poll_at: nextPoll(state, now, command.pollAfterMs),
      },
    },
  ];
}

function recordSubmissionFailure(command: Extract<VideoCommand, { type: 'RecordSubmissionFailure' }>, state: VideoState, now: Date): VideoEvent[] {
  requireRunning(state, command.videoId, 'fail to be submitted');
  if (state.providerJobId !== null)
    throw new DomainError('video_already_submitted', `Video ${command.videoId} runs as ${state.provider} job ${state.providerJobId} already.`);
  // Nothing reached the provider: a waiting cancel ends the video here.
  if (state.cancelRequested) return [cancelled(command.videoId, now)];
  const attempt = state.attempts + 1;
  if (!command.retryable || attempt >= MAX_SUBMISSION_ATTEMPTS) {
    return [failedWith(state, command.videoId, command.error, now)];
  }
  const retryAt = new Date(now.getTime() + submissionRetryDelayMs(attempt)).toISOString();
  return [{ type: 'VideoSubmissionFailed', data: { video_id: command.videoId, attempt, error: command.error, retry_at: retryAt } }];
}

function recordProgress(command: Extract<VideoCommand, { type: 'RecordProgress' }>, state: VideoState, now: Date): VideoEvent[] {
  requireSubmitted(state, command.videoId, 'progress');
  if (now >= deadlineOf(state)) {
    if (state.cancelRequested) return [cancelled(command.videoId, now)];
    const error = { code: 'video_timeout', message: `The video did not finish within ${VIDEO_DEADLINE_MS / 60_000} minutes.` };
    return [failedWith(state, command.videoId, error, now)];
  }
  // What a client sees never moves back: a provider's own queue may report a lower figure or
  // `queued` again after a retry on its side.
  const reported = Number.isFinite(command.progress) ? Math.min(100, Math.max(0, Math.round(command.progress))) : state.progress;
  const progress = Math.max(state.progress, reported);
  const status = state.status === 'in_progress' ? 'in_progress' : command.status;
  return [{ type: 'VideoProgressed', data: { video_id: command.videoId, status, progress, next_poll_at: nextPoll(state, now, command.pollAfterMs) } }];
}

function recordCompletion(command: Extract<VideoCommand, { type: 'RecordCompletion' }>, state: VideoState, now: Date): VideoEvent[] {
  requireSubmitted(state, command.videoId, 'complete');
  if (command.costNano < 0n) throw new DomainError('invalid_video_cost', 'A provider cost cannot be negative.');
  // Asked to cancel first: the clip is neither delivered nor billed (see VideoStatus).
  if (state.cancelRequested) return [cancelled(command.videoId, now)];
  return [
    {
      type: 'VideoCompleted',
      data: {
        video_id: command.videoId,
        account_id: state.accountId!,
        model: state.model!,
        cost_nano: command.costNano.toString(),
        has_thumbnail: command.hasThumbnail,
        completed_at: now.toISOString(),
        ...(command.providerCostNano === undefined || command.providerCostNano === null ? {} : { provider_cost_nano: command.providerCostNano.toString() }),
      },
    },
  ];
}

function recordFailure(command: Extract<VideoCommand, { type: 'RecordFailure' }>, state: VideoState, now: Date): VideoEvent[] {
  requireRunning(state, command.videoId, 'fail');
  // Free either way (spec 1 rule 7); the caller hears what they asked for, not a video.failed.
  if (state.cancelRequested) return [cancelled(command.videoId, now)];
  return [failedWith(state, command.videoId, command.error, now)];
}

function requestCancel(command: Extract<VideoCommand, { type: 'RequestCancel' }>, state: VideoState, now: Date): VideoEvent[] {
  if (state.status === null || state.deleted) throw new DomainError('video_not_found', `No video ${command.videoId}.`);
  // Asking twice is answered with the video as it is.
  if (state.status === 'cancelled' || state.cancelRequested) return [];
  requireRunning(state, command.videoId, 'be cancelled');
  // Not cancelled here even before submission: a worker may be submitting it right now, and
  // only the worker holding the job's lease can know the job is stopped.
  const at = now.toISOString();
  return [{ type: 'VideoCancelRequested', data: { video_id: command.videoId, requested_at: at, next_poll_at: at } }];
}

function confirmCancel(command: Extract<VideoCommand, { type: 'ConfirmCancel' }>, state: VideoState, now: Date): VideoEvent[] {
  if (state.status === 'cancelled') return [];
  requireRunning(state, command.videoId, 'be cancelled');
  if (!state.cancelRequested) throw new DomainError('video_cancel_not_requested', `Nobody asked to cancel video ${command.videoId}.`);
  return [cancelled(command.videoId, now)];
}

function deleteVideo(command: Extract<VideoCommand, { type: 'DeleteVideo' }>, state: VideoState, now: Date): VideoEvent[] {
  if (state.status === null || state.deleted) throw new DomainError('video_not_found', `No video ${command.videoId}.`);
  // A running video is cancelled first (RequestCancel); only an ended one has nothing left to stop or bill.
  if (!isVideoTerminal(state.status))
    throw new DomainError('video_invalid_state', `Video ${command.videoId} is ${state.status}: cancel it before deleting it.`, { status: state.status });
  return [{ type: 'VideoDeleted', data: { video_id: command.videoId, deleted_at: now.toISOString() } }];
}

export const videoDecider: Decider<VideoCommand, VideoState, VideoEvent> = {
  initialState: () => ({
    status: null,
    cancelRequested: false,
    deleted: false,
    createdAt: null,
    accountId: null,
    model: null,
    seconds: 0,
    holdId: null,
    costNano: null,
    provider: null,
    providerJobId: null,
    attempts: 0,
    progress: 0,
    dueAt: null,
  }),
  decide(command, state, now) {
    switch (command.type) {
      case 'RequestVideo':
        return request(command, state, now);
      case 'RecordSubmission':
        return recordSubmission(command, state, now);
      case 'RecordSubmissionFailure':
        return recordSubmissionFailure(command, state, now);
      case 'RecordProgress':
        return recordProgress(command, state, now);
      case 'RecordCompletion':
        return recordCompletion(command, state, now);
      case 'RecordFailure':
        return recordFailure(command, state, now);
      case 'RequestCancel':
        return requestCancel(command, state, now);
      case 'ConfirmCancel':
        return confirmCancel(command, state, now);
      case 'DeleteVideo':
        return deleteVideo(command, state, now);
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'VideoRequested':
        return {
          ...state,
          status: 'queued',
          createdAt: new Date(event.data.created_at),
          accountId: event.data.account_id,
          model: event.data.model,
          seconds: event.data.seconds,
          holdId: event.data.hold_id,
          dueAt: new Date(event.data.next_poll_at),
        };
      case 'VideoSubmitted':
        return { ...state, provider: event.data.provider, providerJobId: event.data.provider_job_id, dueAt: new Date(event.data.next_poll_at) };
      case 'VideoSubmissionFailed':
        return { ...state, attempts: event.data.attempt, dueAt: new Date(event.data.retry_at) };
      case 'VideoProgressed':
        return { ...state, status: event.data.status, progress: event.data.progress, dueAt: new Date(event.data.next_poll_at) };
      case 'VideoCompleted':
        return {
          ...state,
          status: 'completed',
          progress: 100,
          costNano: BigInt(event.data.cost_nano),
          providerCostNano: event.data.provider_cost_nano === undefined ? null : BigInt(event.data.provider_cost_nano),
          dueAt: null,
        };
      case 'VideoFailed':
        return { ...state, status: 'failed', dueAt: null };
      case 'VideoCancelRequested':
        return { ...state, cancelRequested: true, dueAt: new Date(event.data.next_poll_at) };
      case 'VideoCancelled':
        return { ...state, status: 'cancelled', dueAt: null };
      case 'VideoDeleted':
        return { ...state, deleted: true };
    }
  },
};
