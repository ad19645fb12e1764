import type { RecordedEvent } from '@svc/eventstore';
import type { AppliedGuardrail } from '@svc/guardrails';
import type { LimitReset } from '@svc/ledger';
import type { Caller, KeyRecord, SecretMatch } from '../authenticate';
import type { KeyEnvironment, KeyEvent, KeyScope, KeySettings } from '../key';
import type { OrgEvent, OrgRole } from '../organization';
import type { SqlExecutor } from '@svc/platform';
import { eventTime, perEvent, type Projection } from '@svc/projections';

type Ev<E extends { type: string; data: unknown }, T extends E['type']> = RecordedEvent<T, Extract<E, { type: T }>['data']>;
type K<T extends KeyEvent['type']> = Ev<KeyEvent, T>;
type O<T extends OrgEvent['type']> = Ev<OrgEvent, T>;

const SETTINGS_COLUMNS = [
  'name',
  'project',
  'environment',
  'scope',
  'limit_nano',
  'limit_reset',
  'allowed_models',
  'allowed_ips',
  'allowed_referrers',
  'rpm_limit',
  'tpm_limit',
  'expires_at',
] as const satisfies readonly (keyof KeySettings)[];
const JSON_COLUMNS = new Set(['allowed_models', 'allowed_ips', 'allowed_referrers']);

const value = (column: string, v: unknown) => (JSON_COLUMNS.has(column) && v !== null ? JSON.stringify(v) : v);

/**
 * Keys, their secrets (current and, during a rotation's grace period, previous) and
 * organizations: one projection, because authentication joins them and must see them at
 * one position of the log.
 */
export const identityProjection: Projection = perEvent({
  name: 'identity',
  tables: ['api_key_secrets', 'api_keys', 'org_members', 'organizations'],
  schema: [
    `CREATE TABLE IF NOT EXISTS api_keys (
      key_id text PRIMARY KEY,
      account_id text NOT NULL,
      workspace_id text NOT NULL,
      org_id text,
      created_by text NOT NULL,
      name text NOT NULL,
      project text,
      environment text NOT NULL,
      scope text NOT NULL,
      limit_nano bigint,
      limit_reset text NOT NULL,
      allowed_models jsonb,
      allowed_ips jsonb,
      allowed_referrers jsonb,
      rpm_limit integer,
      tpm_limit integer,
      expires_at timestamptz,
      secret_hint text NOT NULL,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      revoked_at timestamptz
    )`,
    `CREATE INDEX IF NOT EXISTS api_keys_workspace ON api_keys (workspace_id, created_at)`,
    `CREATE TABLE IF NOT EXISTS api_key_secrets (
      secret_hash text PRIMARY KEY,
      key_id text NOT NULL,
      valid_until timestamptz
    )`,
    `CREATE TABLE IF NOT EXISTS organizations (
      org_id text PRIMARY KEY,
      owner_account_id text NOT NULL,
      name text NOT NULL,
      created_at timestamptz NOT NULL,
      deleted_at timestamptz
    )`,
    `CREATE TABLE IF NOT EXISTS org_members (
      org_id text NOT NULL,
      account_id text NOT NULL,
      role text NOT NULL,
      added_at timestamptz NOT NULL,
      PRIMARY KEY (org_id, account_id)
    )`,
  ],
  handlers: {
    KeyCreated: async (e: K<'KeyCreated'>, tx) => {
      const d = e.data;
      const columns = ['key_id', 'account_id', 'workspace_id', 'org_id', 'created_by', ...SETTINGS_COLUMNS, 'secret_hint', 'created_at', 'updated_at'];
      const values = [
        d.key_id,
        d.account_id,
        d.workspace_id,
        d.org_id,
        d.created_by,
        ...SETTINGS_COLUMNS.map((c) => value(c, d[c])),
        d.secret_hint,
        eventTime(e),
        eventTime(e),
      ];
      await tx.query(`INSERT INTO api_keys (${columns.join(', ')}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')})`, values);
      await tx.query('INSERT INTO api_key_secrets (secret_hash, key_id) VALUES ($1, $2)', [d.secret_hash, d.key_id]);
    },
    KeyUpdated: async (e: K<'KeyUpdated'>, tx) => {
      const changes = Object.entries(e.data.changes).filter(([c]) => (SETTINGS_COLUMNS as readonly string[]).includes(c));
      const sets = changes.map(([c], i) => `${c} = $${i + 3}`);
      await tx.query(`UPDATE api_keys SET ${['updated_at = $2', ...sets].join(', ')} WHERE key_id = $1`, [
        e.data.key_id,
        eventTime(e),
        ...changes.map(([c, v]) => value(c, v)),
      ]);
    },
    KeyRotated: async (e: K<'KeyRotated'>, tx) => {
      const d = e.data;
      await tx.query('INSERT INTO api_key_secrets (secret_hash, key_id) VALUES ($1, $2)', [d.secret_hash, d.key_id]);
      if (d.previous_valid_until === null) await tx.query('DELETE FROM api_key_secrets WHERE secret_hash = $1', [d.previous_secret_hash]);
      else await tx.query('UPDATE api_key_secrets SET valid_until = $2 WHERE secret_hash = $1', [d.previous_secret_hash, d.previous_valid_until]);
      await tx.query('UPDATE api_keys SET secret_hint = $2, updated_at = $3 WHERE key_id = $1', [d.key_id, d.secret_hint, eventTime(e)]);
    },
    KeyRevoked: async (e: K<'KeyRevoked'>, tx) => {
      await tx.query('UPDATE api_keys SET revoked_at = $2, updated_at = $2 WHERE key_id = $1', [e.data.key_id, eventTime(e)]);
    },
    OrgCreated: async (e: O<'OrgCreated'>, tx) => {
      await tx.query('INSERT INTO organizations (org_id, owner_account_id, name, created_at) VALUES ($1, $2, $3, $4)', [
        e.data.org_id,
        e.data.owner_account_id,
        e.data.name,
        eventTime(e),
      ]);
    },
    MemberAdded: async (e: O<'MemberAdded'>, tx) => {
      await tx.query('INSERT INTO org_members (org_id, account_id, role, added_at) VALUES ($1, $2, $3, $4)', [
        e.data.org_id,
        e.data.account_id,
        e.data.role,
        eventTime(e),
      ]);
    },
    MemberRoleChanged: async (e: O<'MemberRoleChanged'>, tx) => {
      await tx.query('UPDATE org_members SET role = $3 WHERE org_id = $1 AND account_id = $2', [e.data.org_id, e.data.account_id, e.data.role]);
    },
    MemberRemoved: async (e: O<'MemberRemoved'>, tx) => {
      await tx.query('DELETE FROM org_members WHERE org_id = $1 AND account_id = $2', [e.data.org_id, e.data.account_id]);
    },
    OrgDeleted: async (e: O<'OrgDeleted'>, tx) => {
      await tx.query('UPDATE organizations SET deleted_at = $2 WHERE org_id = $1', [e.data.org_id, eventTime(e)]);
    },
  },
});

