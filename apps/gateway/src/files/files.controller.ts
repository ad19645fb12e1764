import { Controller, Delete, Get, HttpCode, Inject, Param, Post, Query, Req, Res, UseGuards } from '@nestjs/common';
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Caller } from '@svc/identity';
import {
  expiresAfterSeconds,
  fileNotFound,
  filesUnavailable,
  isFileId,
  MAX_FILE_BYTES,
  SqlFileStore,
  UPLOAD_PURPOSES,
  type FileRecord,
  type StagedFile,
} from '@svc/files';
import { ApiError, CLOCK, type Clock, CONFIG, type Config, READ_DB, type SqlRunner } from '@svc/platform';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { FILE_FIELD, formParts } from '../http/multipart';
import { listPage, pageQuery } from '../http/pagination';

/** The text fields of an upload (OpenAI's bracketed encoding of `expires_after`). */
const FORM_FIELDS = new Set(['purpose', 'expires_after[anchor]', 'expires_after[seconds]']);
const EXPIRES_AFTER_PARAMS = { anchor: 'expires_after[anchor]', seconds: 'expires_after[seconds]' };

/**
 * Spec 4.11, OpenAI's Files API: batch input files, and the output files batches write. Uploads
 * are free, as are reads; the content is kept encrypted (libs/files). Every key of the workspace
 * sees its files; another workspace's file is not found, never forbidden.
 */
@Controller('v1/files')
@UseGuards(ApiKeyGuard)
export class FilesController {
  private readonly files: SqlFileStore;

  constructor(@Inject(CLOCK) clock: Clock, @Inject(CONFIG) config: Config, @Inject(READ_DB) sql: SqlRunner) {
    this.files = new SqlFileStore(sql, () => config.encryptionKey, clock);
  }

  /**
   * Fields come in any order (the openai SDK may send `file` first): the file streams into the
   * store as it arrives, unpublished, and is published once the rest of the form is read and
   * valid, or discarded with the form.
   */
  @Post()
  @HttpCode(200)
  @Requires('model_call')
  async upload(@CallerParam() caller: Caller, @Req() request: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply) {
    if (!request.isMultipart())
      throw new ApiError(
        415,
        'invalid_request_error',
        'Send the file as a multipart/form-data form with a file part named file and a purpose field.',
        'unsupported_media_type',
        'Content-Type',
      );
    if (!this.files.available) throw filesUnavailable();
    const fields = new Map<string, string>();
    let staged: StagedFile | null = null;
    try {
      // The store refuses a file over its purpose's limit; Busboy's cut is only a backstop above it.
      for await (const part of formParts(request, { fileSize: MAX_FILE_BYTES + 1, fieldSize: 1024, parts: FORM_FIELDS.size + 1 })) {
        if (part.type === 'file') {
          if (part.name !== FILE_FIELD)
            throw ApiError.invalidRequest(
              `The form has a file part named ${JSON.stringify(part.name)}; the file goes in a part named file.`,
              part.name,
              'invalid_file_part',
            );
          if (staged) throw ApiError.invalidRequest('The form has more than one file; send one, named file.', 'file', 'too_many_files');
          // `batch`, the one purpose an upload may have: the purpose field may be yet to come.
          const meta = {
            workspaceId: caller.workspaceId,
            accountId: caller.accountId,
            keyId: caller.keyId,
            filename: part.filename ?? 'file',
            purpose: 'batch' as const,
          };
          staged = await this.files.stage(meta, part.file);
        } else {
          const name = part.name;
          if (!FORM_FIELDS.has(name))
            throw ApiError.invalidRequest(`Unknown field ${JSON.stringify(name)}: an upload takes file, purpose and expires_after.`, name, 'unknown_parameter');
          if (fields.has(name)) throw ApiError.invalidRequest(`${name} must be given once.`, name, 'invalid_parameter');
          fields.set(name, part.value);
          // A refused purpose sent before the file stops the upload before a byte of it is stored.
          if (name === 'purpose') checkUploadPurpose(fields.get(name));
        }
      }
      checkUploadPurpose(fields.get('purpose'));
      const seconds = expiresAfterSeconds(fields.get(EXPIRES_AFTER_PARAMS.anchor), fields.get(EXPIRES_AFTER_PARAMS.seconds), EXPIRES_AFTER_PARAMS);
      if (!staged) throw ApiError.invalidRequest('The form has no file: send the JSONL file in a part named file.', 'file', 'missing_required_parameter');
      return presentFile(await this.files.publish(staged, { expiresAfterSeconds: seconds }));
    } catch (err) {
      if (staged) await this.files.discard(staged).catch(() => undefined);
      // A form refused before its end (a file too large, a bad line) is not read further: the
      // connection closes after the answer, which would otherwise wait behind the unread rest.
      if (!request.raw.complete) void reply.header('connection', 'close');
      throw err;
    }
  }

