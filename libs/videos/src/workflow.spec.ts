import { fold } from '@svc/eventstore';
import { call, complete, schedule, send } from '@svc/jobs';
import { workflowSpec } from '@svc/jobs/testing/workflow-spec';
import type { ClaimedVideo } from './jobs';
import type { VideoRequest } from './request';
import { pollDelayMs, videoDecider, type VideoEvent } from './video';
import { videoWorkflow, type VideoWorkflowState } from './workflow';

const NOW = new Date('2026-11-25T10:00:00Z');
const at = (ms: number) => new Date(NOW.getTime() + ms).toISOString();
const spec = workflowSpec(videoWorkflow, () => NOW);
const videoId = 'video_1';

const kept = {
  videoId,
  accountId: 'a1',
  workspaceId: 'w1',
  keyId: 'k1',
  reservation: { id: 'gen_1', heldNano: '800000000' },
} as unknown as ClaimedVideo;
const request = { prompt: 'a kite' } as VideoRequest;

const requested: VideoEvent = {
  type: 'VideoRequested',
  data: {
    video_id: videoId,
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
    created_at: at(-10_000),
    next_poll_at: at(-10_000),
  },
};
const submitted = (nextPoll: number): VideoEvent => ({
  type: 'VideoSubmitted',
  data: { video_id: videoId, provider: 'sim', provider_job_id: 'job_1', next_poll_at: at(nextPoll) },
});
const completed: VideoEvent = {
  type: 'VideoCompleted',
  data: { video_id: videoId, account_id: 'a1', model: 'sim/video', cost_nano: '500000000', has_thumbnail: true, completed_at: at(-1) },
};
const cancelAsked: VideoEvent = { type: 'VideoCancelRequested', data: { video_id: videoId, requested_at: at(-1), next_poll_at: at(-1) } };

const state = (events: VideoEvent[], over: Partial<VideoWorkflowState> = {}): VideoWorkflowState => ({
  video: fold(videoDecider, events),
  kept,
  request,
  ...over,
});

describe('the video workflow (spec 3.1, 4.15)', () => {
  it('a requested video is submitted; the provider taking it is recorded', () => {
    spec
      .given(state([requested]))
      .when()
      .then([call({ type: 'Submit' })]);
    spec
      .given(state([requested]))
      .when({ type: 'Submitted', provider: 'sim', providerJobId: 'job_1', pollAfterMs: 2_000 })
      .then([send({ type: 'RecordSubmission', videoId, provider: 'sim', providerJobId: 'job_1', pollAfterMs: 2_000 })]);
  });

  it('every provider refusing is recorded, retryable or not, as the refusals said', () => {
    const error = { code: 'upstream_503', message: 'busy' };
    spec
      .given(state([requested]))
      .when({ type: 'SubmissionRefused', error, retryable: true })
      .then([send({ type: 'RecordSubmissionFailure', videoId, error, retryable: true })]);
  });

  it('a submitted video waits for its poll time, then is polled', () => {
    spec
      .given(state([requested, submitted(5_000)]))
      .when()
      .then([schedule(new Date(at(5_000)))]);
    spec
      .given(state([requested, submitted(-1)]))
      .when()
      .then([call({ type: 'Poll' })]);
  });

  it('a poll records progress, a failure, or on completion keeps the clip and records its price, never above what was held', () => {
    const job = { id: 'job_1', status: 'in_progress' as const, progress: 40, pollAfterMs: null, error: null, costNano: null, url: null };
    spec
      .given(state([requested, submitted(-1)]))
      .when({ type: 'Polled', provider: 'sim', job })
      .then([send({ type: 'RecordProgress', videoId, status: 'in_progress', progress: 40, pollAfterMs: null })]);
    spec
      .given(state([requested, submitted(-1)]))
      .when({ type: 'Polled', provider: 'sim', job: { ...job, status: 'completed', progress: 100, costNano: 900_000_000n } })
      .then([call({ type: 'Keep', providerCostNano: 900_000_000n })]);
    spec
      .given(state([requested, submitted(-1)]))
      .when({ type: 'Kept', listedNano: 900_000_000n, providerCostNano: 900_000_000n, hasThumbnail: true })
      .then([send({ type: 'RecordCompletion', videoId, costNano: 800_000_000n, hasThumbnail: true, providerCostNano: 900_000_000n })]);
    spec
      .given(state([requested, submitted(-1)]))
      .when({ type: 'PollLost', provider: 'sim' })
      .then([send({ type: 'RecordFailure', videoId, error: { code: 'video_lost', message: "sim no longer knows this video's job." } })]);
  });

  it('a provider hiccup on a poll is not the end: it asks again later', () => {
    spec
      .given(state([requested, submitted(-1)]))
      .when({ type: 'PollFailed' })
      .then([schedule(new Date(NOW.getTime() + pollDelayMs(null)))]);
  });

  it('a cancel is carried to the provider first, then confirmed; before any submission it is confirmed at once', () => {
    spec
      .given(state([requested, submitted(60_000), cancelAsked]))
      .when()
      .then([call({ type: 'CancelAtProvider' })]);
    spec
      .given(state([requested, submitted(60_000), cancelAsked]))
      .when({ type: 'CancelledAtProvider' })
      .then([send({ type: 'ConfirmCancel', videoId })]);
    spec
      .given(state([requested, cancelAsked]))
      .when()
      .then([send({ type: 'ConfirmCancel', videoId })]);
  });

  it('an ended video is billed by its end: charged when completed, released otherwise; then the job ends', () => {
    spec
      .given(state([requested, submitted(-1), completed]))
      .when()
      .then([call({ type: 'Charge' })]);
    spec
      .given(state([requested, submitted(-1), completed]))
      .when({ type: 'Settled' })
      .then([complete()]);
    const cancelled: VideoEvent = { type: 'VideoCancelled', data: { video_id: videoId, cancelled_at: at(-1) } };
    spec
      .given(state([requested, cancelAsked, cancelled]))
      .when()
      .then([call({ type: 'Release', errorCode: 'video_cancelled' })]);
  });

  it('a deleted video is still billed, then what was kept of it is forgotten', () => {
    const deleted: VideoEvent = { type: 'VideoDeleted', data: { video_id: videoId, deleted_at: at(-1) } };
    spec
      .given(state([requested, submitted(-1), completed, deleted]))
      .when()
      .then([call({ type: 'Charge' })]);
    spec
      .given(state([requested, submitted(-1), completed, deleted]))
      .when({ type: 'Settled' })
      .then([call({ type: 'Forget' })]);
    spec
      .given(state([requested, submitted(-1), completed, deleted]))
      .when({ type: 'Forgotten' })
      .then([complete()]);
  });

  it('a request never recorded (its gateway died) releases its hold; a request that no longer opens fails unbilled', () => {
    spec
      .given(state([]))
      .when()
      .then([call({ type: 'Release', errorCode: 'video_not_recorded' })]);
    const error = { code: 'video_request_unavailable', message: 'The request of this video can no longer be read.' };
    spec
      .given(state([requested], { request: null }))
      .when()
      .then([send({ type: 'RecordSubmissionFailure', videoId, error, retryable: false })]);
  });

  it('a video forgotten already: nothing to do', () => {
    spec
      .given(state([requested], { kept: null }))
      .when()
      .then([complete()]);
  });
});
