/**
 * Prompt logging (spec 1, 8): when an account turns it on, each request's prompt and response
 * are kept for its retention period (1 to 30 days) and can be purged at any time. Content, never
 * events (ARCHITECTURE section 4): rows of their own, sealed with AES-256-GCM under
 * SVC_ENCRYPTION_KEY and bound to their row, hidden once expired and deleted by the sweeper.
 *
 * The same SQL runs on PostgreSQL and on PGlite.
 */
import { DomainError, createSchema, type SqlRunner } from '@svc/platform';
import { SealedContent } from './sealed-content';

export const PROMPT_LOGS_TABLE = 'prompt_logs';

/** What an inline image becomes in a log: spec 1 keeps the words, not the pictures. */
export const IMAGE_PLACEHOLDER = '[image omitted]';
/** Bytes that are not text (an uploaded file, generated audio) are not kept either. */
export const BINARY_PLACEHOLDER = '[binary content omitted]';

const DAY_MS = 24 * 3600_000;

export interface PromptLogEntry {
  generationId: string;
  accountId: string;
  keyId: string;
  endpoint: string;
  createdAt: Date;
  /** The request as the caller sent it, inline images and files reduced to placeholders. */
  request: unknown;
  /** The answer as sent: a JSON body, the event-stream text, or a placeholder for bytes. */
  response: unknown;
}

export interface PromptLogSummary {
  generationId: string;
  keyId: string;
  endpoint: string;
  createdAt: string;
  expiresAt: string;
}

interface Row {
  generation_id: string;
  account_id: string;
  key_id: string;
  endpoint: string;
  created_at: Date | string;
  expires_at: Date | string;
  request: string;
  response: string;
}

export const promptLogSealContext = (accountId: string, generationId: string, column: 'request' | 'response') =>
  `prompt-log:${accountId}:${generationId}:${column}`;

const DATA_URL = /^data:[^,;]*(;[^,]*)?;base64,/i;

/**
 * Inline images (data URLs, Anthropic's base64 sources, generated `b64_json`) and raw bytes
 * become placeholders; everything else is kept as it was.
 */
export function withoutInlineMedia(value: unknown): unknown {
  if (typeof value === 'string') return DATA_URL.test(value) ? IMAGE_PLACEHOLDER : value;
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) return BINARY_PLACEHOLDER;
  if (Array.isArray(value)) return value.map(withoutInlineMedia);
  if (value === null || typeof value !== 'object') return value;
  const record = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(record)) {
    if (key === 'b64_json' && typeof v === 'string') out[key] = IMAGE_PLACEHOLDER;
    else if (key === 'data' && typeof v === 'string' && record.type === 'base64') out[key] = IMAGE_PLACEHOLDER;
    else out[key] = withoutInlineMedia(v);
  }
  return out;
}

export class PromptLogs {
  private readonly content: SealedContent;

  constructor(
    private readonly sql: SqlRunner,
    /** SVC_ENCRYPTION_KEY, read at each use; the sweeper needs none. */
    key: () => Buffer | null = () => null,
  ) {
    this.content = new SealedContent(key, promptLogsUnavailable);
  }

  static async init(sql: SqlRunner): Promise<void> {
    await createSchema(
      sql,
      `
      CREATE TABLE IF NOT EXISTS ${PROMPT_LOGS_TABLE} (
        generation_id text PRIMARY KEY,
        account_id text NOT NULL,
        key_id text NOT NULL,
        endpoint text NOT NULL,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        request text NOT NULL,
        response text NOT NULL
      );
      CREATE INDEX IF NOT EXISTS ${PROMPT_LOGS_TABLE}_account ON ${PROMPT_LOGS_TABLE} (account_id, created_at DESC, generation_id DESC);
      CREATE INDEX IF NOT EXISTS ${PROMPT_LOGS_TABLE}_expires_at ON ${PROMPT_LOGS_TABLE} (expires_at);
    `,
    );
  }

  get available(): boolean {
    return this.content.available;
  }

