/**
 * Files (spec 4.11; OpenAI's Files API): batch input files uploaded by callers, and the output
 * files the batches write. They are content, never events (ARCHITECTURE section 4): rows of
 * their own, the bytes in 1 MiB chunks each sealed with AES-256-GCM under SVC_ENCRYPTION_KEY,
 * visible to every key of the workspace and nobody else, and deleted for good once expired.
 *
 * The same SQL runs on PostgreSQL and on PGlite.
 */
import { randomBytes } from 'node:crypto';
import { SealedContent } from '@svc/conversations';
import { DomainError, createSchema, type Clock, type SqlRunner } from '@svc/platform';
import { JsonlReader } from './jsonl';

export const FILES_TABLE = 'files';
export const FILE_CHUNKS_TABLE = 'file_chunks';

/** Content is stored and read this many bytes at a time: never a whole file in memory. */
export const FILE_CHUNK_BYTES = 1024 * 1024;

// Chunks cross the driver as base64 text (bytea at rest): PGlite converts a bytea parameter or
// result byte by byte in JavaScript, some 200 ms a megabyte, where base64 is native on both sides.

/**
 * `batch` is what callers upload (spec 4.11); `batch_output` is what the batches write; `video`,
 * the clips and posters of videos (spec 4.15), reached only through /v1/videos.
 */
export type FilePurpose = 'batch' | 'batch_output' | 'video';

/** The purposes the Files API shows; a store sees only the purposes it is made for. */
export const FILES_API_PURPOSES: readonly FilePurpose[] = ['batch', 'batch_output'];

/** The purposes a caller may upload. */
export const UPLOAD_PURPOSES: readonly FilePurpose[] = ['batch'];

/** OpenAI's bounds of `expires_after[seconds]`: an hour to 30 days. */
export const MIN_EXPIRES_AFTER_SECONDS = 3600;
export const MAX_EXPIRES_AFTER_SECONDS = 30 * 24 * 3600;

const MB = 1024 * 1024;

/** OpenAI's limits: any file is at most 512 MB, a batch input file at most 200 MB. */
export const MAX_FILE_BYTES = 512 * MB;
export const MAX_BATCH_INPUT_BYTES = 200 * MB;

/** OpenAI's rules by purpose: a batch input is JSONL and expires after 30 days unless told otherwise; other files never expire by default. */
const PURPOSE_RULES: Record<FilePurpose, { maxBytes: number; jsonl: boolean; expiresAfterSeconds: number | null }> = {
  batch: { maxBytes: MAX_BATCH_INPUT_BYTES, jsonl: true, expiresAfterSeconds: MAX_EXPIRES_AFTER_SECONDS },
  batch_output: { maxBytes: MAX_FILE_BYTES, jsonl: false, expiresAfterSeconds: null },
  // Kept until the video is deleted (DELETE /v1/videos/{id}).
  video: { maxBytes: MAX_FILE_BYTES, jsonl: false, expiresAfterSeconds: null },
};

/**
 * An upload never finished (its process died mid-way) is removed by the purge once this old:
 * no upload of at most 512 MB takes a day.
 */
export const UNFINISHED_UPLOAD_TTL_MS = 24 * 3600 * 1000;

const FILE_ID = /^file-[0-9a-f]{24}$/;

export function isFileId(id: string): boolean {
  return FILE_ID.test(id);
}

export interface NewFile {
  /** Who may see it: every key of this workspace, and nobody else. */
  workspaceId: string;
  accountId: string;
  /** The key that created it (for an operator's questions; never used for access). */
  keyId: string;
  filename: string;
  purpose: FilePurpose;
  /** Seconds from `created_at` until it expires; null, never; left out, the purpose's default. */
  expiresAfterSeconds?: number | null;
}

export interface FileRecord {
  id: string;
  workspaceId: string;
  accountId: string;
  keyId: string;
  filename: string;
  purpose: FilePurpose;
  bytes: number;
  createdAt: Date;
  expiresAt: Date | null;
}

