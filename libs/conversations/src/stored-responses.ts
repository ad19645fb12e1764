/**
 * Stored conversations of the Responses interface (spec 4.5, 3.3, 8): the response object and
 * the input items it answered, kept 30 days from creation so that `previous_response_id`,
 * GET /responses/{id} and its input_items work. They are content, never events
 * (ARCHITECTURE section 4): rows in a table of their own, sealed with AES-256-GCM under
 * SVC_ENCRYPTION_KEY, and removed for good by the purge once they expire.
 *
 * The same SQL runs on PostgreSQL and on PGlite.
 */
import { DomainError, createSchema } from '@svc/platform';
import { SealedContent } from './sealed-content';
import type { SqlRunner } from '@svc/platform';
import type { ResponseItem, ResponseObject } from '@svc/interfaces';

/** Spec 3.3 and 8: a stored response is available for 30 days from its creation. */
export const STORED_RESPONSE_RETENTION_MS = 30 * 24 * 60 * 60 * 1000;

export const STORED_RESPONSES_TABLE = 'stored_responses';

export interface StoredResponseRecord {
  /** The response id (`resp_...`). */
  id: string;
  /** Who may see it: every key of this workspace, and nobody else. */
  workspaceId: string;
  /** The key that created it (for an operator's questions; never used for access). */
  keyId: string;
  createdAt: Date;
  /** The response object as it was answered. */
  response: ResponseObject;
  /** Everything the model was given besides the instructions: the earlier turns, then this request's input. */
  inputItems: ResponseItem[];
}

interface Row {
  id: string;
  workspace_id: string;
  key_id: string;
  created_at: Date | string;
  response: string;
  input_items: string;
}

/**
 * The context each sealed column is bound to: a ciphertext opens only as that column of that
 * response in that workspace, so copying it to another row (or moving a row to another
 * workspace in the database) makes it unreadable instead of visible to someone else.
 */
export function sealContext(workspaceId: string, id: string, column: 'response' | 'input_items'): string {
  return `stored-response:${workspaceId}:${id}:${column}`;
}

export class StoredResponses {
  private readonly content: SealedContent;

  constructor(
    private readonly sql: SqlRunner,
    /** SVC_ENCRYPTION_KEY, read at each use; without it nothing can be saved or read (503). The purge needs none. */
    key: () => Buffer | null = () => null,
  ) {
    this.content = new SealedContent(key, storageUnavailable);
  }

  /** Creates the table and its index; safe to run at every start. */
  static async init(sql: SqlRunner): Promise<void> {
    await createSchema(
      sql,
      `
      CREATE TABLE IF NOT EXISTS ${STORED_RESPONSES_TABLE} (
        id text PRIMARY KEY,
        workspace_id text NOT NULL,
        key_id text NOT NULL,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        response text NOT NULL,
        input_items text NOT NULL
      );
      CREATE INDEX IF NOT EXISTS ${STORED_RESPONSES_TABLE}_expires_at ON ${STORED_RESPONSES_TABLE} (expires_at);
    `,
    );
  }

  async save(stored: StoredResponseRecord): Promise<void> {
    const { id, workspaceId } = stored;
    const expiresAt = new Date(stored.createdAt.getTime() + STORED_RESPONSE_RETENTION_MS);
    // A retried save of the same response (same id) changes nothing.
    await this.sql.query(
      `INSERT INTO ${STORED_RESPONSES_TABLE} (id, workspace_id, key_id, created_at, expires_at, response, input_items)
       VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING`,
      [
        id,
        workspaceId,
        stored.keyId,
        stored.createdAt.toISOString(),
        expiresAt.toISOString(),
        this.content.seal(JSON.stringify(stored.response), sealContext(workspaceId, id, 'response')),
        this.content.seal(JSON.stringify(stored.inputItems), sealContext(workspaceId, id, 'input_items')),
      ],
    );
  }

  /** The response if it exists, belongs to `workspaceId` and has not expired at `now`; null otherwise. */
  async find(id: string, workspaceId: string, now: Date): Promise<StoredResponseRecord | null> {
    this.content.requireAvailable();
    const { rows } = await this.sql.query<Row>(
      `SELECT id, workspace_id, key_id, created_at, response, input_items FROM ${STORED_RESPONSES_TABLE}
       WHERE id = $1 AND workspace_id = $2 AND expires_at > $3`,
      [id, workspaceId, now.toISOString()],
    );
    const row = rows[0];
    if (!row) return null;
    const response = this.content.open(row.response, sealContext(row.workspace_id, row.id, 'response'));
    const inputItems = this.content.open(row.input_items, sealContext(row.workspace_id, row.id, 'input_items'));
    // Sealed under an earlier SVC_ENCRYPTION_KEY (or altered): as gone as an expired one.
    if (response === null || inputItems === null) return null;
    return {
      id: row.id,
      workspaceId: row.workspace_id,
      keyId: row.key_id,
      createdAt: new Date(row.created_at),
      response: JSON.parse(response) as ResponseObject,
      inputItems: JSON.parse(inputItems) as ResponseItem[],
    };
  }

  /** Removes the response for good; false when there was none to remove (or not the workspace's, or expired). */
  async delete(id: string, workspaceId: string, now: Date): Promise<boolean> {
    const { rows } = await this.sql.query<{ id: string }>(
      `DELETE FROM ${STORED_RESPONSES_TABLE} WHERE id = $1 AND workspace_id = $2 AND expires_at > $3 RETURNING id`,
      [id, workspaceId, now.toISOString()],
    );
    return rows.length > 0;
  }

  /** The sweeper's pass: removes every response expired at `now`; resolves with how many. */
  async purgeExpired(now: Date): Promise<number> {
    const { rows } = await this.sql.query<{ id: string }>(`DELETE FROM ${STORED_RESPONSES_TABLE} WHERE expires_at <= $1 RETURNING id`, [now.toISOString()]);
    return rows.length;
  }

  /** Whether responses can be saved and read at all (SVC_ENCRYPTION_KEY is set). */
  get available(): boolean {
    return this.content.available;
  }
}

/**
 * No SVC_ENCRYPTION_KEY (a production gateway started without it): content cannot be kept or
 * read. 503, since it is the service's configuration, not the request, that is at fault.
 */
export function storageUnavailable(): DomainError {
  return new DomainError(
    'storage_unavailable',
    'Stored responses are not available on this gateway: it has no SVC_ENCRYPTION_KEY to encrypt them. The operator must set SVC_ENCRYPTION_KEY; until then send store: false (and no previous_response_id).',
    {},
    'unavailable',
  );
}