export type ApiKeyRow = KeyRecord;

const iso = (v: unknown) => (v === null || v === undefined ? null : new Date(v as string | Date).toISOString());

function toRow(r: Record<string, any>): ApiKeyRow {
  return {
    keyId: r.key_id,
    accountId: r.account_id,
    workspaceId: r.workspace_id,
    orgId: r.org_id,
    createdBy: r.created_by,
    name: r.name,
    project: r.project,
    environment: r.environment as KeyEnvironment,
    scope: r.scope as KeyScope,
    limit_nano: r.limit_nano,
    limit_reset: r.limit_reset as LimitReset,
    allowed_models: r.allowed_models,
    allowed_ips: r.allowed_ips,
    allowed_referrers: r.allowed_referrers,
    rpm_limit: r.rpm_limit,
    tpm_limit: r.tpm_limit,
    expires_at: iso(r.expires_at),
    secretHint: r.secret_hint,
    createdAt: iso(r.created_at)!,
    updatedAt: iso(r.updated_at)!,
    revokedAt: iso(r.revoked_at),
  };
}

/**
 * Issue 44: the guardrails that apply to the key, widest first: the organization's (assigned to
 * the workspace), its member's (the key's creator, for a key of an organization) and the key's
 * own. Read with the key, by primary key, so a request pays no read of its own and a change
 * reaches every gateway through the same invalidation as a key change (AUTH_CACHED_PROJECTIONS).
 */
const GUARDRAILS_OF_KEY = `(SELECT json_agg(json_build_object('id', g.guardrail_id, 'scope', a.scope, 'subject', a.subject, 'policy', g.policy, 'updated_at', g.updated_at)
                      ORDER BY CASE a.scope WHEN 'organization' THEN 0 WHEN 'member' THEN 1 ELSE 2 END)
               FROM guardrail_assignments a JOIN guardrails g ON g.guardrail_id = a.guardrail_id
              WHERE (a.workspace_id, a.scope, a.subject) IN ((k.workspace_id, 'organization', k.workspace_id), (k.workspace_id, 'member', k.created_by), (k.workspace_id, 'key', k.key_id))
                AND (a.scope <> 'member' OR k.org_id IS NOT NULL)) AS guardrails`;

