/**
 * What the workers do for one batch as a whole (spec 4.11, 3.2), as a workflow on the job table
 * (ARCHITECTURE section 11): the job `(batch, <batch id>)`, over the batch's stream (./batch)
 * and how its lines stand (./lines). The decider chooses each step: read the input file into
 * lines, wait for the lines, drop the lines that will not run (cancelled or expired), write the
 * result files and record the end, forget the lines. The lines themselves are jobs of their own
 * (./line-workflow); each line's end wakes the batch, and the batch also looks again on its
 * own (its 24-hour timer, and a worker's lines that stopped without a word).
 */
import { call, complete, schedule, send, type Due, type Workflow, type WorkflowOutput } from '@svc/jobs';
import {
  batchDecider,
  isTerminal,
  type BatchCommand,
  type BatchEndpoint,
  type BatchError,
  type BatchEvent,
  type BatchOutcome,
  type BatchState,
  type BatchStatus,
} from './batch';

export const BATCH_JOB = 'batch';

/** A batch as a worker sees it: from the batches read model. */
export interface ActiveBatch {
  batchId: string;
  accountId: string;
  workspaceId: string;
  keyId: string;
  endpoint: BatchEndpoint;
  inputFileId: string;
  status: BatchStatus;
  expiresAt: Date;
}

/** How the batch's lines stand, rows and jobs together. */
export interface LineProgress {
  total: number;
  /** Lines without an outcome. */
  open: number;
  /** Answers kept and not yet settled: their jobs settle them, whatever the batch does. */
  answered: number;
  /** Line jobs some worker holds now. */
  held: number;
  /** Line jobs no worker holds, of lines not answered: what would still run. */
  queued: number;
}

export interface BatchWorkflowState {
  batchId: string;
  batch: BatchState;
  /** The batch in the read model; null while it does not show the batch as running. */
  active: ActiveBatch | null;
  lines: LineProgress;
}

export type BatchEffect =
  /** Reads the input file into the batch's lines and makes them due. */
  | { type: 'Validate' }
  /** Removes the jobs of the lines that have not begun and no worker holds. */
  | { type: 'DropUnrun' }
  /** Writes the output and error files; lines that never ran are listed with `notRun`, the hold of one left running released. */
  | { type: 'WriteResults'; notRun: 'batch_cancelled' | 'batch_expired' }
  /** Removes an ended batch's lines and their jobs (the files are what is kept). */
  | { type: 'Forget' };

export type BatchWorkflowInput =
  { type: 'Validated'; total: number; errors: BatchError[] } | { type: 'Dropped' } | ({ type: 'Written' } & BatchOutcome) | { type: 'Forgotten' };

type Output = WorkflowOutput<BatchCommand, BatchEffect>;

/** How long a batch waits, at most, before it looks at its lines again without being woken. */
export const BATCH_LOOK_MS = 1_000;

const later = (now: Date, until?: Date | null) => {
  const look = new Date(now.getTime() + BATCH_LOOK_MS);
  return until && until < look ? until : look;
};

/** The files, then the end: lines that never ran are listed as cancelled when cancellation was asked, else as expired. */
function finalize(s: BatchWorkflowState, batchId: string, now: Date): Output[] {
  if (s.active === null) return [schedule(later(now))];
  const write = call<BatchEffect>({ type: 'WriteResults', notRun: s.batch.status === 'cancelling' ? 'batch_cancelled' : 'batch_expired' });
  return s.batch.status === 'in_progress' ? [send<BatchCommand>({ type: 'BeginFinalizing', batchId }), write] : [write];
}

function onDue(s: BatchWorkflowState, batchId: string, now: Date): Output[] {
  const { batch, active, lines } = s;
  if (batch.status === null) return [complete()];
  if (isTerminal(batch.status)) return lines.total > 0 ? [call({ type: 'Forget' })] : [complete()];
  if (batch.status === 'validating') return active === null ? [schedule(later(now))] : [call({ type: 'Validate' })];
  const expired = batch.expiresAt !== null && now >= batch.expiresAt;
  if (batch.status === 'in_progress' && !expired) return lines.open > 0 ? [schedule(later(now, batch.expiresAt))] : finalize(s, batchId, now);
  // Cancelled, expired or finalizing: nothing new runs; the lines running finish, answers kept are settled, then the files are written.
  if (lines.queued > 0) return [call({ type: 'DropUnrun' })];
  if (lines.held > 0 || lines.answered > 0) return [schedule(later(now))];
  return finalize(s, batchId, now);
}

export const batchWorkflow: Workflow<BatchWorkflowInput, BatchWorkflowState, BatchCommand, BatchEffect, BatchEvent> = {
  kind: BATCH_JOB,
  decide(input: BatchWorkflowInput | Due, s, now) {
    const { batchId } = s;
    switch (input.type) {
      case 'Due':
        return onDue(s, batchId, now);
      // What the lines now are is read anew: look again at once.
      case 'Validated':
        return [send({ type: 'RecordValidation', batchId, total: input.total, errors: input.errors }), schedule(now)];
      case 'Dropped':
        return [schedule(now)];
      case 'Written':
        return [
          send({
            type: 'FinishBatch',
            batchId,
            completed: input.completed,
            failed: input.failed,
            outputFileId: input.outputFileId,
            errorFileId: input.errorFileId,
          }),
          call({ type: 'Forget' }),
        ];
      case 'Forgotten':
        return [complete()];
    }
  },
  evolve(s, event) {
    return { ...s, batch: batchDecider.evolve(s.batch, event) };
  },
};
