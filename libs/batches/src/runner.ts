/**
 * The worker side of batches (spec 4.11, 3.2, 1 rule 6): reads each new batch's input file into
 * its lines, runs the lines through the metering pipeline (each its own hold and charge), and
 * ends the batch with its output and error files. Every worker runs one; they share the work
 * through the lines' leases (./lines), and the batch stream's decider keeps each phase to once.
 *
 * Lines run concurrently, at most `perAccount` of one account at a time in this worker, so one
 * account's huge batch does not hold back another account's small one.
 */
import { DomainError } from '@svc/eventstore';
import type { Clock } from '@svc/platform';
import type { BatchCommand, BatchEndpoint, BatchStatus } from './batch';
import { BatchInput } from './input';
import { type BatchLines, type BatchResultLine, type ClaimedLine, lineHoldId, resultLineId } from './lines';

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
  lines: BatchLines;
  files: BatchFiles;
  calls: LineCalls;
  /** The batches with something to do. */
  active(): Promise<ActiveBatch[]>;
  /** Decides `command` on the batch's stream. */
  decide(command: BatchCommand): Promise<void>;
  /** This worker's name in the leases. */
  owner: string;
  /** Longer than a line can take (the upstream timeout), so a live worker's lease never lapses mid-line. */
  leaseMs: number;
  /** Lines of one account this worker runs at once. */
  perAccount: number;
  warn(message: string): void;
  /** Runs one attempt of a line inside a trace of its own (its hold, upstream and charge spans); absent without tracing. */
  trace?<T>(name: string, attributes: Record<string, string | number>, fn: () => Promise<T>): Promise<T>;
}

/** Past this many attempts (each cut short by a crash or an outage) a line fails instead. */
export const MAX_LINE_ATTEMPTS = 5;

export class BatchRunner {
  private readonly inFlight = new Map<string, number>();
  /** Lines of each batch this worker is running: a batch ends only once none is (whatever their leases say). */
  private readonly batchInFlight = new Map<string, number>();
  /** Each batch's status as the last pass saw it: a line that ends refills its slot only while its batch still runs. */
  private readonly statuses = new Map<string, BatchStatus>();
  private readonly running = new Set<Promise<void>>();
  private stopping = false;

  constructor(private readonly deps: BatchRunnerDeps) {}

  /**
   * One pass: new batches validated, ended ones finalized, and free slots filled with lines.
   * The lines run on after it resolves (see `idle`).
   */
  async runOnce(): Promise<void> {
    if (this.stopping) return;
    const now = this.deps.clock.now();
    const batches = await this.deps.active();
    this.statuses.clear();
    for (const batch of batches) this.statuses.set(batch.batchId, batch.status);
    for (const batch of batches.filter((b) => b.status === 'validating')) await this.validate(batch);
    const running = batches.filter((b) => b.status === 'in_progress' && b.expiresAt > now);
    // Cancelled, expiring or finalizing: nothing new runs; answers left unsettled are settled, then the files are written.
    const ending = batches.filter((b) => b.status === 'cancelling' || b.status === 'finalizing' || (b.status === 'in_progress' && b.expiresAt <= now));
    await this.fill(ending, true);
    for (const batch of ending) await this.finalize(batch);
    await this.fill(running, false);
    for (const batch of running) {
      const progress = await this.deps.lines.progress(batch.batchId, now);
      if (progress.waiting === 0 && progress.held === 0) await this.finalize(batch);
    }
  }