/** A file whose content is written but which nobody sees until it is published. */
export interface StagedFile {
  id: string;
  meta: NewFile;
  bytes: number;
}

export interface FileListQuery {
  purpose?: string | null;
  /** The id of the last file of the page before. */
  after?: string | null;
  limit: number;
  order?: 'asc' | 'desc';
}

/** The files of each workspace, and their content. */
export interface FileStore {
  /** Writes the content and publishes the file; a refused content (too large, not JSONL for `batch`) leaves nothing. */
  create(meta: NewFile, chunks: AsyncIterable<Buffer>): Promise<FileRecord>;
  /** Writes the content, invisible until `publish`; what is never published is removed by `discard` or, after a crash, by the purge. */
  stage(meta: NewFile, chunks: AsyncIterable<Buffer>): Promise<StagedFile>;
  /** Makes a staged file visible, created now; `expiresAfterSeconds` overrides the staged one. */
  publish(staged: StagedFile, changes?: Pick<NewFile, 'expiresAfterSeconds'>): Promise<FileRecord>;
  discard(staged: StagedFile): Promise<void>;
  /** The file if it exists in `workspaceId` and has not expired; null otherwise (and when it no longer opens). */
  get(workspaceId: string, id: string): Promise<FileRecord | null>;
  /** The workspace's files by creation, up to `limit` of them after the cursor. */
  list(workspaceId: string, query: FileListQuery): Promise<FileRecord[]>;
  /** Removes the file for good; false when there was none (or not the workspace's, or expired). */
  delete(workspaceId: string, id: string): Promise<boolean>;
  /** The content, a chunk at a time; 404 `file_not_found` if the file is not there or goes while it is read. */
  content(workspaceId: string, id: string): AsyncIterable<Buffer>;
  /** Removes the expired files and the uploads never finished; resolves with how many. */
  purgeExpired(now: Date): Promise<number>;
}

/** A sealed chunk opens only as that chunk of that file: moved to another file or position, it does not. */
export function fileChunkContext(id: string, seq: number): string {
  return `file:${id}:${seq}`;
}

/** The file name is the caller's content too, and sealing it makes a file under a lost key read as gone everywhere. */
function filenameContext(id: string): string {
  return `file:${id}:filename`;
}

interface Row {
  id: string;
  workspace_id: string;
  account_id: string;
  key_id: string;
  filename: string;
  purpose: FilePurpose;
  bytes: string | number;
  created_at: Date | string;
  expires_at: Date | string | null;
}

const COLUMNS = 'id, workspace_id, account_id, key_id, filename, purpose, bytes, created_at, expires_at';

/** Published, not expired at the parameter `now`, and of one of `purposes` (constants, never input). */
const visibleAt = (now: string, purposes: readonly FilePurpose[]) =>
  `status = 'processed' AND (expires_at IS NULL OR expires_at > ${now}) AND purpose IN (${purposes.map((p) => `'${p}'`).join(', ')})`;

export class SqlFileStore implements FileStore {
  private readonly sealed: SealedContent;

  constructor(
    private readonly sql: SqlRunner,
    /** SVC_ENCRYPTION_KEY, read at each use; without it nothing can be kept or read (503). The purge needs none. */
    key: () => Buffer | null,
    private readonly clock: Clock,
    /** What this store sees: the Files API's purposes, or the videos' own files. */
    private readonly purposes: readonly FilePurpose[] = FILES_API_PURPOSES,
  ) {
    this.sealed = new SealedContent(key, filesUnavailable);
  }

