/**
 * Images answered by URL (spec 4.8 `response_format: "url"`): the gateway keeps the bytes for an
 * hour and serves them at an address whose id is the only secret, as OpenAI's signed URLs are.
 * They are content, never events (ARCHITECTURE section 4): rows in a table of their own, sealed
 * with AES-256-GCM under SVC_ENCRYPTION_KEY, and deleted once expired (on read, and whenever
 * new images are kept).
 *
 * The same SQL runs on PostgreSQL and on PGlite.
 */
import { randomBytes } from 'node:crypto';
import type { Clock, SqlRunner } from '@svc/platform';
import { DomainError, createSchema } from '@svc/platform';
import { SealedContent } from './sealed-content';

/** How long an image URL works: OpenAI's URLs expire after an hour too. */
export const STORED_IMAGE_TTL_MS = 60 * 60 * 1000;

export const STORED_IMAGES_TABLE = 'stored_images';

/** 32 random bytes: an id nobody can guess or enumerate, since it is all that guards the image. */
const ID_BYTES = 32;
const ID = /^[A-Za-z0-9_-]{43}$/;

export interface StoredImageRef {
  id: string;
  contentType: string;
  /** The file name extension of its type, for the URL. */
  extension: string;
}

export interface StoredImage {
  accountId: string;
  contentType: string;
  bytes: Buffer;
}

interface Row {
  id: string;
  account_id: string;
  content_type: string;
  sealed: string;
  expires_at: Date | string;
}

/**
 * A sealed image opens only as the row it was written to: a ciphertext copied to another id or
 * account in the database does not decrypt.
 */
export function imageSealContext(accountId: string, id: string): string {
  return `stored-image:${accountId}:${id}`;
}

export class StoredImages {
  private readonly content: SealedContent;

  constructor(
    private readonly sql: SqlRunner,
    /** SVC_ENCRYPTION_KEY, read at each use; without it nothing can be kept or served (503). */
    key: () => Buffer | null,
    private readonly clock: Clock,
  ) {
    this.content = new SealedContent(key, imageStorageUnavailable);
  }

  /** Creates the table and its index; safe to run at every start. */
  static async init(sql: SqlRunner): Promise<void> {
    await createSchema(
      sql,
      `
      CREATE TABLE IF NOT EXISTS ${STORED_IMAGES_TABLE} (
        id text PRIMARY KEY,
        account_id text NOT NULL,
        content_type text NOT NULL,
        sealed text NOT NULL,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX IF NOT EXISTS ${STORED_IMAGES_TABLE}_expires_at ON ${STORED_IMAGES_TABLE} (expires_at);
    `,
    );
  }

  /** Keeps `images` for an hour from now; resolves with their ids, in order. */
  async save(accountId: string, images: readonly Buffer[]): Promise<StoredImageRef[]> {
    this.content.requireAvailable();
    const now = this.clock.now();
    const expiresAt = new Date(now.getTime() + STORED_IMAGE_TTL_MS);
    // No sweeper of its own: each write clears what has expired, so the table holds about an hour of images.
    await this.sql.query(`DELETE FROM ${STORED_IMAGES_TABLE} WHERE expires_at <= $1`, [now.toISOString()]);
    const refs: StoredImageRef[] = [];
    for (const bytes of images) {
      const id = randomBytes(ID_BYTES).toString('base64url');
      const { contentType, extension } = imageTypeOf(bytes);
      // GCM seals text: the bytes go in as base64, and nothing of the image is readable at rest.
      const sealed = this.content.seal(bytes.toString('base64'), imageSealContext(accountId, id));
      await this.sql.query(
        `INSERT INTO ${STORED_IMAGES_TABLE} (id, account_id, content_type, sealed, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`,
        [id, accountId, contentType, sealed, now.toISOString(), expiresAt.toISOString()],
      );
      refs.push({ id, contentType, extension });
    }
    return refs;
  }

  /** The image if `id` names one that has not expired; an expired one is deleted on the way. */
  async find(id: string): Promise<StoredImage | null> {
    if (!ID.test(id)) return null;
    this.content.requireAvailable();
    const { rows } = await this.sql.query<Row>(`SELECT id, account_id, content_type, sealed, expires_at FROM ${STORED_IMAGES_TABLE} WHERE id = $1`, [id]);
    const row = rows[0];
    if (!row) return null;
    const now = this.clock.now();
    if (new Date(row.expires_at).getTime() <= now.getTime()) {
      await this.sql.query(`DELETE FROM ${STORED_IMAGES_TABLE} WHERE id = $1 AND expires_at <= $2`, [id, now.toISOString()]);
      return null;
    }
    const base64 = this.content.open(row.sealed, imageSealContext(row.account_id, row.id));
    return base64 === null ? null : { accountId: row.account_id, contentType: row.content_type, bytes: Buffer.from(base64, 'base64') };
  }

  /** Whether images can be kept and served at all (SVC_ENCRYPTION_KEY is set). */
  get available(): boolean {
    return this.content.available;
  }
}

/** The type of an image by its signature: providers answer PNG unless asked otherwise. */
export function imageTypeOf(bytes: Buffer): { contentType: string; extension: string } {
  if (bytes.subarray(0, 8).equals(PNG_SIGNATURE)) return { contentType: 'image/png', extension: 'png' };
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return { contentType: 'image/jpeg', extension: 'jpg' };
  if (bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP') return { contentType: 'image/webp', extension: 'webp' };
  if (bytes.toString('latin1', 0, 4) === 'GIF8') return { contentType: 'image/gif', extension: 'gif' };
  return { contentType: 'application/octet-stream', extension: 'bin' };
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/**
 * No SVC_ENCRYPTION_KEY (a production gateway started without it): images cannot be kept, so
 * `response_format: "url"` cannot be answered. 503, since the configuration is at fault.
 */
export function imageStorageUnavailable(): DomainError {
  return new DomainError(
    'image_storage_unavailable',
    'Images answered by URL are not available on this gateway: it has no SVC_ENCRYPTION_KEY to encrypt them. Ask for response_format "b64_json", or have the operator set SVC_ENCRYPTION_KEY.',
    {},
    'unavailable',
  );
}