  /** Resolves once the lines this worker started have ended. */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }

  /** Starts nothing more and waits for the lines running. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.idle();
  }

  /** Reads the input file into the batch's lines, or fails the batch with its problems (with their line numbers). */
  private async validate(batch: ActiveBatch): Promise<void> {
    const { batchId } = batch;
    const content = await this.deps.files.input(batch);
    if (content === null) {
      const errors = [{ code: 'file_not_found', message: `The input file ${batch.inputFileId} no longer exists.`, line: null, param: 'input_file_id' }];
      return this.decideOnce({ type: 'RecordValidation', batchId, total: 0, errors });
    }
    const input = new BatchInput(batch.endpoint);
    for await (const { line, value } of content) input.addParsed(value, line);
    const { lines, errors } = input.result();
    // Stored before the batch starts: a crash in between stores them again, unchanged.
    await this.deps.lines.add(batchId, lines);
    await this.decideOnce({ type: 'RecordValidation', batchId, total: lines.length, errors });
  }

  /** Claims lines of `batches` up to each account's free slots, and starts them. */
  private async fill(batches: readonly ActiveBatch[], answeredOnly: boolean): Promise<void> {
    const byAccount = new Map<string, ActiveBatch[]>();
    for (const batch of batches) byAccount.set(batch.accountId, [...(byAccount.get(batch.accountId) ?? []), batch]);
    for (const [accountId, own] of byAccount) {
      const free = this.deps.perAccount - (this.inFlight.get(accountId) ?? 0);
      if (free <= 0 || this.stopping) continue;
      const now = this.deps.clock.now();
      const claimed = await this.deps.lines.claim(
        own.map((b) => b.batchId),
        this.deps.owner,
        now,
        this.leaseFrom(now),
        free,
        answeredOnly,
      );
      const byId = new Map(own.map((b) => [b.batchId, b]));
      for (const line of claimed) this.start(byId.get(line.batchId) as ActiveBatch, line);
    }
  }

  private start(batch: ActiveBatch, line: ClaimedLine): void {
    this.inFlight.set(batch.accountId, (this.inFlight.get(batch.accountId) ?? 0) + 1);
    this.batchInFlight.set(batch.batchId, (this.batchInFlight.get(batch.batchId) ?? 0) + 1);
    const { trace } = this.deps;
    const attempt = () => this.runLine(batch, line);
    const attributes = { 'svc.batch_id': batch.batchId, 'svc.batch_line': line.line, 'svc.attempt': line.attempt, 'svc.account_id': batch.accountId };
    const run = (trace ? trace('batch line', attributes, attempt) : attempt())
      .catch((err: unknown) =>
        this.deps.warn(`batch ${batch.batchId} line ${line.line}: ${err instanceof Error ? err.message : String(err)}; it is tried again once its lease ends`),
      )
      .finally(() => {
        this.inFlight.set(batch.accountId, (this.inFlight.get(batch.accountId) ?? 1) - 1);
        this.batchInFlight.set(batch.batchId, (this.batchInFlight.get(batch.batchId) ?? 1) - 1);
        this.running.delete(run);
        // A slot is free: the next line need not wait for the next pass, unless the batch was cancelled or ran out of time.
        if (!this.stopping && this.statuses.get(batch.batchId) === 'in_progress' && batch.expiresAt > this.deps.clock.now()) {
          void this.fill([batch], false).catch(() => undefined);
        }
      });
    this.running.add(run);
  }

  private async runLine(batch: ActiveBatch, claimed: ClaimedLine): Promise<void> {
    const { lines, calls, owner } = this.deps;
    if (claimed.status === 'answered') {
      // A worker answered it and stopped before settling: settle what it kept, once.
      await calls.settle(batch, claimed.kept);
      await lines.finish(claimed, owner, 'completed');
      return;
    }
    // The attempt before this one was a worker's that is gone: its hold, if it placed one, is released.
    if (claimed.attempt > 1) await calls.release(batch, lineHoldId(batch.batchId, claimed.line, claimed.attempt - 1));
    const request = await lines.request(batch.batchId, claimed.line);
    const id = resultLineId(batch.batchId, claimed.line);
    if (request === null) {
      await lines.finish(claimed, owner, 'failed', {
        id,
        custom_id: '',
        response: null,
        error: { code: 'request_unreadable', message: 'The line can no longer be read: the service encryption key changed.' },
      });
      return;
    }
    if (claimed.attempt > MAX_LINE_ATTEMPTS) {
      const error = { code: 'request_failed', message: `The request was cut short ${MAX_LINE_ATTEMPTS} times by the service; it was not billed.` };
      await lines.finish(claimed, owner, 'failed', { id, custom_id: request.custom_id, response: null, error });
      return;
    }
    const holdId = lineHoldId(batch.batchId, claimed.line, claimed.attempt);
    const answer = await calls.answer(batch, request.body, holdId);
    if (!answer.answered) {
      const result: BatchResultLine = {
        id,
        custom_id: request.custom_id,
        response: { status_code: answer.statusCode, request_id: answer.requestId ?? holdId, body: answer.body },
        error: null,
      };
      await lines.finish(claimed, owner, 'failed', result);
      return;
    }
    const result: BatchResultLine = {
      id,
      custom_id: request.custom_id,
      response: { status_code: 200, request_id: answer.requestId, body: answer.body },
      error: null,
    };
    // The answer and its settlement are kept first: a crash after this is settled by whoever takes the line.
    if (!(await lines.keepAnswer(claimed, owner, this.leaseFrom(this.deps.clock.now()), result, answer.kept))) {
      await calls.release(batch, holdId);
      return;
    }
    await calls.settle(batch, answer.kept);
    await lines.finish(claimed, owner, 'completed');
  }

  /**
   * Ends a batch whose lines are all done, or which was cancelled or ran out of time, once no
   * worker holds any of its lines: the result files, then the end on its stream. Lines that
   * never ran are listed in the error file with OpenAI's `batch_cancelled` / `batch_expired`.
   */
  private async finalize(batch: ActiveBatch): Promise<void> {
    const now = this.deps.clock.now();
    const progress = await this.deps.lines.progress(batch.batchId, now);
    if (progress.held > 0 || (this.batchInFlight.get(batch.batchId) ?? 0) > 0) return;
    if (batch.status === 'in_progress' && progress.waiting > 0 && batch.expiresAt > now) return;
    if (batch.status === 'in_progress') await this.decideOnce({ type: 'BeginFinalizing', batchId: batch.batchId });
    const notRun = batch.status === 'cancelling' ? 'batch_cancelled' : 'batch_expired';
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
      // Never run, or left running by a worker that is gone: not billed (its hold is released).
      if (row.status === 'running') await this.deps.calls.release(batch, lineHoldId(batch.batchId, row.line, row.attempt));
      const message = notRun === 'batch_cancelled' ? 'The batch was cancelled before this request ran.' : 'The batch expired before this request ran.';
      errors.push({ id: resultLineId(batch.batchId, row.line), custom_id: row.customId ?? '', response: null, error: { code: notRun, message } });
    }
    const written: string[] = [];
    const write = async (name: string, results: BatchResultLine[]) => {
      if (results.length === 0) return null;
      const id = await this.deps.files.write(batch, `${batch.batchId}_${name}.jsonl`, jsonl(results));
      written.push(id);
      return id;
    };
    const outputFileId = await write('output', output);
    const errorFileId = await write('error', errors);
    try {
      await this.deps.decide({ type: 'FinishBatch', batchId: batch.batchId, completed, failed, outputFileId, errorFileId });
    } catch (err) {
      // Another worker ended it first: its files are the batch's, these are not.
      for (const id of written) await this.deps.files.remove(batch, id);
      if (err instanceof DomainError && (err.code === 'batch_invalid_state' || err.code === 'batch_unfinished')) return;
      throw err;
    }
    await this.deps.lines.remove(batch.batchId);
  }

  /** A phase another worker may have decided already: its refusal is not a failure. */
  private async decideOnce(command: BatchCommand): Promise<void> {
    try {
      await this.deps.decide(command);
    } catch (err) {
      if (err instanceof DomainError && err.code === 'batch_invalid_state') return;
      throw err;
    }
  }

  private leaseFrom(now: Date): Date {
    return new Date(now.getTime() + this.deps.leaseMs);
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
