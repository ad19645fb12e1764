import { fold } from '@svc/eventstore';
import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import { MAX_SUBMISSION_ATTEMPTS, pollDelayMs, submissionRetryDelayMs, VIDEO_DEADLINE_MS, videoDecider, videoStream, type VideoEvent } from './video';

const NOW = new Date('2026-11-25T10:00:00Z');
const at = (ms: number) => new Date(NOW.getTime() + ms).toISOString();
const spec = deciderSpec(videoDecider, () => NOW);
/** The same decider `ms` after NOW. */
const after = (ms: number) => deciderSpec(videoDecider, () => new Date(NOW.getTime() + ms));

const video_id = 'video_1';
const ids = { videoId: video_id };
const request = {
  type: 'RequestVideo' as const,
  ...ids,
  accountId: 'a1',
  workspaceId: 'w1',
  keyId: 'k1',
  model: 'sim/video',
  seconds: 8,
  aspectRatio: '16:9',
  resolution: '720p',
  size: null,
  holdId: 'gen_1',
  estimatedNano: 800_000_000n,
};
const requested: VideoEvent = {
  type: 'VideoRequested',
  data: {
    video_id,
    account_id: 'a1',
    workspace_id: 'w1',
    key_id: 'k1',
    model: 'sim/video',
    seconds: 8,
    aspect_ratio: '16:9',
    resolution: '720p',
    size: null,
    hold_id: 'gen_1',
    estimated_nano: '800000000',
    created_at: at(0),
    next_poll_at: at(0),
  },
};
const submit = { type: 'RecordSubmission' as const, ...ids, provider: 'sim', providerJobId: 'job_1', pollAfterMs: null };
const submitted: VideoEvent = { type: 'VideoSubmitted', data: { video_id, provider: 'sim', provider_job_id: 'job_1', next_poll_at: at(5_000) } };
const progressed = (progress: number, status: 'queued' | 'in_progress' = 'in_progress'): VideoEvent => ({
  type: 'VideoProgressed',
  data: { video_id, status, progress, next_poll_at: at(5_000) },
});
const poll = (progress: number, status: 'queued' | 'in_progress' = 'in_progress', pollAfterMs: number | null = null) => ({
  type: 'RecordProgress' as const,
  ...ids,
  status,
  progress,
  pollAfterMs,
});
const error = { code: 'provider_error', message: 'upstream 503' };
const submitFailure = (retryable = true) => ({ type: 'RecordSubmissionFailure' as const, ...ids, error, retryable });
const submissionFailed = (attempt: number): VideoEvent => ({ type: 'VideoSubmissionFailed', data: { video_id, attempt, error, retry_at: at(0) } });
const complete = { type: 'RecordCompletion' as const, ...ids, costNano: 750_000_000n, hasThumbnail: true };
const completed: VideoEvent = {
  type: 'VideoCompleted',
  data: { video_id, account_id: 'a1', model: 'sim/video', cost_nano: '750000000', has_thumbnail: true, completed_at: at(0) },
};
const fail = { type: 'RecordFailure' as const, ...ids, error: { code: 'content_policy', message: 'The prompt was refused.' } };
const failed: VideoEvent = {
  type: 'VideoFailed',
  data: { video_id, account_id: 'a1', model: 'sim/video', error: { code: 'content_policy', message: 'The prompt was refused.' }, failed_at: at(0) },
};
const cancelRequested: VideoEvent = { type: 'VideoCancelRequested', data: { video_id, requested_at: at(0), next_poll_at: at(0) } };
const cancelled: VideoEvent = { type: 'VideoCancelled', data: { video_id, cancelled_at: at(0) } };
const cancel = { type: 'RequestCancel' as const, ...ids };
const confirm = { type: 'ConfirmCancel' as const, ...ids };

