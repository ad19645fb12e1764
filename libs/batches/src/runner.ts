/**
 * The worker side of batches (spec 4.11, 3.2, 1 rule 6) on the job table (ARCHITECTURE section
 * 11): the batch workflow (./batch-workflow) reads each new batch's input file into its lines
 * and ends the batch with its output and error files; the line workflow (./line-workflow) runs
 * each line through the metering pipeline (its own hold and charge). The deciders choose; this
 * file is what their steps do for real. Every worker runs one, and they share the work through
 * the jobs' leases.
 *
 * Lines are claimed per account, at most `perAccount` of one account at a time in this worker,
 * so one account's huge batch does not hold back another account's small one.
 */
import { DomainError } from '@svc/eventstore';
import { WorkflowProcessor, type JobQueue, type Lease } from '@svc/jobs';
import type { Clock } from '@svc/platform';
import type { BatchCommand, BatchEvent, BatchState } from './batch';
import { BATCH_JOB, batchWorkflow, type ActiveBatch, type BatchEffect, type BatchWorkflowInput, type BatchWorkflowState } from './batch-workflow';
import { BatchInput } from './input';
import type { BatchLines } from './lines';
import {
  BATCH_LINE_JOB,
  batchRuns,
  lineHoldId,
  lineOfJob,
  lineWorkflow,
  resultLineId,
  type BatchResultLine,
  type LineCommand,
  type LineEffect,
  type LineEvent,
  type LineInput,
  type LineWorkflowState,
} from './line-workflow';

/** The batch the line calls (./line-calls) are made for, named where they take it from. */
export type { ActiveBatch } from './batch-workflow';

/** One line's call through the pipeline, stopped before its settlement. */
export type LineAnswer =
  /** 200: the body to write, and what its settlement needs (plain data, kept before it is made). */
  | { answered: true; body: unknown; requestId: string; kept: unknown }
  /** The error the endpoint would have answered: nothing held, or the hold released. */
  | { answered: false; statusCode: number; body: unknown; requestId: string | null };

/** The gateway's pipeline, as a batch's lines use it. */
export interface LineCalls {
  /**
   * The line's request, held under `holdId` (outside the per-minute limits, at the batch
   * discount) and answered. Resolves with the endpoint's error for a request it refuses; throws
   * only when the service itself failed (the database), so the line is tried again.
   */
  answer(batch: ActiveBatch, body: Record<string, unknown>, holdId: string): Promise<LineAnswer>;
  /** Settles a kept answer; a hold no longer open was settled already. */
  settle(batch: ActiveBatch, kept: unknown): Promise<void>;
  /** Releases the hold of an attempt abandoned by a worker that is gone; a hold not open is left. */
  release(batch: ActiveBatch, holdId: string): Promise<void>;
}

export interface BatchFiles {
  /** The content of the input file, or null when it is gone. */
  input(batch: ActiveBatch): Promise<AsyncIterable<{ line: number; value: Record<string, unknown> }> | null>;
  /** Writes a result file (`batch_output`) and resolves with its id. */
  write(batch: ActiveBatch, name: string, lines: AsyncIterable<Buffer>): Promise<string>;
  remove(batch: ActiveBatch, fileId: string): Promise<void>;
}

export interface BatchRunnerDeps {
  clock: Clock;
  queue: Pick<JobQueue, 'claim' | 'reschedule' | 'complete' | 'ensure'>;
  lines: BatchLines;
  files: BatchFiles;
  calls: LineCalls;
  /** The batches with something to do. */
  active(): Promise<ActiveBatch[]>;
  /** The batch's stream. */
  load(batchId: string): Promise<BatchState>;
  /** Decides `command` on the batch's stream; resolves with the events recorded. */
  decide(command: BatchCommand): Promise<BatchEvent[]>;
  /** This worker's name in the leases. */
  owner: string;
  /** Longer than a line can take (the upstream timeout), so a live worker's lease never lapses mid-line. */
  leaseMs: number;
  /** Lines of one account this worker runs at once. */
  perAccount: number;
  warn(message: string): void;
  /** Runs one step of a line inside a trace of its own (its hold, upstream and charge spans); absent without tracing. */
  trace?<T>(name: string, attributes: Record<string, string | number>, fn: () => Promise<T>): Promise<T>;
}

