import { type Decider, DomainError, type DomainEvent } from '@svc/eventstore';
import type { LimitReset } from '@svc/ledger';
import { isStorableText, MAX_AMOUNT_NANO } from '@svc/platform';

/** The key aggregate (stream `key-<id>`): lifecycle and restrictions of one API key. */
export const keyStream = (keyId: string) => `key-${keyId}`;

export type KeyScope = 'full' | 'read_only' | 'management';
export type KeyEnvironment = 'live' | 'test';
export type { LimitReset };

/** The settable fields of spec 4.19, as recorded (money in nano-USD strings, expiry as a date). */
export interface KeySettings {
  name: string;
  project: string | null;
  environment: KeyEnvironment;
  scope: KeyScope;
  /** Spend limit per `limit_reset` period, nano-USD; null = none. */
  limit_nano: string | null;
  limit_reset: LimitReset;
  allowed_models: string[] | null;
  allowed_ips: string[] | null;
  allowed_referrers: string[] | null;
  rpm_limit: number | null;
  tpm_limit: number | null;
  /** ISO date-time; null = never expires. */
  expires_at: string | null;
}

/** Spec 4.19 defaults: a live full key, no spend limit, resetting monthly, no restrictions. */
export const DEFAULT_KEY_SETTINGS: Readonly<KeySettings> = {
  name: 'Unnamed key',
  project: null,
  environment: 'live',
  scope: 'full',
  limit_nano: null,
  limit_reset: 'monthly',
  allowed_models: null,
  allowed_ips: null,
  allowed_referrers: null,
  rpm_limit: null,
  tpm_limit: null,
  expires_at: null,
};

export type KeyEvent =
  | DomainEvent<
      'KeyCreated',
      KeySettings & {
        key_id: string;
        /** The account billed for the key's use: the workspace owner. */
        account_id: string;
        /** Where the key lives: the account itself, or an organization. */
        workspace_id: string;
        org_id: string | null;
        /** The account that created the key (an organization member, or the account). */
        created_by: string;
        /** SHA-256 of the secret; the secret itself is never recorded. */
        secret_hash: string;
        /** What a user may see again: prefix and last four characters. */
        secret_hint: string;
      }
    >
  | DomainEvent<'KeyUpdated', { key_id: string; account_id: string; changes: Partial<KeySettings> }>
  | DomainEvent<
      'KeyRotated',
      {
        key_id: string;
        account_id: string;
        secret_hash: string;
        secret_hint: string;
        previous_secret_hash: string;
        /** Until when the previous secret still works; null = it stopped at the rotation. */
        previous_valid_until: string | null;
      }
    >
  | DomainEvent<'KeyRevoked', { key_id: string; account_id: string }>
  /** Spec 6.1 `key.expiring`: 7 days and 1 day before `expires_at`. */
  | DomainEvent<'KeyExpiring', { key_id: string; account_id: string; expires_at: string; days_before: number }>;

export type KeyCommand =
  | {
      type: 'CreateKey';
      keyId: string;
      accountId: string;
      workspaceId: string;
      orgId: string | null;
      createdBy: string;
      settings: KeySettings;
      secretHash: string;
      secretHint: string;
    }
  | { type: 'UpdateKey'; changes: Partial<KeySettings> }
  | { type: 'RotateKey'; secretHash: string; secretHint: string; graceSeconds: number }
  | { type: 'RevokeKey' }
  /** The worker's periodic look: records the expiry notice due now, if one is and it is not yet recorded. */
  | { type: 'NoteKeyExpiring' };

export interface KeyState {
  keyId: string | null;
  accountId: string | null;
  secretHash: string | null;
  settings: KeySettings | null;
  revoked: boolean;
  /** Expiry notices recorded, as `<expires_at>:<days_before>`: a new expiry date gets its own. */
  expiryNotices: readonly string[];
}

/** Spec 6.1: `key.expiring` goes out 7 days and again 1 day before a key expires. */
export const KEY_EXPIRY_NOTICE_DAYS: readonly number[] = [1, 7];
const DAY_MS = 24 * 3600_000;