function guardrailsOf(v: unknown): AppliedGuardrail[] {
  const rows = (typeof v === 'string' ? JSON.parse(v) : v) as
    { id: string; scope: AppliedGuardrail['scope']; subject: string; policy: unknown; updated_at: string }[] | null;
  return (rows ?? []).map((r) => ({
    id: r.id,
    scope: r.scope,
    subject: r.subject,
    policy: (typeof r.policy === 'string' ? JSON.parse(r.policy) : r.policy) as AppliedGuardrail['policy'],
    updatedAt: new Date(r.updated_at).toISOString(),
  }));
}

/** A json column: an object from PostgreSQL, a string from some drivers. */
const json = (v: unknown): Record<string, any> | null => (typeof v === 'string' ? JSON.parse(v) : (v as Record<string, any> | null));

export async function findKeyBySecretHash(sql: SqlExecutor, secretHash: string): Promise<SecretMatch | null> {
  const { rows } = await sql.query<Record<string, any>>(
    `SELECT k.*, s.secret_hash, s.valid_until,
            (k.org_id IS NULL OR (o.deleted_at IS NULL AND (o.owner_account_id = k.created_by OR m.account_id IS NOT NULL))) AS org_active,
            (SELECT json_object_agg(p.provider, p.encrypted_key) FROM provider_keys p WHERE p.account_id = k.account_id) AS provider_keys,
            (SELECT st.prompt_logging_retention_days FROM account_settings st WHERE st.account_id = k.account_id AND st.prompt_logging_enabled) AS prompt_log_days,
            (SELECT json_object_agg(ps.slug, json_build_object('version', ps.version, 'config', ps.config)) FROM presets ps WHERE ps.workspace_id = k.workspace_id) AS presets,
            ${GUARDRAILS_OF_KEY}
       FROM api_key_secrets s
       JOIN api_keys k ON k.key_id = s.key_id
       LEFT JOIN organizations o ON o.org_id = k.org_id
       LEFT JOIN org_members m ON m.org_id = k.org_id AND m.account_id = k.created_by
      WHERE s.secret_hash = $1`,
    [secretHash],
    { prepare: 'identity_key_by_secret' },
  );
  const r = rows[0];
  if (!r) return null;
  const sealedProviderKeys = new Map<string, string>(Object.entries(r.provider_keys ?? {}));
  return {
    ...toRow(r),
    secretHash: r.secret_hash,
    secretValidUntil: iso(r.valid_until),
    orgActive: r.org_active === true,
    sealedProviderKeys,
    promptLogDays: r.prompt_log_days ?? null,
    presets: new Map(Object.entries(json(r.presets) ?? {})),
    guardrails: guardrailsOf(r.guardrails),
  };
}

/**
 * A key as a request would find it, by id: what a job (a batch's lines) runs as, long after the
 * request that started it. Null when the key is gone, revoked, expired or its organization
 * inactive at `now`: the job's remaining work is then refused as a request with that key would be.
 */
export async function callerOfKey(sql: SqlExecutor, keyId: string, now: Date): Promise<Caller | null> {
  const { rows } = await sql.query<Record<string, any>>(
    `SELECT k.*,
            (k.org_id IS NULL OR (o.deleted_at IS NULL AND (o.owner_account_id = k.created_by OR m.account_id IS NOT NULL))) AS org_active,
            (SELECT json_object_agg(p.provider, p.encrypted_key) FROM provider_keys p WHERE p.account_id = k.account_id) AS provider_keys,
            (SELECT st.prompt_logging_retention_days FROM account_settings st WHERE st.account_id = k.account_id AND st.prompt_logging_enabled) AS prompt_log_days,
            (SELECT json_object_agg(ps.slug, json_build_object('version', ps.version, 'config', ps.config)) FROM presets ps WHERE ps.workspace_id = k.workspace_id) AS presets,
            ${GUARDRAILS_OF_KEY}
       FROM api_keys k
       LEFT JOIN organizations o ON o.org_id = k.org_id
       LEFT JOIN org_members m ON m.org_id = k.org_id AND m.account_id = k.created_by
      WHERE k.key_id = $1`,
    [keyId],
  );
  const r = rows[0];
  if (!r || r.revoked_at !== null || r.org_active !== true) return null;
  const key = toRow(r);
  if (key.expires_at !== null && Date.parse(key.expires_at) <= now.getTime()) return null;
  return {
    ...key,
    sealedProviderKeys: new Map<string, string>(Object.entries(json(r.provider_keys) ?? {})),
    promptLogDays: r.prompt_log_days ?? null,
    presets: new Map(Object.entries(json(r.presets) ?? {})),
    guardrails: guardrailsOf(r.guardrails),
  };
}

