import type { RecordedEvent } from '@svc/eventstore';
import type { SettingsEvent } from '../settings/events';
import type { SqlExecutor } from '@svc/platform';
import { eventTime, perEvent, type Projection } from '@svc/projections';

type S<T extends SettingsEvent['type']> = RecordedEvent<T, Extract<SettingsEvent, { type: T }>['data']>;

/**
 * The provider keys of BYOK, still sealed: the chat path opens one only when a request needs
 * it, so the plaintext never sits in the database either.
 */
export const providerKeysProjection: Projection = perEvent({
  name: 'provider_keys',
  tables: ['provider_keys'],
  schema: [
    `CREATE TABLE IF NOT EXISTS provider_keys (
      account_id text NOT NULL,
      provider text NOT NULL,
      encrypted_key text NOT NULL,
      hint text NOT NULL,
      saved_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, provider)
    )`,
  ],
  handlers: {
    ProviderKeySaved: async (e: S<'ProviderKeySaved'>, tx) => {
      const d = e.data;
      await tx.query(
        `INSERT INTO provider_keys (account_id, provider, encrypted_key, hint, saved_at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (account_id, provider) DO UPDATE SET encrypted_key = EXCLUDED.encrypted_key, hint = EXCLUDED.hint, saved_at = EXCLUDED.saved_at`,
        [d.account_id, d.provider, d.encrypted_key, d.hint, eventTime(e)],
      );
    },
    ProviderKeyDeleted: async (e: S<'ProviderKeyDeleted'>, tx) => {
      await tx.query('DELETE FROM provider_keys WHERE account_id = $1 AND provider = $2', [e.data.account_id, e.data.provider]);
    },
  },
});

export interface ProviderKeyRow {
  provider: string;
  hint: string;
  savedAt: string;
}

/** What an operator may see of an account's provider keys: names, hints and when. */
export async function listProviderKeys(sql: SqlExecutor, accountId: string): Promise<ProviderKeyRow[]> {
  const { rows } = await sql.query<Record<string, any>>('SELECT provider, hint, saved_at FROM provider_keys WHERE account_id = $1 ORDER BY provider', [
    accountId,
  ]);
  return rows.map((r) => ({ provider: r.provider, hint: r.hint, savedAt: new Date(r.saved_at).toISOString() }));
}
