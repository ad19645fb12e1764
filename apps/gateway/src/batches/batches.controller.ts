import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, UseGuards } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import {
  BatchInput,
  BatchLines,
  batchDecider,
  type BatchCommand,
  type BatchEndpoint,
  batchStream,
  createBatchRequest,
  isTerminal,
  type BatchRow,
  getBatch,
  listBatches,
} from '@svc/batches';
import { AGGREGATE_STORE, type AggregateStore } from '@svc/eventstore';
import { fileNotFound, filesUnavailable, readJsonl, SqlFileStore } from '@svc/files';
import type { Caller } from '@svc/identity';
import { ApiError, CLOCK, DomainError, type Clock, CONFIG, type Config, READ_DB, type SqlRunner } from '@svc/platform';
import { PROJECTIONS, type ProjectionRunner } from '@svc/projections';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { listPage, pageQuery } from '../http/pagination';

const BATCH_ID = /^batch_[0-9a-f]{24}$/;

/**
 * Spec 4.11, OpenAI's Batch API: a batch of chat completions or embeddings, run by the workers
 * within 24 hours, each line billed at the batch discount (spec 1 rule 6). The input file is
 * checked when the batch is created, so a file the batch could not run is a 400 naming
 * `input_file_id` (with the lines at fault), and nothing is recorded.
 */
@Controller('v1/batches')
@UseGuards(ApiKeyGuard)
export class BatchesController {
  private readonly files: SqlFileStore;
  private readonly lines: BatchLines;

  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(CONFIG) config: Config,
    @Inject(READ_DB) private readonly sql: SqlRunner,
    @Inject(AGGREGATE_STORE) private readonly aggregates: AggregateStore,
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
  ) {
    this.files = new SqlFileStore(sql, () => config.encryptionKey, clock);
    this.lines = new BatchLines(sql, () => config.encryptionKey);
  }

  @Post()
  @HttpCode(200)
  @Requires('model_call')
  async create(@CallerParam() caller: Caller, @Body() body: unknown) {
    const request = createBatchRequest(body);
    if (!this.files.available) throw filesUnavailable();
    const file = await this.files.get(caller.workspaceId, request.inputFileId);
    if (!file) throw asInvalid(fileNotFound(request.inputFileId, 'input_file_id'));
    if (file.purpose !== 'batch')
      throw ApiError.invalidRequest(
        `File ${file.id} has purpose ${file.purpose}; a batch reads a file uploaded with purpose batch.`,
        'input_file_id',
        'invalid_file_purpose',
      );
    await this.checkInput(caller, request.inputFileId, request.endpoint);
    const batchId = `batch_${randomBytes(12).toString('hex')}`;
    await this.decide({ type: 'CreateBatch', batchId, accountId: caller.accountId, workspaceId: caller.workspaceId, keyId: caller.keyId, ...request }, caller);
    // The workers read it now rather than at their next look (which finds it all the same).
    await this.lines.wake(batchId, this.clock.now());
    return this.present(await this.find(caller, batchId));
  }

  /** OpenAI's cursor list, newest first: `limit` 1-100 (default 20), `after`. */
  @Get()
  @Requires('lookup')
  async list(@CallerParam() caller: Caller, @Query() query: Record<string, unknown>) {
    const page = pageQuery(query.limit, query.after, { max: 100, fallback: 20, isId: (id) => BATCH_ID.test(id), what: 'a batch id' });
    const rows = await listBatches(this.sql, caller.workspaceId, page.after, page.fetch);
    const counts = await this.lines.counts(rows.filter((r) => !isTerminal(r.status)).map((r) => r.batchId));
    return listPage(
      rows,
      page.limit,
      (row) => row.batchId,
      (row) => presentBatch(row, counts.get(row.batchId)),
    );
  }

  @Get(':id')
  @Requires('lookup')
  async retrieve(@CallerParam() caller: Caller, @Param('id') id: string) {
    return this.present(await this.find(caller, id));
  }

  /** Lines running finish (and are billed); the others do not run; the batch ends `cancelled` with what finished. */
  @Post(':id/cancel')
  @HttpCode(200)
  @Requires('model_call')
  async cancel(@CallerParam() caller: Caller, @Param('id') id: string) {
    const batch = await this.find(caller, id);
    if (isTerminal(batch.status)) {
      throw new ApiError(
        409,
        'invalid_request_error',
        `Batch ${id} is ${batch.status}: only a batch that has not ended can be cancelled.`,
        'batch_not_cancellable',
        'id',
      );
    }
    await this.decide({ type: 'RequestCancel', batchId: id }, caller);
    await this.lines.wake(id, this.clock.now());
    return this.present(await this.find(caller, id));
  }

  /** Every line read as the batch will read it: the problems are the caller's to fix before anything runs. */
  private async checkInput(caller: Caller, fileId: string, endpoint: BatchEndpoint): Promise<void> {
    const input = new BatchInput(endpoint, false);
    for await (const { line, value } of readJsonl(this.files.content(caller.workspaceId, fileId))) input.addParsed(value, line);
    const { errors } = input.result();
    if (errors.length === 0) return;
    const shown = errors.slice(0, 5).map((e) => e.message);
    const more = errors.length > shown.length ? ` (and ${errors.length - shown.length} more)` : '';
    throw ApiError.invalidRequest(`The input file cannot run as a batch: ${shown.join(' ')}${more}`, 'input_file_id', errors[0].code);
  }

  /** Decides on the batch's stream and waits until the batches read model shows it (read your writes). */
  private async decide(command: BatchCommand, caller: Caller): Promise<void> {
    const handled = await this.aggregates.handle(batchDecider, batchStream(command.batchId), command, {
      actor: `key:${caller.keyId}`,
      correlationId: command.batchId,
    });
    if (handled.appended) await this.projections.waitFor(handled.appended.position, ['batches']);
  }

  private async find(caller: Caller, id: string): Promise<BatchRow> {
    const row = BATCH_ID.test(id) ? await getBatch(this.sql, caller.workspaceId, id) : null;
    if (!row) throw ApiError.notFound(`No batch with id '${id}' exists for this workspace.`, 'batch_not_found', 'id');
    return row;
  }

  private async present(row: BatchRow) {
    const counts = isTerminal(row.status) ? undefined : (await this.lines.counts([row.batchId])).get(row.batchId);
    return presentBatch(row, counts);
  }
}

