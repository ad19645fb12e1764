import type { RecordedEvent } from '@svc/eventstore';
import type { SettingsEvent } from '../settings/events';
import type { SqlExecutor } from '@svc/platform';
import { eventTime, perEvent, type Projection } from '@svc/projections';

type S<T extends SettingsEvent['type']> = RecordedEvent<T, Extract<SettingsEvent, { type: T }>['data']>;

/** Sets `columns` of the account's row, creating it with the defaults (spec 1: logging and step-up off) if needed. */
async function upsert(tx: SqlExecutor, accountId: string, at: string, columns: Record<string, unknown>): Promise<void> {
  const names = Object.keys(columns);
  const values = Object.values(columns).map((v) => (v !== null && typeof v === 'object' ? JSON.stringify(v) : v));
  await tx.query(
    `INSERT INTO account_settings (account_id, updated_at, ${names.join(', ')}) VALUES ($1, $2, ${names.map((_, i) => `$${i + 3}`).join(', ')})
     ON CONFLICT (account_id) DO UPDATE SET updated_at = EXCLUDED.updated_at, ${names.map((n) => `${n} = EXCLUDED.${n}`).join(', ')}`,
    [accountId, at, ...values],
  );
}

/** The settings of each account (spec 1, 6.1) as GET /v1/settings shows them; the webhook secret stays sealed. */
export const settingsProjection: Projection = perEvent({
  name: 'account_settings',
  tables: ['account_settings'],
  schema: [
    `CREATE TABLE IF NOT EXISTS account_settings (
      account_id text PRIMARY KEY,
      prompt_logging_enabled boolean NOT NULL DEFAULT false,
      prompt_logging_retention_days integer NOT NULL DEFAULT 30,
      step_up_enabled boolean NOT NULL DEFAULT false,
      step_up_email text,
      webhook_id text,
      webhook_url text,
      webhook_events jsonb,
      webhook_secret text,
      webhook_paused boolean NOT NULL DEFAULT false,
      webhook_consecutive_failures integer NOT NULL DEFAULT 0,
      webhook_saved_at timestamptz,
      updated_at timestamptz NOT NULL
    )`,
  ],
  handlers: {
    PromptLoggingSet: (e: S<'PromptLoggingSet'>, tx) =>
      upsert(tx, e.data.account_id, eventTime(e), { prompt_logging_enabled: e.data.enabled, prompt_logging_retention_days: e.data.retention_days }),
    StepUpSet: (e: S<'StepUpSet'>, tx) => upsert(tx, e.data.account_id, eventTime(e), { step_up_enabled: e.data.enabled, step_up_email: e.data.email }),
    WebhookSaved: async (e: S<'WebhookSaved'>, tx) => {
      const d = e.data;
      await upsert(tx, d.account_id, eventTime(e), {
        webhook_id: d.webhook_id,
        webhook_url: d.url,
        webhook_events: d.events,
        webhook_paused: false,
        webhook_consecutive_failures: 0,
        webhook_saved_at: eventTime(e),
      });
      if (d.encrypted_secret) await upsert(tx, d.account_id, eventTime(e), { webhook_secret: d.encrypted_secret });
    },
    WebhookSecretRotated: (e: S<'WebhookSecretRotated'>, tx) => upsert(tx, e.data.account_id, eventTime(e), { webhook_secret: e.data.encrypted_secret }),
    WebhookDeleted: (e: S<'WebhookDeleted'>, tx) =>
      upsert(tx, e.data.account_id, eventTime(e), {
        webhook_id: null,
        webhook_url: null,
        webhook_events: null,
        webhook_secret: null,
        webhook_paused: false,
        webhook_consecutive_failures: 0,
        webhook_saved_at: null,
      }),
    WebhookDeliveryFailed: (e: S<'WebhookDeliveryFailed'>, tx) =>
      upsert(tx, e.data.account_id, eventTime(e), { webhook_consecutive_failures: e.data.consecutive_failures }),
    WebhookDeliveryRecovered: (e: S<'WebhookDeliveryRecovered'>, tx) => upsert(tx, e.data.account_id, eventTime(e), { webhook_consecutive_failures: 0 }),
    WebhookPaused: (e: S<'WebhookPaused'>, tx) => upsert(tx, e.data.account_id, eventTime(e), { webhook_paused: true }),
    WebhookResumed: (e: S<'WebhookResumed'>, tx) => upsert(tx, e.data.account_id, eventTime(e), { webhook_paused: false, webhook_consecutive_failures: 0 }),
  },
});

export interface AccountSettingsRow {
  promptLogging: { enabled: boolean; retentionDays: number };
  stepUp: { enabled: boolean; email: string | null };
  webhook: {
    id: string;
    url: string;
    events: string[] | null;
    /** Sealed: only the dispatcher opens it, to sign. */
    sealedSecret: string;
    paused: boolean;
    consecutiveFailures: number;
    savedAt: string;
  } | null;
  updatedAt: string | null;
}

/** An account's settings; the defaults for an account that never saved any. */
export async function getAccountSettings(sql: SqlExecutor, accountId: string): Promise<AccountSettingsRow> {
  const { rows } = await sql.query<Record<string, any>>('SELECT * FROM account_settings WHERE account_id = $1', [accountId]);
  const r = rows[0];
  if (!r) return { promptLogging: { enabled: false, retentionDays: 30 }, stepUp: { enabled: false, email: null }, webhook: null, updatedAt: null };
  return {
    promptLogging: { enabled: r.prompt_logging_enabled, retentionDays: r.prompt_logging_retention_days },
    stepUp: { enabled: r.step_up_enabled, email: r.step_up_email },
    webhook:
      r.webhook_id === null
        ? null
        : {
            id: r.webhook_id,
            url: r.webhook_url,
            events: r.webhook_events,
            sealedSecret: r.webhook_secret,
            paused: r.webhook_paused,
            consecutiveFailures: r.webhook_consecutive_failures,
            savedAt: new Date(r.webhook_saved_at).toISOString(),
          },
    updatedAt: new Date(r.updated_at).toISOString(),
  };
}