export async function getKey(sql: SqlExecutor, keyId: string): Promise<ApiKeyRow | null> {
  const { rows } = await sql.query<Record<string, any>>('SELECT * FROM api_keys WHERE key_id = $1', [keyId]);
  return rows[0] ? toRow(rows[0]) : null;
}

/** Keys of a workspace, newest first; `createdBy` narrows to one member's keys. */
export async function listKeys(sql: SqlExecutor, workspaceId: string, createdBy?: string): Promise<ApiKeyRow[]> {
  const { rows } = await sql.query<Record<string, any>>(
    `SELECT * FROM api_keys WHERE workspace_id = $1 AND ($2::text IS NULL OR created_by = $2) ORDER BY created_at DESC, key_id`,
    [workspaceId, createdBy ?? null],
  );
  return rows.map(toRow);
}

export interface OrgRow {
  orgId: string;
  ownerAccountId: string;
  name: string;
  createdAt: string;
  deleted: boolean;
}

export async function getOrg(sql: SqlExecutor, orgId: string): Promise<OrgRow | null> {
  const { rows } = await sql.query<Record<string, any>>('SELECT * FROM organizations WHERE org_id = $1', [orgId]);
  const r = rows[0];
  return r ? { orgId: r.org_id, ownerAccountId: r.owner_account_id, name: r.name, createdAt: iso(r.created_at)!, deleted: r.deleted_at !== null } : null;
}

/** An organization as one of its people sees it: with that account's role. */
export interface AccountOrgRow extends Omit<OrgRow, 'deleted'> {
  role: OrgRole;
}

/** The organizations that still exist and the account owns or is a member of, oldest first. */
export async function listOrgsOf(sql: SqlExecutor, accountId: string): Promise<AccountOrgRow[]> {
  const { rows } = await sql.query<Record<string, any>>(
    `SELECT o.*, 'owner' AS role FROM organizations o WHERE o.owner_account_id = $1 AND o.deleted_at IS NULL
     UNION ALL
     SELECT o.*, m.role FROM org_members m JOIN organizations o ON o.org_id = m.org_id
      WHERE m.account_id = $1 AND o.deleted_at IS NULL
     ORDER BY created_at, org_id`,
    [accountId],
  );
  return rows.map((r) => ({ orgId: r.org_id, ownerAccountId: r.owner_account_id, name: r.name, createdAt: iso(r.created_at)!, role: r.role as OrgRole }));
}

export interface OrgMemberRow {
  accountId: string;
  role: OrgRole;
  /** When the account joined: the organization's creation for its owner. */
  addedAt: string;
}

/** Everyone in an organization, its owner first (the owner has no member row), then members as they joined. */
export async function listOrgMembers(sql: SqlExecutor, orgId: string): Promise<OrgMemberRow[]> {
  const { rows } = await sql.query<Record<string, any>>(
    `SELECT owner_account_id AS account_id, 'owner' AS role, created_at AS added_at, 0 AS rank FROM organizations WHERE org_id = $1
     UNION ALL
     SELECT account_id, role, added_at, 1 AS rank FROM org_members WHERE org_id = $1
     ORDER BY rank, added_at, account_id`,
    [orgId],
  );
  return rows.map((r) => ({ accountId: r.account_id, role: r.role as OrgRole, addedAt: iso(r.added_at)! }));
}

/** An account's role in an organization that still exists; null when it has none. */
export async function orgRoleOf(sql: SqlExecutor, orgId: string, accountId: string): Promise<OrgRole | null> {
  const { rows } = await sql.query<{ role: OrgRole }>(
    `SELECT 'owner' AS role FROM organizations WHERE org_id = $1 AND owner_account_id = $2 AND deleted_at IS NULL
     UNION ALL
     SELECT m.role FROM org_members m JOIN organizations o ON o.org_id = m.org_id
      WHERE m.org_id = $1 AND m.account_id = $2 AND o.deleted_at IS NULL`,
    [orgId, accountId],
  );
  return rows[0]?.role ?? null;
}

/** Live keys expiring after `now` and by `until`: those a `key.expiring` notice may be due for (spec 6.1). */
export async function keysExpiringBy(sql: SqlExecutor, now: Date, until: Date): Promise<string[]> {
  const { rows } = await sql.query<{ key_id: string }>(
    'SELECT key_id FROM api_keys WHERE revoked_at IS NULL AND expires_at > $1 AND expires_at <= $2 ORDER BY expires_at',
    [now.toISOString(), until.toISOString()],
  );
  return rows.map((r) => r.key_id);
}