  /** Keeps one exchange for `retentionDays`; a second save of the same generation changes nothing. */
  async save(entry: PromptLogEntry, retentionDays: number): Promise<void> {
    const { generationId, accountId } = entry;
    const expiresAt = new Date(entry.createdAt.getTime() + retentionDays * DAY_MS);
    await this.sql.query(
      `INSERT INTO ${PROMPT_LOGS_TABLE} (generation_id, account_id, key_id, endpoint, created_at, expires_at, request, response)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (generation_id) DO NOTHING`,
      [
        generationId,
        accountId,
        entry.keyId,
        entry.endpoint,
        entry.createdAt.toISOString(),
        expiresAt.toISOString(),
        this.content.seal(JSON.stringify(withoutInlineMedia(entry.request)), promptLogSealContext(accountId, generationId, 'request')),
        this.content.seal(JSON.stringify(withoutInlineMedia(entry.response)), promptLogSealContext(accountId, generationId, 'response')),
      ],
    );
  }

  /** The account's logs not expired at `now`, newest first, after the cursor `after` (a generation id). */
  async list(accountId: string, now: Date, limit: number, after: string | null): Promise<PromptLogSummary[]> {
    const { rows } = await this.sql.query<Row>(
      `SELECT generation_id, key_id, endpoint, created_at, expires_at FROM ${PROMPT_LOGS_TABLE}
        WHERE account_id = $1 AND expires_at > $2
          AND ($4::text IS NULL OR (created_at, generation_id) < (SELECT created_at, generation_id FROM ${PROMPT_LOGS_TABLE} WHERE generation_id = $4 AND account_id = $1))
        ORDER BY created_at DESC, generation_id DESC LIMIT $3`,
      [accountId, now.toISOString(), limit, after],
    );
    return rows.map((r) => ({
      generationId: r.generation_id,
      keyId: r.key_id,
      endpoint: r.endpoint,
      createdAt: new Date(r.created_at).toISOString(),
      expiresAt: new Date(r.expires_at).toISOString(),
    }));
  }

  async find(accountId: string, generationId: string, now: Date): Promise<(PromptLogSummary & { request: unknown; response: unknown }) | null> {
    this.content.requireAvailable();
    const { rows } = await this.sql.query<Row>(`SELECT * FROM ${PROMPT_LOGS_TABLE} WHERE generation_id = $1 AND account_id = $2 AND expires_at > $3`, [
      generationId,
      accountId,
      now.toISOString(),
    ]);
    const r = rows[0];
    if (!r) return null;
    const request = this.content.open(r.request, promptLogSealContext(r.account_id, r.generation_id, 'request'));
    const response = this.content.open(r.response, promptLogSealContext(r.account_id, r.generation_id, 'response'));
    if (request === null || response === null) return null;
    return {
      generationId: r.generation_id,
      keyId: r.key_id,
      endpoint: r.endpoint,
      createdAt: new Date(r.created_at).toISOString(),
      expiresAt: new Date(r.expires_at).toISOString(),
      request: JSON.parse(request),
      response: JSON.parse(response),
    };
  }

  /** Deletes one log, or all of the account's (`generationId` null); resolves with how many. */
  async purge(accountId: string, generationId: string | null): Promise<number> {
    const { rows } = await this.sql.query<{ generation_id: string }>(
      `DELETE FROM ${PROMPT_LOGS_TABLE} WHERE account_id = $1 AND ($2::text IS NULL OR generation_id = $2) RETURNING generation_id`,
      [accountId, generationId],
    );
    return rows.length;
  }

  /** The sweeper's pass: deletes every log expired at `now`. */
  async purgeExpired(now: Date): Promise<number> {
    const { rows } = await this.sql.query<{ generation_id: string }>(`DELETE FROM ${PROMPT_LOGS_TABLE} WHERE expires_at <= $1 RETURNING generation_id`, [
      now.toISOString(),
    ]);
    return rows.length;
  }
}

/** 503: the service's configuration, not the request, is at fault. */
export function promptLogsUnavailable(): DomainError {
  return new DomainError(
    'encryption_unavailable',
    'Prompt logging is not available on this gateway: it has no SVC_ENCRYPTION_KEY to encrypt logs. The operator must set SVC_ENCRYPTION_KEY.',
    {},
    'unavailable',
  );
}
