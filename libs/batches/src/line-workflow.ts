/**
 * One line of a batch (spec 4.11, 1 rule 6) as a workflow on the job table (ARCHITECTURE
 * section 11). The job is `(batch-line, <batch id>:<line>)`, made due when the batch starts;
 * its state is the line's row beside the batch (./lines: status, attempt, the settlement kept)
 * and the batch as the read model shows it. The decider chooses each step: begin an attempt,
 * answer through the metering pipeline, keep the answer, settle it, or leave the line to the
 * batch's end (cancelled or expired: it never runs).
 *
 * An attempt is numbered by the epoch of the lease it runs under, so its hold (`lineHoldId`)
 * belongs to one holder only: a worker that lost its lease can neither keep an answer nor
 * settle one (every write is conditional on the attempt), and the next holder releases the
 * hold of an attempt left running before it begins its own. An answer is kept before it is
 * settled, so whoever holds the line next settles it: each line is billed exactly once.
 */
import { createHash } from 'node:crypto';
import type { DomainEvent } from '@svc/eventstore';
import { call, complete, send, type Due, type Workflow, type WorkflowOutput } from '@svc/jobs';
import type { ActiveBatch } from './batch-workflow';

export const BATCH_LINE_JOB = 'batch-line';

/** The job of a line: its batch id before the colon, so a claim can take the lines of some batches only. */
export const lineJobKey = (batchId: string, line: number) => `${batchId}:${line}`;

export function lineOfJob(key: string): { batchId: string; line: number } {
  const at = key.lastIndexOf(':');
  return { batchId: key.slice(0, at), line: Number(key.slice(at + 1)) };
}

export type LineStatus = 'pending' | 'running' | 'answered' | 'done';
export type LineOutcome = 'completed' | 'failed';

/** One line of an output or error file, as OpenAI writes it (WIRE-FORMATS 1.2 `BatchRequestOutput`). */
export interface BatchResultLine {
  id: string;
  custom_id: string;
  response: { status_code: number; request_id: string; body: unknown } | null;
  error: { code: string; message: string } | null;
}

/** The hold (and generation) id of one attempt of one line: the same in every process. */
export function lineHoldId(batchId: string, line: number, attempt: number): string {
  return `gen-${createHash('sha256').update(`${batchId}:${line}:${attempt}`).digest('hex').slice(0, 24)}`;
}

/** The `id` of a line in the result files, stable across attempts. */
export function resultLineId(batchId: string, line: number): string {
  return `batch_req_${createHash('sha256').update(`${batchId}:${line}`).digest('hex').slice(0, 24)}`;
}

/** Past this many attempts (each cut short by a crash or an outage) a line fails instead. */
export const MAX_LINE_ATTEMPTS = 5;

/** The line's row: where it stands, the attempt it is at, and the settlement kept with an answer (ids, counts and costs, no content). */
export interface LineRow {
  status: LineStatus;
  attempt: number;
  kept: unknown;
}

export interface LineWorkflowState {
  batchId: string;
  line: number;
  /** The batch as the read model showed it when the line was claimed; null when it is not running. */
  batch: ActiveBatch | null;
  /** Null once the batch ended and its lines are gone. */
  row: LineRow | null;
  /** The line's request; null when it no longer opens (SVC_ENCRYPTION_KEY changed). */
  request: { custom_id: string; body: Record<string, unknown> } | null;
  /** The epoch of the lease this step holds: the one attempt it may run. */
  epoch: number;
}

export type LineEffect =
  /** The request, held under `holdId` (outside the per-minute limits, at the batch discount) and answered. */
  | { type: 'Answer'; holdId: string }
  | { type: 'Settle'; kept: unknown }
  /** Releases the hold of an attempt that will not settle; a hold not open is left. */
  | { type: 'Release'; holdId: string };

export type LineInput =
  | { type: 'Answered'; body: unknown; requestId: string; kept: unknown }
  /** The error the endpoint would have answered: nothing held, or the hold released. */
  | { type: 'Refused'; statusCode: number; body: unknown; requestId: string | null }
  | { type: 'Settled' }
  | { type: 'Released' };

/** Conditional writes on the line's row: each refused (the line moved on) unless the row is still at `attempt`. */
export type LineCommand =
  | { type: 'BeginAttempt'; attempt: number }
  | { type: 'KeepAnswer'; attempt: number; result: BatchResultLine; kept: unknown }
  | { type: 'FinishLine'; attempt: number; outcome: LineOutcome; result?: BatchResultLine };