/**
 * The notice due at `now` for a key expiring at `expiresAt`: the nearest threshold already
 * reached (a key made to expire in 12 hours gets the 1-day notice only), none once expired.
 */
export function expiryNoticeDue(expiresAt: string, now: Date): number | null {
  const remaining = new Date(expiresAt).getTime() - now.getTime();
  if (remaining <= 0) return null;
  return KEY_EXPIRY_NOTICE_DAYS.find((days) => remaining <= days * DAY_MS) ?? null;
}

/** Largest rpm_limit and tpm_limit: the read model keeps them as PostgreSQL `integer`. */
export const MAX_INTEGER_SETTING = 2_147_483_647;
/** Entries of allowed_models, allowed_ips and allowed_referrers, and the length of each. */
export const MAX_LIST_ENTRIES = 1000;
export const MAX_LIST_ENTRY_LENGTH = 200;
const MAX_TEXT_LENGTH = 200;

const ENVIRONMENTS: readonly unknown[] = ['live', 'test'];
const SCOPES: readonly unknown[] = ['full', 'read_only', 'management'];
const RESETS: readonly unknown[] = ['daily', 'weekly', 'monthly', 'never'];

const isText = (v: unknown, max = MAX_TEXT_LENGTH): boolean => typeof v === 'string' && v.length <= max && isStorableText(v);
const isList = (v: unknown): boolean =>
  v === null || (Array.isArray(v) && v.length <= MAX_LIST_ENTRIES && v.every((entry) => isText(entry, MAX_LIST_ENTRY_LENGTH)));
const isCount = (v: unknown): boolean => v === null || (Number.isSafeInteger(v) && (v as number) >= 1 && (v as number) <= MAX_INTEGER_SETTING);

/**
 * What every reader of KeyCreated and KeyUpdated can hold, field by field (the identity read
 * model's columns first of all). The edge validates requests the same way; this is the rule
 * itself, so no caller (CLI, operator API, a future one) can append a key a projection would
 * choke on, which would stop key writes and revocations for every account.
 */
const SETTING_RULES: { readonly [F in keyof KeySettings]: (value: unknown) => boolean } = {
  name: (v) => isText(v),
  project: (v) => v === null || isText(v),
  environment: (v) => ENVIRONMENTS.includes(v),
  scope: (v) => SCOPES.includes(v),
  limit_nano: (v) => v === null || (typeof v === 'string' && /^\d{1,19}$/.test(v) && BigInt(v) <= MAX_AMOUNT_NANO),
  limit_reset: (v) => RESETS.includes(v),
  allowed_models: isList,
  allowed_ips: isList,
  allowed_referrers: isList,
  rpm_limit: isCount,
  tpm_limit: isCount,
  expires_at: (v) => v === null || (typeof v === 'string' && !Number.isNaN(Date.parse(v)) && new Date(v).toISOString() === v),
};

function checkSettings(settings: Partial<KeySettings>): void {
  for (const [field, value] of Object.entries(settings)) {
    const rule = SETTING_RULES[field as keyof KeySettings] as ((value: unknown) => boolean) | undefined;
    if (!rule) throw new DomainError('invalid_key_settings', `${field} is not a key setting.`, { param: field });
    if (!rule(value))
      throw new DomainError('invalid_key_settings', `${field} has a value a key cannot have.`, { param: field === 'limit_nano' ? 'limit' : field });
  }
}

/** Longest grace period during which a rotated secret keeps working. */
export const MAX_ROTATION_GRACE_SECONDS = 7 * 24 * 3600;

function requireLive(state: KeyState): { keyId: string; accountId: string; secretHash: string } {
  if (state.keyId === null || state.accountId === null || state.secretHash === null) {
    throw new DomainError('key_not_found', 'The key does not exist.');
  }
  if (state.revoked) throw new DomainError('key_revoked', 'The key is revoked.');
  return { keyId: state.keyId, accountId: state.accountId, secretHash: state.secretHash };
}