  /** Creates the tables and their indexes; safe to run at every start. */
  static async init(sql: SqlRunner): Promise<void> {
    await createSchema(
      sql,
      `
      CREATE TABLE IF NOT EXISTS ${FILES_TABLE} (
        id text PRIMARY KEY,
        workspace_id text NOT NULL,
        account_id text NOT NULL,
        key_id text NOT NULL,
        filename text NOT NULL,
        purpose text NOT NULL,
        bytes bigint NOT NULL,
        created_at timestamptz NOT NULL,
        expires_at timestamptz,
        status text NOT NULL CHECK (status IN ('uploading', 'processed'))
      );
      CREATE INDEX IF NOT EXISTS ${FILES_TABLE}_workspace ON ${FILES_TABLE} (workspace_id, created_at, id);
      CREATE INDEX IF NOT EXISTS ${FILES_TABLE}_expires_at ON ${FILES_TABLE} (expires_at);
      CREATE INDEX IF NOT EXISTS ${FILES_TABLE}_uploading ON ${FILES_TABLE} (created_at) WHERE status = 'uploading';
      CREATE TABLE IF NOT EXISTS ${FILE_CHUNKS_TABLE} (
        file_id text NOT NULL REFERENCES ${FILES_TABLE} (id) ON DELETE CASCADE,
        seq integer NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (file_id, seq)
      );
    `,
    );
  }

  /** Whether files can be kept and read at all (SVC_ENCRYPTION_KEY is set). */
  get available(): boolean {
    return this.sealed.available;
  }

  async create(meta: NewFile, chunks: AsyncIterable<Buffer>): Promise<FileRecord> {
    return this.publish(await this.stage(meta, chunks));
  }

  async stage(meta: NewFile, chunks: AsyncIterable<Buffer>): Promise<StagedFile> {
    this.sealed.requireAvailable();
    const id = `file-${randomBytes(12).toString('hex')}`;
    // The row comes first, so that every chunk belongs to a row the purge can find.
    await this.sql.query(
      `INSERT INTO ${FILES_TABLE} (id, workspace_id, account_id, key_id, filename, purpose, bytes, created_at, expires_at, status)
       VALUES ($1, $2, $3, $4, $5, $6, 0, $7, NULL, 'uploading')`,
      [id, meta.workspaceId, meta.accountId, meta.keyId, this.sealed.seal(meta.filename, filenameContext(id)), meta.purpose, this.clock.now().toISOString()],
    );
    const staged: StagedFile = { id, meta, bytes: 0 };
    try {
      staged.bytes = await this.writeChunks(id, meta.purpose, chunks);
      return staged;
    } catch (err) {
      await this.discard(staged).catch(() => undefined);
      throw err;
    }
  }

  async publish(staged: StagedFile, changes: Pick<NewFile, 'expiresAfterSeconds'> = {}): Promise<FileRecord> {
    const { id, meta, bytes } = staged;
    const createdAt = this.clock.now();
    const seconds =
      changes.expiresAfterSeconds !== undefined
        ? changes.expiresAfterSeconds
        : meta.expiresAfterSeconds !== undefined
          ? meta.expiresAfterSeconds
          : PURPOSE_RULES[meta.purpose].expiresAfterSeconds;
    const expiresAt = seconds === null ? null : new Date(createdAt.getTime() + seconds * 1000);
    const { rows } = await this.sql.query(
      `UPDATE ${FILES_TABLE} SET status = 'processed', bytes = $3, created_at = $4, expires_at = $5
        WHERE id = $1 AND workspace_id = $2 AND status = 'uploading' RETURNING id`,
      [id, meta.workspaceId, bytes, createdAt.toISOString(), expiresAt?.toISOString() ?? null],
    );
    if (rows.length === 0) throw new Error(`the upload of ${id} was removed before it was published`);
    return {
      id,
      workspaceId: meta.workspaceId,
      accountId: meta.accountId,
      keyId: meta.keyId,
      filename: meta.filename,
      purpose: meta.purpose,
      bytes,
      createdAt,
      expiresAt,
    };
  }

  async discard(staged: StagedFile): Promise<void> {
    await this.sql.query(`DELETE FROM ${FILES_TABLE} WHERE id = $1 AND workspace_id = $2 AND status = 'uploading'`, [staged.id, staged.meta.workspaceId]);
  }

  async get(workspaceId: string, id: string): Promise<FileRecord | null> {
    this.sealed.requireAvailable();
    if (!isFileId(id)) return null;
    const { rows } = await this.sql.query<Row>(
      `SELECT ${COLUMNS} FROM ${FILES_TABLE} WHERE id = $1 AND workspace_id = $2 AND ${visibleAt('$3', this.purposes)}`,
      [id, workspaceId, this.clock.now().toISOString()],
    );
    return rows[0] ? this.record(rows[0]) : null;
  }

