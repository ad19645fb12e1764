import { call, complete, send } from '@svc/jobs';
import { workflowSpec } from '@svc/jobs/testing/workflow-spec';
import type { ActiveBatch } from './batch-workflow';
import { lineHoldId, lineJobKey, lineOfJob, lineWorkflow, MAX_LINE_ATTEMPTS, resultLineId, type LineWorkflowState } from './line-workflow';

const NOW = new Date('2026-11-25T10:00:00Z');
const spec = workflowSpec(lineWorkflow, () => NOW);
const batchId = 'batch_1';
const line = 3;
const id = resultLineId(batchId, line);
const hold = (attempt: number) => lineHoldId(batchId, line, attempt);

const running: ActiveBatch = {
  batchId,
  accountId: 'a1',
  workspaceId: 'w1',
  keyId: 'k1',
  endpoint: '/v1/chat/completions',
  inputFileId: 'file-1',
  status: 'in_progress',
  expiresAt: new Date(NOW.getTime() + 3_600_000),
};
const request = { custom_id: 'r3', body: { model: 'sim/echo', messages: [] } };
const kept = { reservation: { id: hold(1) } };

/** The line as a step holding its job under lease epoch `epoch` loads it. */
const state = (row: LineWorkflowState['row'], epoch: number, batch: ActiveBatch | null = running): LineWorkflowState => ({
  batchId,
  line,
  batch,
  row,
  request,
  epoch,
});

describe('a batch line as a workflow (spec 4.11, 1 rule 6; ARCHITECTURE section 11)', () => {
  it('its job key names its batch before the colon', () => {
    expect(lineJobKey(batchId, line)).toBe('batch_1:3');
    expect(lineOfJob('batch_1:3')).toEqual({ batchId, line });
  });

  it('a pending line begins the attempt of its lease, then answers under that attempt’s hold', () => {
    spec
      .given(state({ status: 'pending', attempt: 0, kept: null }, 1))
      .when()
      .then([send({ type: 'BeginAttempt', attempt: 1 })]);
    spec
      .given(state({ status: 'running', attempt: 1, kept: null }, 1))
      .when()
      .then([call({ type: 'Answer', holdId: hold(1) })]);
  });

  it('an answer is kept before it is settled, then the line completes', () => {
    const result = { id, custom_id: 'r3', response: { status_code: 200, request_id: 'gen-x', body: { ok: true } }, error: null };
    spec
      .given(state({ status: 'running', attempt: 1, kept: null }, 1))
      .when({ type: 'Answered', body: { ok: true }, requestId: 'gen-x', kept })
      .then([send({ type: 'KeepAnswer', attempt: 1, result, kept }), call({ type: 'Settle', kept })]);
    spec
      .given(state({ status: 'answered', attempt: 1, kept }, 1))
      .when({ type: 'Settled' })
      .then([send({ type: 'FinishLine', attempt: 1, outcome: 'completed' }), complete()]);
  });

  it('a request the endpoint refuses fails the line with the endpoint’s error as its result', () => {
    spec
      .given(state({ status: 'running', attempt: 2, kept: null }, 2))
      .when({ type: 'Refused', statusCode: 400, body: { error: { code: 'bad' } }, requestId: null })
      .then([
        send({
          type: 'FinishLine',
          attempt: 2,
          outcome: 'failed',
          result: { id, custom_id: 'r3', response: { status_code: 400, request_id: hold(2), body: { error: { code: 'bad' } } }, error: null },
        }),
        complete(),
      ]);
  });

  it('a line left running by a worker that is gone: that attempt’s hold is released, then the next attempt begins', () => {
    spec
      .given(state({ status: 'running', attempt: 2, kept: null }, 3))
      .when()
      .then([call({ type: 'Release', holdId: hold(2) })]);
    spec
      .given(state({ status: 'running', attempt: 2, kept: null }, 3))
      .when({ type: 'Released' })
      .then([send({ type: 'BeginAttempt', attempt: 3 })]);
  });

  it('an answer kept by a worker that stopped before settling is settled by the next holder, once', () => {
    spec
      .given(state({ status: 'answered', attempt: 2, kept }, 3))
      .when()
      .then([call({ type: 'Settle', kept })]);
  });

  it(`past ${MAX_LINE_ATTEMPTS} attempts the line fails unbilled; a request that no longer opens fails too`, () => {
    const attempt = MAX_LINE_ATTEMPTS + 1;
    spec
      .given(state({ status: 'running', attempt, kept: null }, attempt))
      .when()
      .then([
        send({
          type: 'FinishLine',
          attempt,
          outcome: 'failed',
          result: {
            id,
            custom_id: 'r3',
            response: null,
            error: { code: 'request_failed', message: `The request was cut short ${MAX_LINE_ATTEMPTS} times by the service; it was not billed.` },
          },
        }),
        complete(),
      ]);
    spec
      .given({ ...state({ status: 'running', attempt: 1, kept: null }, 1), request: null })
      .when()
      .then([
        send({
          type: 'FinishLine',
          attempt: 1,
          outcome: 'failed',
          result: {
            id,
            custom_id: '',
            response: null,
            error: { code: 'request_unreadable', message: 'The line can no longer be read: the service encryption key changed.' },
          },
        }),
        complete(),
      ]);
  });

  it('a lease lost to a later holder: its own hold is released and the line is left to that holder', () => {
    spec
      .given(state({ status: 'running', attempt: 4, kept: null }, 3))
      .when()
      .then([call({ type: 'Release', holdId: hold(3) })]);
    spec
      .given(state({ status: 'running', attempt: 4, kept: null }, 3))
      .when({ type: 'Released' })
      .then([complete()]);
  });

  it('cancelled, finalizing or past its window, a line not begun never runs; one answered is still settled', () => {
    for (const batch of [{ ...running, status: 'cancelling' as const }, { ...running, status: 'finalizing' as const }, { ...running, expiresAt: NOW }, null]) {
      spec
        .given(state({ status: 'pending', attempt: 0, kept: null }, 1, batch))
        .when()
        .then([complete()]);
      spec
        .given(state({ status: 'running', attempt: 1, kept: null }, 2, batch))
        .when()
        .then([complete()]);
    }
    spec
      .given(state({ status: 'answered', attempt: 1, kept }, 2, { ...running, status: 'cancelling' }))
      .when()
      .then([call({ type: 'Settle', kept })]);
  });

  it('a line done, or gone with its ended batch, completes its job', () => {
    spec
      .given(state({ status: 'done', attempt: 1, kept: null }, 2))
      .when()
      .then([complete()]);
    spec.given(state(null, 2)).when().then([complete()]);
  });
});