describe('video workflow (spec 2.4, 3.1, 4.15; ARCHITECTURE 11)', () => {
  it('lives on the stream video-<id>', () => {
    expect(videoStream('video_abc')).toBe('video-video_abc');
  });

  it('is requested once, queued, due for submission at once, with ids and the estimate only', () => {
    spec.given([]).when(request).then([requested]);
    spec.given([requested]).when(request).thenThrows('video_exists');
    spec
      .given([])
      .when({ ...request, seconds: 0 })
      .thenThrows('invalid_video_seconds');
    spec
      .given([])
      .when({ ...request, seconds: 4.5 })
      .thenThrows('invalid_video_seconds');
    spec
      .given([])
      .when({ ...request, estimatedNano: -1n })
      .thenThrows('invalid_video_cost');
    // A model without choices records none.
    spec
      .given([])
      .when({ ...request, aspectRatio: null, resolution: null, size: '1280x720' })
      .then([{ ...requested, data: { ...(requested.data as object), aspect_ratio: null, resolution: null, size: '1280x720' } } as VideoEvent]);
  });

  it('records the provider job with the next poll after the provider hint, between a 2 s floor and a 60 s ceiling', () => {
    spec.given([requested]).when(submit).then([submitted]);
    const nextPoll = (pollAfterMs: number) => ({
      type: 'VideoSubmitted',
      data: { video_id, provider: 'sim', provider_job_id: 'job_1', next_poll_at: at(pollAfterMs) },
    });
    spec
      .given([requested])
      .when({ ...submit, pollAfterMs: 7_000 })
      .then([nextPoll(7_000) as VideoEvent]);
    spec
      .given([requested])
      .when({ ...submit, pollAfterMs: 0 })
      .then([nextPoll(2_000) as VideoEvent]);
    spec
      .given([requested])
      .when({ ...submit, pollAfterMs: 3_600_000 })
      .then([nextPoll(60_000) as VideoEvent]);
    spec
      .given([requested])
      .when({ ...submit, pollAfterMs: Number.NaN })
      .then([nextPoll(5_000) as VideoEvent]);
    expect([null, -5, 0, 1_999, 2_000, 12_345.4, 60_001, Infinity].map(pollDelayMs)).toEqual([5_000, 2_000, 2_000, 2_000, 2_000, 12_345, 60_000, 5_000]);
  });

  it('never sets a poll past the deadline, an hour after the request', () => {
    after(VIDEO_DEADLINE_MS - 1_000)
      .given([requested])
      .when(submit)
      .then([{ ...submitted, data: { ...(submitted.data as object), next_poll_at: at(VIDEO_DEADLINE_MS) } } as VideoEvent]);
  });

  it('takes the same job reported twice as recorded, and refuses a second job', () => {
    spec.given([requested, submitted]).when(submit).then([]);
    spec
      .given([requested, submitted])
      .when({ ...submit, providerJobId: 'job_2' })
      .thenThrows('video_already_submitted');
    spec
      .given([requested, submitted])
      .when({ ...submit, provider: 'other' })
      .thenThrows('video_already_submitted');
    spec.given([]).when(submit).thenThrows('video_not_found');
    spec.given([requested, failed]).when(submit).thenThrows('video_invalid_state');
  });

  it('retries a failed submission with capped exponential backoff, then fails after the last attempt', () => {
    expect([1, 2, 3, 4, 5, 6].map(submissionRetryDelayMs)).toEqual([5_000, 10_000, 20_000, 40_000, 60_000, 60_000]);
    spec
      .given([requested])
      .when(submitFailure())
      .then([{ type: 'VideoSubmissionFailed', data: { video_id, attempt: 1, error, retry_at: at(5_000) } }]);
    spec
      .given([requested, submissionFailed(1)])
      .when(submitFailure())
      .then([{ type: 'VideoSubmissionFailed', data: { video_id, attempt: 2, error, retry_at: at(10_000) } }]);
    const four = [1, 2, 3, 4].map(submissionFailed);
    spec
      .given([requested, ...four])
      .when(submitFailure())
      .then([{ type: 'VideoSubmissionFailed', data: { video_id, attempt: 5, error, retry_at: at(60_000) } }]);
    expect(MAX_SUBMISSION_ATTEMPTS).toBe(6);
    const five = [1, 2, 3, 4, 5].map(submissionFailed);
    spec
      .given([requested, ...five])
      .when(submitFailure())
      .then([{ type: 'VideoFailed', data: { video_id, account_id: 'a1', model: 'sim/video', error, failed_at: at(0) } }]);
  });

  it('fails at once on a submission error that will not change, and a retry can still succeed', () => {
    spec
      .given([requested])
      .when(submitFailure(false))
      .then([{ type: 'VideoFailed', data: { video_id, account_id: 'a1', model: 'sim/video', error, failed_at: at(0) } }]);
    spec
      .given([requested, submissionFailed(1), submissionFailed(2)])
      .when(submit)
      .then([submitted]);
    spec.given([requested, submitted]).when(submitFailure()).thenThrows('video_already_submitted');
    spec.given([]).when(submitFailure()).thenThrows('video_not_found');
    spec.given([requested, cancelRequested, cancelled]).when(submitFailure()).thenThrows('video_invalid_state');
  });

  it('records progress at each poll: in_progress once the provider says so, never backwards, 0 to 100', () => {
    spec
      .given([requested, submitted])
      .when(poll(0, 'queued'))
      .then([progressed(0, 'queued')]);
    spec
      .given([requested, submitted])
      .when(poll(42))
      .then([progressed(42)]);
    spec
      .given([requested, submitted, progressed(42)])
      .when(poll(30))
      .then([progressed(42)]);
    spec
      .given([requested, submitted, progressed(42)])
      .when(poll(50, 'queued'))
      .then([progressed(50)]);
    spec
      .given([requested, submitted])
      .when(poll(130))
      .then([progressed(100)]);
    spec
      .given([requested, submitted])
      .when(poll(-5, 'queued'))
      .then([progressed(0, 'queued')]);
    spec
      .given([requested, submitted])
      .when(poll(33.6))
      .then([progressed(34)]);
    spec
      .given([requested, submitted, progressed(42)])
      .when(poll(Number.NaN))
      .then([progressed(42)]);
    spec
      .given([requested, submitted])
      .when(poll(10, 'in_progress', 20_000))
      .then([{ type: 'VideoProgressed', data: { video_id, status: 'in_progress', progress: 10, next_poll_at: at(20_000) } }]);
  });

  it('polls only a submitted, running video', () => {
    spec.given([requested]).when(poll(10)).thenThrows('video_not_submitted');
    spec
      .given([requested, submissionFailed(1)])
      .when(poll(10))
      .thenThrows('video_not_submitted');
    spec.given([]).when(poll(10)).thenThrows('video_not_found');
    spec.given([requested, submitted, completed]).when(poll(10)).thenThrows('video_invalid_state');
  });

  it('fails a video still running at its deadline (free), or cancels it when a cancel waits', () => {
    const late = after(VIDEO_DEADLINE_MS);
    late
      .given([requested, submitted])
      .when(poll(90))
      .then([
        {
          type: 'VideoFailed',
          data: {
            video_id,
            account_id: 'a1',
            model: 'sim/video',
            error: { code: 'video_timeout', message: 'The video did not finish within 60 minutes.' },
            failed_at: at(VIDEO_DEADLINE_MS),
          },
        },
      ]);
    late
      .given([requested, submitted, cancelRequested])
      .when(poll(90))
      .then([{ type: 'VideoCancelled', data: { video_id, cancelled_at: at(VIDEO_DEADLINE_MS) } }]);
    // One poll earlier it is still running, and the next poll is the deadline itself.
    after(VIDEO_DEADLINE_MS - 1_000)
      .given([requested, submitted])
      .when(poll(90))
      .then([{ type: 'VideoProgressed', data: { video_id, status: 'in_progress', progress: 90, next_poll_at: at(VIDEO_DEADLINE_MS) } }]);
    // A clip found finished at the deadline poll is delivered and billed.
    late
      .given([requested, submitted])
      .when(complete)
      .then([{ ...completed, data: { ...(completed.data as object), completed_at: at(VIDEO_DEADLINE_MS) } } as VideoEvent]);
  });

  it("completes with the provider's actual cost (spec 1 rule 7), from queued or in progress", () => {
    spec.given([requested, submitted]).when(complete).then([completed]);
    spec
      .given([requested, submitted, progressed(80)])
      .when(complete)
      .then([completed]);
    spec
      .given([requested, submitted])
      .when({ ...complete, costNano: 0n, hasThumbnail: false })
      .then([{ type: 'VideoCompleted', data: { video_id, account_id: 'a1', model: 'sim/video', cost_nano: '0', has_thumbnail: false, completed_at: at(0) } }]);
    spec
      .given([requested, submitted])
      .when({ ...complete, costNano: -1n })
      .thenThrows('invalid_video_cost');
    spec.given([requested]).when(complete).thenThrows('video_not_submitted');
    spec.given([]).when(complete).thenThrows('video_not_found');
    spec.given([requested, submitted, completed]).when(complete).thenThrows('video_invalid_state');
    spec.given([requested, submitted, failed]).when(complete).thenThrows('video_invalid_state');
  });

  it('fails (free) whether or not the provider had the job', () => {
    spec.given([requested]).when(fail).then([failed]);
    spec
      .given([requested, submitted, progressed(40)])
      .when(fail)
      .then([failed]);
    spec.given([]).when(fail).thenThrows('video_not_found');
    spec.given([requested, submitted, completed]).when(fail).thenThrows('video_invalid_state');
    spec.given([requested, failed]).when(fail).thenThrows('video_invalid_state');
  });

  it('asks to cancel a queued or running video, due at once for the worker; asking again changes nothing', () => {
    spec.given([requested]).when(cancel).then([cancelRequested]);
    spec
      .given([requested, submitted, progressed(40)])
      .when(cancel)
      .then([cancelRequested]);
    spec.given([requested, cancelRequested]).when(cancel).then([]);
    spec.given([requested, cancelRequested, cancelled]).when(cancel).then([]);
    spec.given([]).when(cancel).thenThrows('video_not_found');
    spec.given([requested, submitted, completed]).when(cancel).thenThrows('video_invalid_state');
    spec.given([requested, failed]).when(cancel).thenThrows('video_invalid_state');
  });

  it('is cancelled once the worker confirms the job is stopped; confirming twice changes nothing', () => {
    spec.given([requested, cancelRequested]).when(confirm).then([cancelled]);
    spec.given([requested, submitted, cancelRequested]).when(confirm).then([cancelled]);
    spec.given([requested, cancelRequested, cancelled]).when(confirm).then([]);
    spec.given([requested, submitted]).when(confirm).thenThrows('video_cancel_not_requested');
    spec.given([]).when(confirm).thenThrows('video_not_found');
    spec.given([requested, submitted, completed]).when(confirm).thenThrows('video_invalid_state');
  });

  it('once cancel is asked, every later outcome ends cancelled: free and without content', () => {
    const waiting = [requested, submitted, cancelRequested];
    spec.given(waiting).when(complete).then([cancelled]);
    spec.given(waiting).when(fail).then([cancelled]);
    spec.given([requested, cancelRequested]).when(fail).then([cancelled]);
    spec.given([requested, cancelRequested]).when(submitFailure()).then([cancelled]);
    // A job that reached the provider meanwhile is recorded, due at once, to be stopped there.
    spec
      .given([requested, cancelRequested])
      .when(submit)
      .then([{ ...submitted, data: { ...(submitted.data as object), next_poll_at: at(0) } } as VideoEvent]);
    spec
      .given(waiting)
      .when(poll(60))
      .then([{ type: 'VideoProgressed', data: { video_id, status: 'in_progress', progress: 60, next_poll_at: at(0) } }]);
  });

  it('keeps its timer in its events, so a restarted worker finds what is due; none once ended', () => {
    expect(fold(videoDecider, [requested])).toMatchObject({ status: 'queued', dueAt: new Date(at(0)), holdId: 'gen_1', createdAt: NOW, attempts: 0 });
    expect(fold(videoDecider, [requested, submissionFailed(1)])).toMatchObject({ status: 'queued', attempts: 1, dueAt: new Date(at(0)), providerJobId: null });
    expect(fold(videoDecider, [requested, submitted])).toMatchObject({ status: 'queued', provider: 'sim', providerJobId: 'job_1', dueAt: new Date(at(5_000)) });
    expect(fold(videoDecider, [requested, submitted, progressed(40)])).toMatchObject({ status: 'in_progress', progress: 40, dueAt: new Date(at(5_000)) });
    expect(fold(videoDecider, [requested, submitted, progressed(40), cancelRequested])).toMatchObject({
      status: 'in_progress',
      cancelRequested: true,
      dueAt: new Date(at(0)),
    });
    expect(fold(videoDecider, [requested, submitted, completed])).toMatchObject({ status: 'completed', progress: 100, costNano: 750_000_000n, dueAt: null });
    expect(fold(videoDecider, [requested, failed])).toMatchObject({ status: 'failed', dueAt: null });
    expect(fold(videoDecider, [requested, cancelRequested, cancelled])).toMatchObject({ status: 'cancelled', dueAt: null });
  });

  it('is deleted only once it has ended (spec 4.15 DELETE); a deleted video is gone for every command', () => {
    const deleted: VideoEvent = { type: 'VideoDeleted', data: { video_id, deleted_at: at(0) } };
    const del = { type: 'DeleteVideo' as const, ...ids };
    spec.given([requested, submitted, completed]).when(del).then([deleted]);
    spec.given([requested, failed]).when(del).then([deleted]);
    spec.given([requested, cancelRequested, cancelled]).when(del).then([deleted]);
    spec.given([requested, submitted]).when(del).thenThrows('video_invalid_state');
    spec.given([]).when(del).thenThrows('video_not_found');
    spec.given([requested, failed, deleted]).when(del).thenThrows('video_not_found');
    spec.given([requested, failed, deleted]).when(cancel).thenThrows('video_not_found');
    spec.given([requested, failed, deleted]).when(fail).thenThrows('video_not_found');
    expect(fold(videoDecider, [requested, failed, deleted])).toMatchObject({ status: 'failed', deleted: true });
  });
});