export type LineEvent =
  DomainEvent<'AttemptBegun', { attempt: number }> | DomainEvent<'AnswerKept', { kept: unknown }> | DomainEvent<'LineFinished', { outcome: LineOutcome }>;

type Output = WorkflowOutput<LineCommand, LineEffect>;

/** A line runs only while its batch does: cancelled, finalizing or past its window, what has not begun never will. */
export const batchRuns = (batch: ActiveBatch | null, now: Date) => batch !== null && batch.status === 'in_progress' && batch.expiresAt > now;

const holdOf = (s: LineWorkflowState, attempt: number) => lineHoldId(s.batchId, s.line, attempt);

const finish = (attempt: number, outcome: LineOutcome, result?: BatchResultLine): Output[] => [
  send({ type: 'FinishLine', attempt, outcome, ...(result ? { result } : {}) }),
  complete(),
];

function onDue(s: LineWorkflowState, now: Date): Output[] {
  const { row, epoch } = s;
  if (row === null || row.status === 'done') return [complete()];
  // A later holder took the line: this lease was lost, and the hold its attempt may have placed will never settle.
  if (row.attempt > epoch) return [call({ type: 'Release', holdId: holdOf(s, epoch) })];
  // A worker answered it and stopped before settling: what it kept is settled, once.
  if (row.status === 'answered') return [call({ type: 'Settle', kept: row.kept })];
  if (!batchRuns(s.batch, now)) return [complete()];
  if (row.attempt < epoch) {
    // The attempt before was a worker's that is gone: its hold, if it placed one, is released first.
    return row.status === 'running' ? [call({ type: 'Release', holdId: holdOf(s, row.attempt) })] : [send({ type: 'BeginAttempt', attempt: epoch })];
  }
  const id = resultLineId(s.batchId, s.line);
  if (s.request === null) {
    const error = { code: 'request_unreadable', message: 'The line can no longer be read: the service encryption key changed.' };
    return finish(epoch, 'failed', { id, custom_id: '', response: null, error });
  }
  if (epoch > MAX_LINE_ATTEMPTS) {
    const error = { code: 'request_failed', message: `The request was cut short ${MAX_LINE_ATTEMPTS} times by the service; it was not billed.` };
    return finish(epoch, 'failed', { id, custom_id: s.request.custom_id, response: null, error });
  }
  return [call({ type: 'Answer', holdId: holdOf(s, epoch) })];
}

export const lineWorkflow: Workflow<LineInput, LineWorkflowState, LineCommand, LineEffect, LineEvent> = {
  kind: BATCH_LINE_JOB,
  decide(input: LineInput | Due, s, now) {
    const id = resultLineId(s.batchId, s.line);
    const customId = s.request?.custom_id ?? '';
    switch (input.type) {
      case 'Due':
        return onDue(s, now);
      case 'Released':
        return s.row !== null && s.row.attempt < s.epoch ? [send({ type: 'BeginAttempt', attempt: s.epoch })] : [complete()];
      case 'Answered': {
        const result = { id, custom_id: customId, response: { status_code: 200, request_id: input.requestId, body: input.body }, error: null };
        // The answer and its settlement are kept first: a crash after this is settled by whoever takes the line.
        return [send({ type: 'KeepAnswer', attempt: s.epoch, result, kept: input.kept }), call({ type: 'Settle', kept: input.kept })];
      }
      case 'Refused':
        return finish(s.epoch, 'failed', {
          id,
          custom_id: customId,
          response: { status_code: input.statusCode, request_id: input.requestId ?? holdOf(s, s.epoch), body: input.body },
          error: null,
        });
      case 'Settled':
        return finish(s.row?.attempt ?? s.epoch, 'completed');
    }
  },
  evolve(s, event) {
    const row = s.row ?? { status: 'pending' as const, attempt: 0, kept: null };
    switch (event.type) {
      case 'AttemptBegun':
        return { ...s, row: { status: 'running', attempt: event.data.attempt, kept: null } };
      case 'AnswerKept':
        return { ...s, row: { ...row, status: 'answered', kept: event.data.kept } };
      case 'LineFinished':
        return { ...s, row: { ...row, status: 'done' } };
    }
  },
};
