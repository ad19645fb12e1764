import type { RecordedEvent } from '@svc/eventstore';
import type { KeyEvent } from '../key';
import type { OrgEvent } from '../organization';
import type { SettingsEvent } from '../settings/events';
import type { AccountEvent } from '@svc/ledger';
import type { PresetEvent } from '@svc/presets';
import type { GuardrailEvent } from '@svc/guardrails';
import { nanoToUsd } from '@svc/platform';
import type { SqlExecutor } from '@svc/platform';
import { eventTime, perEvent, type Projection } from '@svc/projections';

/** Every settings write, and the pause the dispatcher records; not each failed delivery, which the webhook events list. */
type AuditedSettings = Exclude<SettingsEvent, { type: 'WebhookDeliveryFailed' | 'WebhookDeliveryRecovered' }>;
/** A key's expiry notice is the service's, not anyone's change. */
type Audited =
  | Exclude<KeyEvent, { type: 'KeyExpiring' }>
  | OrgEvent
  | AuditedSettings
  | PresetEvent
  | GuardrailEvent
  | Extract<AccountEvent, { type: 'CreditsAdded' | 'DailyLimitSet' | 'BalanceAdjusted' }>;

/** Issue 15.7: the API's names for the fields a key update changed, never the recorded ones. */
const API_FIELD: Record<string, string> = { limit_nano: 'limit' };
const usd = (nano: string | null) => (nano === null ? null : nanoToUsd(BigInt(nano)));

/** What each audited event says happened, to what, in whose account (spec 1, audit log). */
const ENTRIES: { [T in Audited['type']]: (d: Extract<Audited, { type: T }>['data']) => { action: string; account: string; target: string; details: object } } =
  {
    KeyCreated: (d) => ({
      action: 'key.created',
      account: d.account_id,
      target: d.key_id,
      details: { name: d.name, scope: d.scope, environment: d.environment, org_id: d.org_id },
    }),
    KeyUpdated: (d) => ({
      action: 'key.updated',
      account: d.account_id,
      target: d.key_id,
      details: {
        fields: Object.keys(d.changes)
          .map((f) => API_FIELD[f] ?? f)
          .sort(),
      },
    }),
    KeyRotated: (d) => ({ action: 'key.rotated', account: d.account_id, target: d.key_id, details: { previous_valid_until: d.previous_valid_until } }),
    KeyRevoked: (d) => ({ action: 'key.revoked', account: d.account_id, target: d.key_id, details: {} }),
    OrgCreated: (d) => ({ action: 'org.created', account: d.owner_account_id, target: d.org_id, details: { name: d.name } }),
    MemberAdded: (d) => ({ action: 'org.member_added', account: d.owner_account_id, target: d.org_id, details: { account_id: d.account_id, role: d.role } }),
    MemberRoleChanged: (d) => ({
      action: 'org.member_role_changed',
      account: d.owner_account_id,
      target: d.org_id,
      details: { account_id: d.account_id, role: d.role },
    }),
    MemberRemoved: (d) => ({ action: 'org.member_removed', account: d.owner_account_id, target: d.org_id, details: { account_id: d.account_id } }),
    OrgDeleted: (d) => ({ action: 'org.deleted', account: d.owner_account_id, target: d.org_id, details: {} }),
    // The hint only: the audit log is read by people, and even a ciphertext has no business there.
    ProviderKeySaved: (d) => ({ action: 'provider_key.saved', account: d.account_id, target: d.provider, details: { provider: d.provider, hint: d.hint } }),
    ProviderKeyDeleted: (d) => ({ action: 'provider_key.deleted', account: d.account_id, target: d.provider, details: { provider: d.provider } }),
    PromptLoggingSet: (d) => ({
      action: 'settings.prompt_logging_set',
      account: d.account_id,
      target: d.account_id,
      details: { enabled: d.enabled, retention_days: d.retention_days },
    }),
    StepUpSet: (d) => ({ action: 'settings.step_up_set', account: d.account_id, target: d.account_id, details: { enabled: d.enabled, email: d.email } }),
    // Never the secret, not even sealed.
    WebhookSaved: (d) => ({
      action: 'webhook.saved',
      account: d.account_id,
      target: d.webhook_id,
      details: { url: d.url, events: d.events, new_secret: d.encrypted_secret !== undefined },
    }),
    WebhookSecretRotated: (d) => ({ action: 'webhook.secret_rotated', account: d.account_id, target: d.webhook_id, details: {} }),
    WebhookDeleted: (d) => ({ action: 'webhook.deleted', account: d.account_id, target: d.webhook_id, details: {} }),
    WebhookPaused: (d) => ({
      action: 'webhook.paused',
      account: d.account_id,
      target: d.webhook_id,
      details: { consecutive_failures: d.consecutive_failures },
    }),
    WebhookResumed: (d) => ({ action: 'webhook.resumed', account: d.account_id, target: d.webhook_id, details: {} }),
    // A workspace is its owner's account, or an organization, whose log its owner reads (actor_account_id for members).
    PresetCreated: (d) => ({ action: 'preset.created', account: d.workspace_id, target: d.slug, details: { name: d.name } }),
    PresetDetailsChanged: (d) => ({ action: 'preset.updated', account: d.workspace_id, target: d.slug, details: { name: d.name, description: d.description } }),
    PresetVersionAdded: (d) => ({
      action: d.rolled_back_to === null ? 'preset.version_added' : 'preset.rolled_back',
      account: d.workspace_id,
      target: d.slug,
      details: { version: d.version, rolled_back_to: d.rolled_back_to },
    }),
    PresetDeleted: (d) => ({ action: 'preset.deleted', account: d.workspace_id, target: d.slug, details: {} }),
    // Issue 44: guardrail writes go to their workspace's log, as presets do.
    GuardrailCreated: (d) => ({ action: 'guardrail.created', account: d.workspace_id, target: d.guardrail_id, details: guardrailDetails(d.policy) }),
    GuardrailUpdated: (d) => ({ action: 'guardrail.updated', account: d.workspace_id, target: d.guardrail_id, details: guardrailDetails(d.policy) }),
    GuardrailDeleted: (d) => ({ action: 'guardrail.deleted', account: d.workspace_id, target: d.guardrail_id, details: {} }),
    GuardrailAssigned: (d) => ({
      action: 'guardrail.assigned',
      account: d.workspace_id,
      target: d.guardrail_id,
      details: { scope: d.scope, subjects: d.subjects },
    }),
    GuardrailUnassigned: (d) => ({
      action: 'guardrail.unassigned',
      account: d.workspace_id,
      target: d.guardrail_id,
      details: { scope: d.scope, subjects: d.subjects },
    }),
    OrganizationGuardrailSet: (d) => ({ action: 'guardrail.organization_set', account: d.workspace_id, target: d.guardrail_id, details: {} }),
    OrganizationGuardrailRemoved: (d) => ({ action: 'guardrail.organization_removed', account: d.workspace_id, target: d.guardrail_id, details: {} }),
    CreditsAdded: (d) => ({
      action: 'credits.added',
      account: d.account_id,
      target: d.account_id,
      details: { amount_usd: usd(d.amount_nano), reason: d.reason },
    }),
    DailyLimitSet: (d) => ({ action: 'account.daily_limit_set', account: d.account_id, target: d.account_id, details: { daily_limit_usd: usd(d.limit_nano) } }),
    // Issue 23: the operator's name is in the data, since the admin token that authorised it is shared.
    BalanceAdjusted: (d) => ({
      action: 'account.adjusted',
      account: d.account_id,
      target: d.account_id,
      details: { adjustment_id: d.adjustment_id, kind: d.kind, amount_usd: usd(d.amount_nano), reason: d.reason, operator: d.operator },
    }),
  };

