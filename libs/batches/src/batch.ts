/**
 * A batch (spec 4.11, 3.2; OpenAI's batch object and statuses, WIRE-FORMATS 1.2) as a workflow
 * (ARCHITECTURE section 11): a pure decider on the stream `batch-<id>` whose events carry its
 * timer (`expires_at`, the 24-hour window) and its phases. The lines are not events here: each
 * line is a billed call with its own hold and charge on the account's stream (a deterministic
 * hold id makes it land once), and its result is content, kept sealed beside the batch. This
 * stream records what the batch as a whole went through, with the counts at its end.
 */
import { DomainError, type Decider, type DomainEvent } from '@svc/eventstore';

export const batchStream = (batchId: string) => `batch-${batchId}`;

/** Spec 3.2: a batch completes within 24 hours; `24h` is the only window. */
export const COMPLETION_WINDOW = '24h';
export const COMPLETION_WINDOW_MS = 24 * 3_600_000;

/** The endpoints a batch line may call (issue 19: chat and embeddings). */
export const BATCH_ENDPOINTS = ['/v1/chat/completions', '/v1/embeddings'] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

export type BatchStatus = 'validating' | 'failed' | 'in_progress' | 'finalizing' | 'completed' | 'expired' | 'cancelling' | 'cancelled';

/** A problem of the input file, as OpenAI lists them: the 1-based line when it is one line's. */
export interface BatchError {
  code: string;
  message: string;
  line: number | null;
  param: string | null;
}

/** What the lines came to when the batch ended; the result files are written before it ends. */
export interface BatchOutcome {
  completed: number;
  failed: number;
  outputFileId: string | null;
  errorFileId: string | null;
}

interface Outcome {
  completed: number;
  failed: number;
  output_file_id: string | null;
  error_file_id: string | null;
}

export type BatchEvent =
  | DomainEvent<
      'BatchCreated',
      {
        batch_id: string;
        account_id: string;
        workspace_id: string;
        key_id: string;
        endpoint: BatchEndpoint;
        input_file_id: string;
        completion_window: string;
        metadata: Record<string, string> | null;
        created_at: string;
        /** The timer: unfinished lines are given up at this time. */
        expires_at: string;
      }
    >
  | DomainEvent<'BatchStarted', { batch_id: string; total: number; in_progress_at: string }>
  | DomainEvent<'BatchValidationFailed', { batch_id: string; account_id: string; errors: BatchError[]; failed_at: string }>
  | DomainEvent<'BatchCancelRequested', { batch_id: string; cancelling_at: string }>
  | DomainEvent<'BatchFinalizing', { batch_id: string; finalizing_at: string }>
  | DomainEvent<'BatchCompleted', { batch_id: string; account_id: string; completed_at: string } & Outcome>
  | DomainEvent<'BatchExpired', { batch_id: string; account_id: string; expired_at: string } & Outcome>
  | DomainEvent<'BatchCancelled', { batch_id: string; account_id: string; cancelled_at: string } & Outcome>;

export type BatchCommand =
  | {
      type: 'CreateBatch';
      batchId: string;
      accountId: string;
      workspaceId: string;
      keyId: string;
      endpoint: BatchEndpoint;
      inputFileId: string;
      completionWindow: string;
      metadata: Record<string, string> | null;
    }
  /** The input file read: its lines counted, or the problems that stop the batch. */
  | { type: 'RecordValidation'; batchId: string; total: number; errors: BatchError[] }
  | { type: 'RequestCancel'; batchId: string }
  /** Every line has an outcome (or none will run again): the result files are being written. */
  | { type: 'BeginFinalizing'; batchId: string }
  | ({ type: 'FinishBatch'; batchId: string } & BatchOutcome);

export interface BatchState {
  status: BatchStatus | null;
  /** The account its end is told to (spec 6.1: batch.completed, batch.failed). */
  accountId: string;
  total: number;
  expiresAt: Date | null;
}

const TERMINAL: readonly BatchStatus[] = ['failed', 'completed', 'expired', 'cancelled'];
export const isTerminal = (status: BatchStatus | null) => status !== null && TERMINAL.includes(status);

function requireStatus(state: BatchState, batchId: string, allowed: readonly BatchStatus[], action: string): BatchStatus {
  if (state.status === null) throw new DomainError('batch_not_found', `No batch ${batchId}.`);
  if (!allowed.includes(state.status))
    throw new DomainError('batch_invalid_state', `Batch ${batchId} is ${state.status}: it cannot ${action}.`, { status: state.status });
  return state.status;
}

function create(command: Extract<BatchCommand, { type: 'CreateBatch' }>, state: BatchState, now: Date): BatchEvent[] {
  if (state.status !== null) throw new DomainError('batch_exists', `Batch ${command.batchId} exists already.`);
  if (command.completionWindow !== COMPLETION_WINDOW) throw new DomainError('invalid_completion_window', `completion_window must be "${COMPLETION_WINDOW}".`);
  return [
    {
      type: 'BatchCreated',
      data: {
        batch_id: command.batchId,
        account_id: command.accountId,
        workspace_id: command.workspaceId,
        key_id: command.keyId,
        endpoint: command.endpoint,
        input_file_id: command.inputFileId,
        completion_window: command.completionWindow,
        metadata: command.metadata,
        created_at: now.toISOString(),
        expires_at: new Date(now.getTime() + COMPLETION_WINDOW_MS).toISOString(),
      },
    },
  ];
}