  async list(workspaceId: string, { purpose = null, after = null, limit, order = 'desc' }: FileListQuery): Promise<FileRecord[]> {
    this.sealed.requireAvailable();
    const [beyond, direction] = order === 'asc' ? ['>', 'ASC'] : ['<', 'DESC'];
    const { rows } = await this.sql.query<Row>(
      `SELECT ${COLUMNS} FROM ${FILES_TABLE}
        WHERE workspace_id = $1 AND ${visibleAt('$2', this.purposes)} AND ($3::text IS NULL OR purpose = $3)
          AND ($4::text IS NULL OR (created_at, id) ${beyond} (SELECT created_at, id FROM ${FILES_TABLE} WHERE id = $4 AND workspace_id = $1))
        ORDER BY created_at ${direction}, id ${direction} LIMIT $5`,
      [workspaceId, this.clock.now().toISOString(), purpose, after, limit],
    );
    return rows.map((row) => this.record(row)).filter((file): file is FileRecord => file !== null);
  }

  async delete(workspaceId: string, id: string): Promise<boolean> {
    if (!isFileId(id)) return false;
    const { rows } = await this.sql.query(`DELETE FROM ${FILES_TABLE} WHERE id = $1 AND workspace_id = $2 AND ${visibleAt('$3', this.purposes)} RETURNING id`, [
      id,
      workspaceId,
      this.clock.now().toISOString(),
    ]);
    return rows.length > 0;
  }

  async *content(workspaceId: string, id: string): AsyncIterable<Buffer> {
    const file = await this.get(workspaceId, id);
    if (!file) throw fileNotFound(id);
    for (let seq = 0; seq * FILE_CHUNK_BYTES < file.bytes; seq++) {
      const { rows } = await this.sql.query<{ data: string }>(
        `SELECT encode(data, 'base64') AS data FROM ${FILE_CHUNKS_TABLE} WHERE file_id = $1 AND seq = $2`,
        [id, seq],
        {
          prepare: 'file_chunk_read',
        },
      );
      const data = rows[0] ? this.sealed.openBytes(Buffer.from(rows[0].data, 'base64'), fileChunkContext(id, seq)) : null;
      // Deleted or purged while it was read: the part already sent cannot be taken back, the rest is gone.
      if (data === null) throw fileNotFound(id);
      yield data;
    }
  }

  async purgeExpired(now: Date): Promise<number> {
    const abandoned = new Date(now.getTime() - UNFINISHED_UPLOAD_TTL_MS);
    const { rows } = await this.sql.query(
      `DELETE FROM ${FILES_TABLE} WHERE (status = 'processed' AND expires_at <= $1) OR (status = 'uploading' AND created_at <= $2) RETURNING id`,
      [now.toISOString(), abandoned.toISOString()],
    );
    return rows.length;
  }

  /** Cuts the content into sealed chunks of FILE_CHUNK_BYTES (the last one shorter), checking it as its purpose requires; resolves with its size. */
  private async writeChunks(id: string, purpose: FilePurpose, chunks: AsyncIterable<Buffer>): Promise<number> {
    const rules = PURPOSE_RULES[purpose];
    const jsonl = rules.jsonl ? new JsonlReader() : null;
    let seq = 0;
    const write = async (data: Buffer) => {
      const sealed = this.sealed.sealBytes(data, fileChunkContext(id, seq)).toString('base64');
      await this.sql.query(`INSERT INTO ${FILE_CHUNKS_TABLE} (file_id, seq, data) VALUES ($1, $2, decode($3, 'base64'))`, [id, seq, sealed], {
        prepare: 'file_chunk_write',
      });
      seq++;
    };
    let bytes = 0;
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    for await (const piece of chunks) {
      bytes += piece.length;
      if (bytes > rules.maxBytes) throw fileTooLarge(purpose, rules.maxBytes);
      jsonl?.push(piece);
      pending.push(piece);
      pendingBytes += piece.length;
      if (pendingBytes < FILE_CHUNK_BYTES) continue;
      const all = Buffer.concat(pending, pendingBytes);
      let offset = 0;
      for (; all.length - offset >= FILE_CHUNK_BYTES; offset += FILE_CHUNK_BYTES) await write(all.subarray(offset, offset + FILE_CHUNK_BYTES));
      pending = [all.subarray(offset)];
      pendingBytes = all.length - offset;
    }
    jsonl?.end();
    if (pendingBytes > 0) await write(Buffer.concat(pending, pendingBytes));
    return bytes;
  }