export const keyDecider: Decider<KeyCommand, KeyState, KeyEvent> = {
  initialState: () => ({ keyId: null, accountId: null, secretHash: null, settings: null, revoked: false, expiryNotices: [] }),

  decide(command, state, now) {
    switch (command.type) {
      case 'CreateKey':
        if (state.keyId !== null) throw new DomainError('key_exists', 'The key already exists.');
        checkSettings(command.settings);
        for (const field of Object.keys(SETTING_RULES)) {
          if (!(field in command.settings)) throw new DomainError('invalid_key_settings', `${field} is missing.`, { param: field });
        }
        return [
          {
            type: 'KeyCreated',
            data: {
              key_id: command.keyId,
              account_id: command.accountId,
              workspace_id: command.workspaceId,
              org_id: command.orgId,
              created_by: command.createdBy,
              ...command.settings,
              secret_hash: command.secretHash,
              secret_hint: command.secretHint,
            },
          },
        ];

      case 'UpdateKey': {
        const { keyId, accountId } = requireLive(state);
        const current = state.settings as KeySettings;
        checkSettings(command.changes);
        // Only what actually changes is recorded, so the audit log shows real changes.
        const changes = Object.fromEntries(
          Object.entries(command.changes).filter(([field, value]) => JSON.stringify(current[field as keyof KeySettings]) !== JSON.stringify(value)),
        ) as Partial<KeySettings>;
        if (Object.keys(changes).length === 0) return [];
        return [{ type: 'KeyUpdated', data: { key_id: keyId, account_id: accountId, changes } }];
      }

      case 'RotateKey': {
        const { keyId, accountId, secretHash } = requireLive(state);
        if (!Number.isInteger(command.graceSeconds) || command.graceSeconds < 0 || command.graceSeconds > MAX_ROTATION_GRACE_SECONDS) {
          throw new DomainError('invalid_grace_period', `The grace period must be 0 to ${MAX_ROTATION_GRACE_SECONDS} seconds.`);
        }
        return [
          {
            type: 'KeyRotated',
            data: {
              key_id: keyId,
              account_id: accountId,
              secret_hash: command.secretHash,
              secret_hint: command.secretHint,
              previous_secret_hash: secretHash,
              previous_valid_until: command.graceSeconds === 0 ? null : new Date(now.getTime() + command.graceSeconds * 1000).toISOString(),
            },
          },
        ];
      }

      case 'RevokeKey':
        if (state.keyId === null || state.accountId === null) throw new DomainError('key_not_found', 'The key does not exist.');
        if (state.revoked) return [];
        return [{ type: 'KeyRevoked', data: { key_id: state.keyId, account_id: state.accountId } }];

      case 'NoteKeyExpiring': {
        const expiresAt = state.settings?.expires_at;
        if (state.keyId === null || state.accountId === null || state.revoked || !expiresAt) return [];
        const days = expiryNoticeDue(expiresAt, now);
        if (days === null || state.expiryNotices.includes(`${expiresAt}:${days}`)) return [];
        return [{ type: 'KeyExpiring', data: { key_id: state.keyId, account_id: state.accountId, expires_at: expiresAt, days_before: days } }];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'KeyCreated': {
        const { key_id, account_id, workspace_id: _w, org_id: _o, created_by: _c, secret_hash, secret_hint: _h, ...settings } = event.data;
        return { keyId: key_id, accountId: account_id, secretHash: secret_hash, settings, revoked: false, expiryNotices: [] };
      }
      case 'KeyUpdated':
        return { ...state, settings: { ...(state.settings as KeySettings), ...event.data.changes } };
      case 'KeyRotated':
        return { ...state, secretHash: event.data.secret_hash };
      case 'KeyRevoked':
        return { ...state, revoked: true };
      case 'KeyExpiring':
        return { ...state, expiryNotices: [...state.expiryNotices, `${event.data.expires_at}:${event.data.days_before}`] };
      default:
        return state;
    }
  },
};
