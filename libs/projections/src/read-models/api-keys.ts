import type { RecordedEvent } from '../../../eventstore/src/port';
import type { KeyEvent, KeyScope, KeyEnvironment } from '../../../identity/src/key';
import type { SqlExecutor } from '../../../platform/src/sql';
import { eventTime, type Projection } from '../projection';

type Ev<T extends KeyEvent['type']> = RecordedEvent<T, Extract<KeyEvent, { type: T }>['data']>;

/** Keys by secret hash, for authentication, and by id for the key endpoints. */
export const apiKeysProjection: Projection = {
  name: 'api_keys',
  tables: ['api_keys'],
  schema: [
    `CREATE TABLE IF NOT EXISTS api_keys (
      key_id text PRIMARY KEY,
      account_id text NOT NULL,
      name text NOT NULL,
      scope text NOT NULL,
      environment text NOT NULL,
      secret_hash text NOT NULL UNIQUE,
      secret_hint text NOT NULL,
      created_at timestamptz NOT NULL,
      revoked_at timestamptz
    )`,
    `CREATE INDEX IF NOT EXISTS api_keys_account ON api_keys (account_id)`,
  ],
  handlers: {
    KeyCreated: async (e: Ev<'KeyCreated'>, tx) => {
      const d = e.data;
      await tx.query(
        `INSERT INTO api_keys (key_id, account_id, name, scope, environment, secret_hash, secret_hint, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
        [d.key_id, d.account_id, d.name, d.scope, d.environment, d.secret_hash, d.secret_hint, eventTime(e)],
      );
    },
    KeyRevoked: async (e: Ev<'KeyRevoked'>, tx) => {
      await tx.query('UPDATE api_keys SET revoked_at = $2 WHERE key_id = $1', [e.data.key_id, eventTime(e)]);
    },
  },
};

export interface ApiKeyRow {
  keyId: string;
  accountId: string;
  name: string;
  scope: KeyScope;
  environment: KeyEnvironment;
  secretHash: string;
  revoked: boolean;
}

export async function findKeyByHash(sql: SqlExecutor, secretHash: string): Promise<ApiKeyRow | null> {
  const { rows } = await sql.query<{
    key_id: string;
    account_id: string;
    name: string;
    scope: KeyScope;
    environment: KeyEnvironment;
    secret_hash: string;
    revoked_at: Date | null;
  }>('SELECT key_id, account_id, name, scope, environment, secret_hash, revoked_at FROM api_keys WHERE secret_hash = $1', [secretHash]);
  const r = rows[0];
  if (!r) return null;
  return {
    keyId: r.key_id,
    accountId: r.account_id,
    name: r.name,
    scope: r.scope,
    environment: r.environment,
    secretHash: r.secret_hash,
    revoked: r.revoked_at !== null,
  };
}