  private record(row: Row): FileRecord | null {
    const filename = this.sealed.open(row.filename, filenameContext(row.id));
    // Sealed under an earlier SVC_ENCRYPTION_KEY (or altered): as gone as a deleted file.
    if (filename === null) return null;
    return {
      id: row.id,
      workspaceId: row.workspace_id,
      accountId: row.account_id,
      keyId: row.key_id,
      filename,
      purpose: row.purpose,
      bytes: Number(row.bytes),
      createdAt: new Date(row.created_at),
      expiresAt: row.expires_at === null ? null : new Date(row.expires_at),
    };
  }
}

/** Writes a batch's output (or error) file: JSONL the batch produced, of at most 512 MB, visible to the batch's workspace. */
export function createOutputFile(store: FileStore, meta: Omit<NewFile, 'purpose'>, chunks: AsyncIterable<Buffer>): Promise<FileRecord> {
  return store.create({ ...meta, purpose: 'batch_output' }, chunks);
}

/**
 * OpenAI's `expires_after` (`anchor` must be `created_at`; `seconds` an hour to 30 days), from a
 * form (strings) or JSON (a number); both left out is undefined, the purpose's default. `params`
 * name the two fields in errors.
 */
export function expiresAfterSeconds(anchor: unknown, seconds: unknown, params: { anchor: string; seconds: string }): number | undefined {
  if (anchor === undefined && seconds === undefined) return undefined;
  if (anchor !== 'created_at')
    throw DomainError.invalid(`${params.anchor} must be "created_at" (the only anchor), given with ${params.seconds}.`, params.anchor, 'invalid_expires_after');
  const n = typeof seconds === 'string' && /^\d+$/.test(seconds.trim()) ? Number(seconds) : seconds;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < MIN_EXPIRES_AFTER_SECONDS || n > MAX_EXPIRES_AFTER_SECONDS) {
    throw DomainError.invalid(
      `${params.seconds} must be an integer from ${MIN_EXPIRES_AFTER_SECONDS} (an hour) to ${MAX_EXPIRES_AFTER_SECONDS} (30 days).`,
      params.seconds,
      'invalid_expires_after',
    );
  }
  return n;
}

/**
 * One answer for a file that never existed, was deleted, has expired or belongs to another
 * workspace: nobody learns which. `param` names where the id came from (`input_file_id` for a batch).
 */
export function fileNotFound(id: string, param = 'file_id'): DomainError {
  return DomainError.notFound(`No file with id '${id}' exists for this workspace (deleted and expired files are gone).`, 'file_not_found', param);
}

/** Too large, as a too large audio file is answered: the caller must send less. */
function fileTooLarge(purpose: FilePurpose, maxBytes: number): DomainError {
  return new DomainError(
    'file_too_large',
    `The file is larger than ${maxBytes / MB} MB, the most a file of purpose ${purpose} may be.`,
    { param: 'file' },
    'too_large',
  );
}

/**
 * No SVC_ENCRYPTION_KEY (a production gateway started without it): files cannot be kept or
 * read. 503, since it is the service's configuration, not the request, that is at fault.
 */
export function filesUnavailable(): DomainError {
  return new DomainError(
    'storage_unavailable',
    'Files are not available on this gateway: it has no SVC_ENCRYPTION_KEY to encrypt them. The operator must set SVC_ENCRYPTION_KEY.',
    {},
    'unavailable',
  );
}