/** An unknown input file is the request's mistake (400), as OpenAI answers it, not a missing route. */
function asInvalid(err: DomainError): DomainError {
  return DomainError.invalid(err.message, err.param, err.code);
}

const unix = (at: Date | null) => (at === null ? null : Math.floor(at.getTime() / 1000));

/** OpenAI's batch object (WIRE-FORMATS 1.2); a running batch's counts are its lines' so far. */
function presentBatch(row: BatchRow, live?: { completed: number; failed: number }) {
  const counts = isTerminal(row.status) ? { completed: row.completed, failed: row.failed } : (live ?? { completed: 0, failed: 0 });
  return {
    id: row.batchId,
    object: 'batch' as const,
    endpoint: row.endpoint,
    errors: row.errors === null ? null : { object: 'list' as const, data: row.errors },
    input_file_id: row.inputFileId,
    completion_window: row.completionWindow,
    status: row.status,
    output_file_id: row.outputFileId,
    error_file_id: row.errorFileId,
    created_at: unix(row.createdAt),
    in_progress_at: unix(row.inProgressAt),
    expires_at: unix(row.expiresAt),
    finalizing_at: unix(row.finalizingAt),
    completed_at: unix(row.completedAt),
    failed_at: unix(row.failedAt),
    expired_at: unix(row.expiredAt),
    cancelling_at: unix(row.cancellingAt),
    cancelled_at: unix(row.cancelledAt),
    request_counts: { total: row.total, ...counts },
    metadata: row.metadata,
  };
}