  /** OpenAI's cursor list: `purpose`, `limit` (1-10,000, default 10,000), `order` (default desc), `after`. */
  @Get()
  @Requires('lookup')
  async list(@CallerParam() caller: Caller, @Query() query: Record<string, unknown>) {
    const page = pageQuery(query.limit, query.after, { max: 10_000, fallback: 10_000, isId: isFileId, what: 'a file id' });
    const order = query.order ?? 'desc';
    if (order !== 'asc' && order !== 'desc') throw ApiError.invalidRequest('order must be asc or desc.', 'order');
    if (query.purpose !== undefined && typeof query.purpose !== 'string') throw ApiError.invalidRequest('purpose must be given once.', 'purpose');
    const files = await this.files.list(caller.workspaceId, { purpose: query.purpose ?? null, after: page.after, limit: page.fetch, order });
    return listPage(files, page.limit, (file) => file.id, presentFile);
  }

  @Get(':id')
  @Requires('lookup')
  async retrieve(@CallerParam() caller: Caller, @Param('id') id: string) {
    return presentFile(await this.find(caller, id));
  }

  @Delete(':id')
  @HttpCode(200)
  @Requires('model_call')
  async delete(@CallerParam() caller: Caller, @Param('id') id: string) {
    if (!(await this.files.delete(caller.workspaceId, id))) throw fileNotFound(id);
    return { id, object: 'file', deleted: true };
  }

  /** The bytes as uploaded (or written by a batch), streamed a chunk at a time. */
  @Get(':id/content')
  @Requires('lookup')
  async content(@CallerParam() caller: Caller, @Param('id') id: string, @Res() reply: FastifyReply): Promise<void> {
    const file = await this.find(caller, id);
    const contentType = file.filename.toLowerCase().endsWith('.jsonl') ? 'application/jsonl' : 'application/octet-stream';
    void reply
      .status(200)
      .headers({ 'content-type': contentType, 'content-length': String(file.bytes) })
      .send(Readable.from(this.files.content(caller.workspaceId, id), { objectMode: false }));
  }

  private async find(caller: Caller, id: string): Promise<FileRecord> {
    const file = await this.files.get(caller.workspaceId, id);
    if (!file) throw fileNotFound(id);
    return file;
  }
}

/** Spec 4.11: callers upload batch input files only. */
function checkUploadPurpose(purpose: string | undefined): void {
  if (purpose === undefined)
    throw ApiError.invalidRequest(`The form has no purpose: send purpose ${UPLOAD_PURPOSES.join(' or ')}.`, 'purpose', 'missing_required_parameter');
  if (!UPLOAD_PURPOSES.some((accepted) => accepted === purpose)) {
    throw ApiError.invalidRequest(
      `purpose ${JSON.stringify(purpose)} is not accepted here; the purposes a file may be uploaded with: ${UPLOAD_PURPOSES.join(', ')}.`,
      'purpose',
      'invalid_purpose',
    );
  }
}

/** OpenAI's file object; `status` and `status_details` are deprecated but still in its type. */
function presentFile(file: FileRecord) {
  return {
    id: file.id,
    object: 'file' as const,
    bytes: file.bytes,
    created_at: Math.floor(file.createdAt.getTime() / 1000),
    filename: file.filename,
    purpose: file.purpose,
    status: 'processed' as const,
    expires_at: file.expiresAt === null ? null : Math.floor(file.expiresAt.getTime() / 1000),
    status_details: null,
  };
}
