import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import { batchDecider, type BatchEvent } from './batch';

const NOW = new Date('2026-11-25T10:00:00Z');
const at = (ms: number) => new Date(NOW.getTime() + ms).toISOString();
const spec = deciderSpec(batchDecider, () => NOW);
/** The same decider a day and a minute later: past the 24-hour window. */
const late = deciderSpec(batchDecider, () => new Date(NOW.getTime() + 24 * 3_600_000 + 60_000));

const batch_id = 'batch_1';
const ids = { batchId: batch_id };
const create = {
  type: 'CreateBatch' as const,
  ...ids,
  accountId: 'a1',
  workspaceId: 'w1',
  keyId: 'k1',
  endpoint: '/v1/chat/completions' as const,
  inputFileId: 'file-1',
  completionWindow: '24h',
  metadata: { run: 'nightly' },
};
const created: BatchEvent = {
  type: 'BatchCreated',
  data: {
    batch_id,
    account_id: 'a1',
    workspace_id: 'w1',
    key_id: 'k1',
    endpoint: '/v1/chat/completions',
    input_file_id: 'file-1',
    completion_window: '24h',
    metadata: { run: 'nightly' },
    created_at: at(0),
    expires_at: at(24 * 3_600_000),
  },
};
const started: BatchEvent = { type: 'BatchStarted', data: { batch_id, total: 3, in_progress_at: at(0) } };
const cancelling: BatchEvent = { type: 'BatchCancelRequested', data: { batch_id, cancelling_at: at(0) } };
const finalizing: BatchEvent = { type: 'BatchFinalizing', data: { batch_id, finalizing_at: at(0) } };
const files = { outputFileId: 'file-out', errorFileId: 'file-err' };
const outcome = { output_file_id: 'file-out', error_file_id: 'file-err' };

describe('batch workflow (spec 4.11, 3.2; OpenAI statuses)', () => {
  it('is created once, validating, with its 24-hour window as the timer; 24h is the only window', () => {
    spec.given([]).when(create).then([created]);
    spec.given([created]).when(create).thenThrows('batch_exists');
    spec
      .given([])
      .when({ ...create, completionWindow: '48h' })
      .thenThrows('invalid_completion_window');
  });

  it('starts with its line count once the input file is read, or fails with the problems found', () => {
    spec
      .given([created])
      .when({ type: 'RecordValidation', ...ids, total: 3, errors: [] })
      .then([started]);
    const errors = [{ code: 'url_mismatch', message: 'line 2 calls /v1/embeddings', line: 2, param: 'url' }];
    spec
      .given([created])
      .when({ type: 'RecordValidation', ...ids, total: 3, errors })
      .then([{ type: 'BatchValidationFailed', data: { batch_id, account_id: 'a1', errors, failed_at: at(0) } }]);
    spec
      .given([created])
      .when({ type: 'RecordValidation', ...ids, total: 0, errors: [] })
      .thenThrows('empty_batch');
    spec
      .given([created, started])
      .when({ type: 'RecordValidation', ...ids, total: 3, errors: [] })
      .thenThrows('batch_invalid_state');
    spec
      .given([])
      .when({ type: 'RecordValidation', ...ids, total: 3, errors: [] })
      .thenThrows('batch_not_found');
  });

  it('completes when every line has an outcome, even when every line failed; finalizing first', () => {
    spec
      .given([created, started])
      .when({ type: 'BeginFinalizing', ...ids })
      .then([finalizing]);
    spec
      .given([created, started, finalizing])
      .when({ type: 'FinishBatch', ...ids, completed: 2, failed: 1, ...files })
      .then([{ type: 'BatchCompleted', data: { batch_id, account_id: 'a1', completed_at: at(0), completed: 2, failed: 1, ...outcome } }]);
    spec
      .given([created, started])
      .when({ type: 'FinishBatch', ...ids, completed: 0, failed: 3, outputFileId: null, errorFileId: 'file-err' })
      .then([
        {
          type: 'BatchCompleted',
          data: { batch_id, account_id: 'a1', completed_at: at(0), completed: 0, failed: 3, output_file_id: null, error_file_id: 'file-err' },
        },
      ]);
    spec
      .given([created, started])
      .when({ type: 'FinishBatch', ...ids, completed: 4, failed: 0, ...files })
      .thenThrows('invalid_batch_counts');
  });

  it('does not finish with lines left inside its window; past the window it expires, keeping the lines that finished', () => {
    spec
      .given([created, started])
      .when({ type: 'FinishBatch', ...ids, completed: 1, failed: 0, ...files })
      .thenThrows('batch_unfinished');
    late
      .given([created, started])
      .when({ type: 'FinishBatch', ...ids, completed: 1, failed: 0, ...files })
      .then([
        {
          type: 'BatchExpired',
          data: {
            batch_id,
            account_id: 'a1',
            expired_at: new Date(NOW.getTime() + 24 * 3_600_000 + 60_000).toISOString(),
            completed: 1,
            failed: 0,
            ...outcome,
          },
        },
      ]);
  });

  it('cancels from validating, running or finalizing; cancelled keeps the lines that finished; asking again changes nothing', () => {
    spec
      .given([created])
      .when({ type: 'RequestCancel', ...ids })
      .then([cancelling]);
    spec
      .given([created, started])
      .when({ type: 'RequestCancel', ...ids })
      .then([cancelling]);
    spec
      .given([created, started, finalizing])
      .when({ type: 'RequestCancel', ...ids })
      .then([cancelling]);
    spec
      .given([created, started, cancelling])
      .when({ type: 'RequestCancel', ...ids })
      .then([]);
    spec
      .given([created, started, cancelling])
      .when({ type: 'BeginFinalizing', ...ids })
      .then([]);
    spec
      .given([created, started, cancelling])
      .when({ type: 'FinishBatch', ...ids, completed: 1, failed: 0, ...files })
      .then([{ type: 'BatchCancelled', data: { batch_id, account_id: 'a1', cancelled_at: at(0), completed: 1, failed: 0, ...outcome } }]);
  });

  it('a batch cancelled while validating ends at once, with no lines run', () => {
    spec
      .given([created, cancelling])
      .when({ type: 'RecordValidation', ...ids, total: 3, errors: [] })
      .then([
        started,
        {
          type: 'BatchCancelled',
          data: { batch_id, account_id: 'a1', cancelled_at: at(0), completed: 0, failed: 0, output_file_id: null, error_file_id: null },
        },
      ]);
  });

  it('an ended batch cannot be cancelled, finalized or finished again', () => {
    const completed: BatchEvent = { type: 'BatchCompleted', data: { batch_id, account_id: 'a1', completed_at: at(0), completed: 3, failed: 0, ...outcome } };
    spec
      .given([created, started, completed])
      .when({ type: 'RequestCancel', ...ids })
      .thenThrows('batch_invalid_state');
    spec
      .given([created, started, completed])
      .when({ type: 'BeginFinalizing', ...ids })
      .thenThrows('batch_invalid_state');
    spec
      .given([created, started, completed])
      .when({ type: 'FinishBatch', ...ids, completed: 3, failed: 0, ...files })
      .thenThrows('batch_invalid_state');
    const failed: BatchEvent = { type: 'BatchValidationFailed', data: { batch_id, account_id: 'a1', errors: [], failed_at: at(0) } };
    spec
      .given([created, failed])
      .when({ type: 'RequestCancel', ...ids })
      .thenThrows('batch_invalid_state');
  });
});