/** Batches one pass of this worker validates or ends at once. */
const BATCH_CONCURRENCY = 4;

export class BatchRunner {
  private readonly batches: WorkflowProcessor<BatchWorkflowInput, BatchWorkflowState, BatchCommand, BatchEffect, BatchEvent>;
  private readonly lines: WorkflowProcessor<LineInput, LineWorkflowState, LineCommand, LineEffect, LineEvent>;
  /** The batches the read model showed running at the last pass. */
  private active = new Map<string, ActiveBatch>();
  /** The batch each line this worker holds was claimed for. */
  private readonly claimedFor = new Map<string, ActiveBatch>();
  private readonly inFlight = new Map<string, number>();
  private readonly running = new Set<Promise<void>>();
  private readonly waking = new Set<string>();
  private readonly wakeAgain = new Set<string>();
  private stopping = false;

  constructor(private readonly deps: BatchRunnerDeps) {
    const { clock, queue, owner, leaseMs, warn } = deps;
    this.batches = new WorkflowProcessor(
      batchWorkflow,
      {
        load: async (job) => {
          const [batch, lines] = await Promise.all([deps.load(job.key), deps.lines.progress(job.key, clock.now())]);
          return { batchId: job.key, batch, active: this.active.get(job.key) ?? null, lines };
        },
        send: (_job, command) => this.record(command),
        call: (job, effect, state) => this.batchEffect(job, effect, state),
      },
      { clock, queue, owner, leaseMs, concurrency: BATCH_CONCURRENCY, warn },
    );
    this.lines = new WorkflowProcessor(
      lineWorkflow,
      {
        load: async (job) => {
          const { batchId, line } = lineOfJob(job.key);
          const { row, request } = await deps.lines.line(batchId, line);
          const batch = this.active.get(batchId) ?? this.claimedFor.get(job.key) ?? null;
          return { batchId, line, batch, row, request, epoch: job.epoch };
        },
        send: (job, command) => this.recordLine(job, command),
        call: (job, effect, state) => this.lineEffect(job, effect, state),
      },
      { clock, queue, owner, leaseMs, concurrency: deps.perAccount, warn },
    );
  }

  /**
   * One pass: the batches due validated or ended, and free slots filled with lines. The lines
   * run on after it resolves (see `idle`). Resolves with how many batches are under way.
   */
  async runOnce(): Promise<number> {
    if (this.stopping) return 0;
    const batches = await this.deps.active();
    this.active = new Map(batches.map((b) => [b.batchId, b]));
    // Every batch the read model shows running has its job, one whose first ask was lost (its gateway died) too.
    await this.deps.queue.ensure(
      BATCH_JOB,
      batches.map((b) => b.batchId),
      this.deps.clock.now(),
    );
    await Promise.all([this.batches.runOnce(), this.fill(batches.filter((b) => b.status !== 'validating'))]);
    return batches.length;
  }

