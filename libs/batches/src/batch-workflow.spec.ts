import { call, complete, schedule, send } from '@svc/jobs';
import { workflowSpec } from '@svc/jobs/testing/workflow-spec';
import type { BatchState } from './batch';
import { BATCH_LOOK_MS, batchWorkflow, type ActiveBatch, type BatchWorkflowState, type LineProgress } from './batch-workflow';

const NOW = new Date('2026-11-25T10:00:00Z');
const after = (ms: number) => new Date(NOW.getTime() + ms);
const spec = workflowSpec(batchWorkflow, () => NOW);
const batchId = 'batch_1';

const active: ActiveBatch = {
  batchId,
  accountId: 'a1',
  workspaceId: 'w1',
  keyId: 'k1',
  endpoint: '/v1/chat/completions',
  inputFileId: 'file-1',
  status: 'in_progress',
  expiresAt: after(3_600_000),
};
const noLines: LineProgress = { total: 0, open: 0, answered: 0, held: 0, queued: 0 };
const batchIs = (status: BatchState['status'], expiresAt = after(3_600_000), total = 3): BatchState => ({ status, accountId: 'a1', total, expiresAt });
const state = (batch: BatchState, lines: Partial<LineProgress> = {}, shown: ActiveBatch | null = active): BatchWorkflowState => ({
  batchId,
  batch,
  active: shown,
  lines: { ...noLines, ...lines },
});

describe('a batch as a workflow (spec 4.11, 3.2; ARCHITECTURE section 11)', () => {
  it('a new batch reads its input file, records what it found, and looks again at once', () => {
    spec
      .given(state(batchIs('validating', after(3_600_000), 0)))
      .when()
      .then([call({ type: 'Validate' })]);
    spec
      .given(state(batchIs('validating', after(3_600_000), 0)))
      .when({ type: 'Validated', total: 3, errors: [] })
      .then([send({ type: 'RecordValidation', batchId, total: 3, errors: [] }), schedule(NOW)]);
  });

  it('waits for the read model before anything that needs the batch’s file, account and key', () => {
    spec
      .given(state(batchIs('validating', after(3_600_000), 0), {}, null))
      .when()
      .then([schedule(after(BATCH_LOOK_MS))]);
  });

  it('while lines are open it looks again soon, and no later than its 24-hour timer', () => {
    spec
      .given(state(batchIs('in_progress'), { total: 3, open: 2, held: 1, queued: 1 }))
      .when()
      .then([schedule(after(BATCH_LOOK_MS))]);
    spec
      .given(state(batchIs('in_progress', after(200)), { total: 3, open: 2 }))
      .when()
      .then([schedule(after(200))]);
  });

  it('every line with an outcome: finalizing, the result files, then the end and the lines forgotten', () => {
    spec
      .given(state(batchIs('in_progress'), { total: 3 }))
      .when()
      .then([send({ type: 'BeginFinalizing', batchId }), call({ type: 'WriteResults', notRun: 'batch_expired' })]);
    const outcome = { completed: 2, failed: 1, outputFileId: 'file-out', errorFileId: 'file-err' };
    spec
      .given(state(batchIs('finalizing'), { total: 3 }))
      .when({ type: 'Written', ...outcome })
      .then([send({ type: 'FinishBatch', batchId, ...outcome }), call({ type: 'Forget' })]);
    spec
      .given(state(batchIs('completed')))
      .when({ type: 'Forgotten' })
      .then([complete()]);
  });

  it('cancelled: the lines not begun are dropped, the running ones finish and answers kept are settled, then it ends with what finished', () => {
    spec
      .given(state(batchIs('cancelling'), { total: 3, open: 3, held: 1, queued: 2 }))
      .when()
      .then([call({ type: 'DropUnrun' })]);
    spec
      .given(state(batchIs('cancelling'), { total: 3, open: 3, held: 1, queued: 2 }))
      .when({ type: 'Dropped' })
      .then([schedule(NOW)]);
    spec
      .given(state(batchIs('cancelling'), { total: 3, open: 2, held: 1 }))
      .when()
      .then([schedule(after(BATCH_LOOK_MS))]);
    spec
      .given(state(batchIs('cancelling'), { total: 3, open: 2, answered: 1 }))
      .when()
      .then([schedule(after(BATCH_LOOK_MS))]);
    spec
      .given(state(batchIs('cancelling'), { total: 3, open: 2 }))
      .when()
      .then([call({ type: 'WriteResults', notRun: 'batch_cancelled' })]);
  });

  it('cancelled while its file was being read: it ends at once, with no lines', () => {
    spec
      .given(state({ ...batchIs('cancelling'), total: 0 }))
      .when()
      .then([call({ type: 'WriteResults', notRun: 'batch_cancelled' })]);
  });

  it('past its 24 hours (spec 3.2) the lines not begun are dropped and it ends expired with the lines that finished', () => {
    const expired = batchIs('in_progress', NOW);
    spec
      .given(state(expired, { total: 3, open: 2, queued: 2 }))
      .when()
      .then([call({ type: 'DropUnrun' })]);
    spec
      .given(state(expired, { total: 3, open: 2 }))
      .when()
      .then([send({ type: 'BeginFinalizing', batchId }), call({ type: 'WriteResults', notRun: 'batch_expired' })]);
  });

  it('ended: lines left behind are forgotten, then the job completes; a batch never recorded completes at once', () => {
    spec
      .given(state(batchIs('cancelled'), { total: 3 }, null))
      .when()
      .then([call({ type: 'Forget' })]);
    spec
      .given(state(batchIs('failed'), {}, null))
      .when()
      .then([complete()]);
    spec
      .given(state({ status: null, accountId: '', total: 0, expiresAt: null }, {}, null))
      .when()
      .then([complete()]);
  });
});