/** What a guardrail write set, as the API names it: enough to tell changes apart, not the whole policy. */
function guardrailDetails(p: Extract<GuardrailEvent, { type: 'GuardrailCreated' }>['data']['policy']) {
  return { name: p.name, limit_usd: usd(p.limit_nano), reset_interval: p.reset_interval, enforce_zdr: p.enforce_zdr, data_collection: p.data_collection };
}

async function record(event: RecordedEvent, tx: SqlExecutor): Promise<void> {
  const entry = (ENTRIES as Record<string, (d: unknown) => { action: string; account: string; target: string; details: object }>)[event.type](event.data);
  const m = event.metadata;
  await tx.query(
    `INSERT INTO audit_log (event_id, at, account_id, actor, actor_account_id, ip, action, target_id, details)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      event.id,
      eventTime(event),
      entry.account,
      m.actor ?? 'unknown',
      m.actor_account ?? null,
      m.ip ?? null,
      entry.action,
      entry.target,
      JSON.stringify(entry.details),
    ],
  );
}

/** Who created, updated, rotated or revoked keys and who changed organizations, with IP and time. */
export const auditLogProjection: Projection = perEvent({
  name: 'audit_log',
  tables: ['audit_log'],
  schema: [
    `CREATE TABLE IF NOT EXISTS audit_log (
      event_id text PRIMARY KEY,
      at timestamptz NOT NULL,
      account_id text NOT NULL,
      actor text NOT NULL,
      actor_account_id text,
      ip text,
      action text NOT NULL,
      target_id text NOT NULL,
      details jsonb NOT NULL
    )`,
    `CREATE INDEX IF NOT EXISTS audit_log_account ON audit_log (account_id, at)`,
    `CREATE INDEX IF NOT EXISTS audit_log_actor_account ON audit_log (actor_account_id, at)`,
  ],
  handlers: Object.fromEntries(Object.keys(ENTRIES).map((type) => [type, record])),
});

export interface AuditEntry {
  id: string;
  at: string;
  account_id: string;
  actor: string;
  actor_account_id: string | null;
  ip: string | null;
  action: string;
  target_id: string;
  details: Record<string, unknown>;
}

/** What narrows an audit log read: one kind of action, and a time range (`since` inclusive, `until` exclusive). */
export interface AuditLogFilter {
  action?: string | null;
  since?: Date | null;
  until?: Date | null;
}

/** Entries about an account, or made by it, newest first. */
export async function listAuditLog(sql: SqlExecutor, accountId: string | null, limit = 100, filter: AuditLogFilter = {}): Promise<AuditEntry[]> {
  const { rows } = await sql.query<Record<string, any>>(
    `SELECT * FROM audit_log WHERE ($1::text IS NULL OR account_id = $1 OR actor_account_id = $1) AND ($3::text IS NULL OR action = $3)
        AND ($4::timestamptz IS NULL OR at >= $4) AND ($5::timestamptz IS NULL OR at < $5)
      ORDER BY at DESC, event_id LIMIT $2`,
    [accountId, limit, filter.action ?? null, filter.since?.toISOString() ?? null, filter.until?.toISOString() ?? null],
  );
  return rows.map((r) => ({
    id: r.event_id,
    at: new Date(r.at).toISOString(),
    account_id: r.account_id,
    actor: r.actor,
    actor_account_id: r.actor_account_id,
    ip: r.ip,
    action: r.action,
    target_id: r.target_id,
    details: r.details,
  }));
}