  /** Resolves once the lines this worker started have ended. */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }

  /** Starts nothing more and waits for the steps under way. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.batches.stop();
    await this.idle();
  }

  /** Claims lines of `batches` up to each account's free slots, and starts them. */
  private async fill(batches: readonly ActiveBatch[]): Promise<void> {
    const byAccount = new Map<string, ActiveBatch[]>();
    for (const batch of batches) byAccount.set(batch.accountId, [...(byAccount.get(batch.accountId) ?? []), batch]);
    for (const [accountId, own] of byAccount) {
      const free = this.deps.perAccount - (this.inFlight.get(accountId) ?? 0);
      if (free <= 0 || this.stopping) continue;
      const now = this.deps.clock.now();
      const claimed = await this.deps.queue.claim(
        BATCH_LINE_JOB,
        this.deps.owner,
        now,
        new Date(now.getTime() + this.deps.leaseMs),
        free,
        own.map((b) => b.batchId),
      );
      const byId = new Map(own.map((b) => [b.batchId, b]));
      for (const job of claimed) this.start(byId.get(lineOfJob(job.key).batchId) as ActiveBatch, job);
    }
  }

  private start(batch: ActiveBatch, job: Lease): void {
    this.inFlight.set(batch.accountId, (this.inFlight.get(batch.accountId) ?? 0) + 1);
    this.claimedFor.set(job.key, batch);
    const { trace } = this.deps;
    const { line } = lineOfJob(job.key);
    const step = () => this.lines.step(job);
    const attributes = { 'svc.batch_id': batch.batchId, 'svc.batch_line': line, 'svc.attempt': job.epoch, 'svc.account_id': batch.accountId };
    const run = (trace ? trace('batch line', attributes, step) : step())
      .catch((err: unknown) =>
        this.deps.warn(`batch ${batch.batchId} line ${line}: ${err instanceof Error ? err.message : String(err)}; it is tried again once its lease ends`),
      )
      .finally(() => {
        // The batch looks at its lines again: this one may have been the last it waited for.
        this.wake(batch.batchId);
        this.inFlight.set(batch.accountId, (this.inFlight.get(batch.accountId) ?? 1) - 1);
        this.claimedFor.delete(job.key);
        this.running.delete(run);
        // A slot is free: the next line need not wait for the next pass, unless the batch was cancelled or ran out of time.
        const current = this.active.get(batch.batchId) ?? null;
        if (!this.stopping && batchRuns(current, this.deps.clock.now())) void this.fill([current as ActiveBatch]).catch(() => undefined);
      });
    this.running.add(run);
  }

  /**
   * Wakes a batch, off the lines' way: one wake of a batch at a time from this worker, and one
   * more after it when lines ended meanwhile (the wake under way may have read the job before them).
   */
  private wake(batchId: string): void {
    if (this.waking.has(batchId)) {
      this.wakeAgain.add(batchId);
      return;
    }
    this.waking.add(batchId);
    void this.deps.lines
      .wake(batchId, this.deps.clock.now())
      .catch(() => undefined)
      .finally(() => {
        this.waking.delete(batchId);
        if (this.wakeAgain.delete(batchId)) this.wake(batchId);
      });
  }

  /** A conditional write on the line's row, as the event it stands for; refused when the line moved on. */
  private async recordLine(job: Lease, command: LineCommand): Promise<LineEvent[]> {
    const { batchId, line } = lineOfJob(job.key);
    const { lines } = this.deps;
    let event: LineEvent | null = null;
    switch (command.type) {
      case 'BeginAttempt':
        if (await lines.begin(batchId, line, command.attempt)) event = { type: 'AttemptBegun', data: { attempt: command.attempt } };
        break;
      case 'KeepAnswer':
        if (await lines.keepAnswer(batchId, line, command.attempt, command.result, command.kept)) event = { type: 'AnswerKept', data: { kept: command.kept } };
        break;
      case 'FinishLine':
        if (await lines.finish(batchId, line, command.attempt, command.outcome, command.result))
          event = { type: 'LineFinished', data: { outcome: command.outcome } };
        break;
    }
    if (event === null) throw new DomainError('batch_line_moved_on', `Line ${line} of batch ${batchId} is no longer at attempt ${command.attempt}.`);
    return [event];
  }

  private async lineEffect(job: Lease, effect: LineEffect, state: LineWorkflowState): Promise<LineInput> {
    const batch = state.batch ?? this.claimedFor.get(job.key);
    if (!batch) throw new Error(`batch ${state.batchId} is not running`);
    const { calls } = this.deps;
    switch (effect.type) {
      case 'Answer': {
        const answer = await calls.answer(batch, state.request?.body ?? {}, effect.holdId);
        return answer.answered
          ? { type: 'Answered', body: answer.body, requestId: answer.requestId, kept: answer.kept }
          : { type: 'Refused', statusCode: answer.statusCode, body: answer.body, requestId: answer.requestId };
      }
      case 'Settle':
        await calls.settle(batch, effect.kept);
        return { type: 'Settled' };
      case 'Release':
        await calls.release(batch, effect.holdId);
        return { type: 'Released' };
    }
  }

  /** Decides on the batch's stream; an end refused (the batch ended otherwise) leaves no files of its own behind. */
  private async record(command: BatchCommand): Promise<BatchEvent[]> {
    try {
      return await this.deps.decide(command);
    } catch (err) {
      const batch = this.active.get(command.batchId);
      if (command.type === 'FinishBatch' && batch) {
        for (const id of [command.outputFileId, command.errorFileId]) if (id !== null) await this.deps.files.remove(batch, id);
      }
      throw err;
    }
  }

  private async batchEffect(job: Lease, effect: BatchEffect, state: BatchWorkflowState): Promise<BatchWorkflowInput> {
    const batch = state.active as ActiveBatch;
    switch (effect.type) {
      case 'Validate':
        return this.validate(batch);
      case 'DropUnrun':
        await this.deps.lines.dropUnrun(job.key, this.deps.clock.now());
        return { type: 'Dropped' };
      case 'WriteResults':
        return this.writeResults(batch, effect.notRun);
      case 'Forget':
        await this.deps.lines.remove(job.key);
        return { type: 'Forgotten' };
    }
  }

  /** Reads the input file into the batch's lines, or finds its problems (with their line numbers). */
  private async validate(batch: ActiveBatch): Promise<BatchWorkflowInput> {
    const content = await this.deps.files.input(batch);
    if (content === null) {
      const errors = [{ code: 'file_not_found', message: `The input file ${batch.inputFileId} no longer exists.`, line: null, param: 'input_file_id' }];
      return { type: 'Validated', total: 0, errors };
    }
    const input = new BatchInput(batch.endpoint);
    for await (const { line, value } of content) input.addParsed(value, line);
    const { lines, errors } = input.result();
    // Stored before the batch starts: a crash in between stores them again, unchanged.
    if (errors.length === 0) await this.deps.lines.add(batch.batchId, lines, this.deps.clock.now());
    return { type: 'Validated', total: lines.length, errors };
  }

  /**
   * The result files of a batch none of whose lines runs any more. Lines that never ran are
   * listed in the error file with OpenAI's `batch_cancelled` / `batch_expired`; one left running
   * by a worker that is gone is not billed (its hold is released).
   */
  private async writeResults(batch: ActiveBatch, notRun: 'batch_cancelled' | 'batch_expired'): Promise<BatchWorkflowInput> {
    const output: BatchResultLine[] = [];
    const errors: BatchResultLine[] = [];
    let completed = 0;
    let failed = 0;
    for await (const row of this.deps.lines.results(batch.batchId)) {
      if (row.status === 'done' && row.result) {
        (row.outcome === 'completed' ? output : errors).push(row.result);
        if (row.outcome === 'completed') completed++;
        else failed++;
        continue;
      }
      if (row.status === 'running') await this.deps.calls.release(batch, lineHoldId(batch.batchId, row.line, row.attempt));
      const message = notRun === 'batch_cancelled' ? 'The batch was cancelled before this request ran.' : 'The batch expired before this request ran.';
      errors.push({ id: resultLineId(batch.batchId, row.line), custom_id: row.customId ?? '', response: null, error: { code: notRun, message } });
    }
    const write = async (name: string, results: BatchResultLine[]) =>
      results.length === 0 ? null : this.deps.files.write(batch, `${batch.batchId}_${name}.jsonl`, jsonl(results));
    const outputFileId = await write('output', output);
    const errorFileId = await write('error', errors);
    return { type: 'Written', completed, failed, outputFileId, errorFileId };
  }
}

async function* jsonl(lines: readonly BatchResultLine[]): AsyncIterable<Buffer> {
  let chunk: string[] = [];
  for (const line of lines) {
    chunk.push(JSON.stringify(line));
    if (chunk.length === 200) {
      yield Buffer.from(`${chunk.join('\n')}\n`);
      chunk = [];
    }
  }
  if (chunk.length > 0) yield Buffer.from(`${chunk.join('\n')}\n`);
}