function recordValidation(command: Extract<BatchCommand, { type: 'RecordValidation' }>, state: BatchState, now: Date): BatchEvent[] {
  const status = requireStatus(state, command.batchId, ['validating', 'cancelling'], 'be validated');
  const at = now.toISOString();
  const account_id = state.accountId;
  if (command.errors.length > 0)
    return [{ type: 'BatchValidationFailed', data: { batch_id: command.batchId, account_id, errors: command.errors, failed_at: at } }];
  if (command.total < 1) throw new DomainError('empty_batch', 'A batch without lines is a validation error, not a start.');
  const started: BatchEvent = { type: 'BatchStarted', data: { batch_id: command.batchId, total: command.total, in_progress_at: at } };
  // Cancelled while it was being read: nothing ran, so it ends at once with no lines.
  if (status === 'cancelling')
    return [
      started,
      {
        type: 'BatchCancelled',
        data: { batch_id: command.batchId, account_id, cancelled_at: at, ...outcomeOf({ completed: 0, failed: 0, outputFileId: null, errorFileId: null }) },
      },
    ];
  return [started];
}

function requestCancel(command: Extract<BatchCommand, { type: 'RequestCancel' }>, state: BatchState, now: Date): BatchEvent[] {
  const status = requireStatus(state, command.batchId, ['validating', 'in_progress', 'finalizing', 'cancelling', 'cancelled'], 'be cancelled');
  // Asking twice is answered with the batch as it is, as OpenAI does.
  if (status === 'cancelling' || status === 'cancelled') return [];
  return [{ type: 'BatchCancelRequested', data: { batch_id: command.batchId, cancelling_at: now.toISOString() } }];
}

function beginFinalizing(command: Extract<BatchCommand, { type: 'BeginFinalizing' }>, state: BatchState, now: Date): BatchEvent[] {
  const status = requireStatus(state, command.batchId, ['in_progress', 'finalizing', 'cancelling'], 'be finalized');
  // A cancelling batch stays cancelling while its files are written: that is what the caller asked for.
  if (status !== 'in_progress') return [];
  return [{ type: 'BatchFinalizing', data: { batch_id: command.batchId, finalizing_at: now.toISOString() } }];
}

/**
 * The end, decided by how the batch got here: cancelled when cancellation was asked; expired
 * when the window closed with lines that never ran; completed when every line has an outcome
 * (a batch whose every line failed is still completed, as OpenAI's is).
 */
function finish(command: Extract<BatchCommand, { type: 'FinishBatch' }>, state: BatchState, now: Date): BatchEvent[] {
  const status = requireStatus(state, command.batchId, ['in_progress', 'finalizing', 'cancelling'], 'finish');
  const done = command.completed + command.failed;
  if (done > state.total || command.completed < 0 || command.failed < 0)
    throw new DomainError('invalid_batch_counts', `${done} outcomes for ${state.total} lines.`);
  const at = now.toISOString();
  const outcome = outcomeOf(command);
  const batch = { batch_id: command.batchId, account_id: state.accountId };
  if (status === 'cancelling') return [{ type: 'BatchCancelled', data: { ...batch, cancelled_at: at, ...outcome } }];
  if (done === state.total) return [{ type: 'BatchCompleted', data: { ...batch, completed_at: at, ...outcome } }];
  if (state.expiresAt !== null && now >= state.expiresAt) return [{ type: 'BatchExpired', data: { ...batch, expired_at: at, ...outcome } }];
  throw new DomainError(
    'batch_unfinished',
    `Batch ${command.batchId} has ${state.total - done} lines to run and ${state.expiresAt?.toISOString()} to run them.`,
  );
}

const outcomeOf = (o: BatchOutcome): Outcome => ({ completed: o.completed, failed: o.failed, output_file_id: o.outputFileId, error_file_id: o.errorFileId });

export const batchDecider: Decider<BatchCommand, BatchState, BatchEvent> = {
  initialState: () => ({ status: null, accountId: '', total: 0, expiresAt: null }),
  decide(command, state, now) {
    switch (command.type) {
      case 'CreateBatch':
        return create(command, state, now);
      case 'RecordValidation':
        return recordValidation(command, state, now);
      case 'RequestCancel':
        return requestCancel(command, state, now);
      case 'BeginFinalizing':
        return beginFinalizing(command, state, now);
      case 'FinishBatch':
        return finish(command, state, now);
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'BatchCreated':
        return { ...state, status: 'validating', accountId: event.data.account_id, expiresAt: new Date(event.data.expires_at) };
      case 'BatchStarted':
        // A cancel asked during validation stays asked.
        return { ...state, status: state.status === 'cancelling' ? 'cancelling' : 'in_progress', total: event.data.total };
      case 'BatchValidationFailed':
        return { ...state, status: 'failed' };
      case 'BatchCancelRequested':
        return { ...state, status: 'cancelling' };
      case 'BatchFinalizing':
        return { ...state, status: 'finalizing' };
      case 'BatchCompleted':
        return { ...state, status: 'completed' };
      case 'BatchExpired':
        return { ...state, status: 'expired' };
      case 'BatchCancelled':
        return { ...state, status: 'cancelled' };
    }
  },
};
