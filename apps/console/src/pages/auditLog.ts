/** The audit log page's filters and how an entry reads; pure, so the tests can pin them. */
import { ApiFailure } from '../api';
import { usd } from '../format';
import { keyRef, type KeyNames } from '../keyNames';
import type { AuditEntry } from '../records';

/** The audit actions of docs/api/operator.md, in its order: the action filter's suggestions. */
export const AUDIT_ACTIONS = [
  'credits.added',
  'account.daily_limit_set',
  'key.created',
  'key.updated',
  'key.rotated',
  'key.revoked',
  'org.created',
  'org.member_added',
  'org.member_role_changed',
  'org.member_removed',
  'org.deleted',
  'provider_key.saved',
  'provider_key.deleted',
  'settings.prompt_logging_set',
  'settings.step_up_set',
  'webhook.saved',
  'webhook.secret_rotated',
  'webhook.deleted',
  'webhook.paused',
  'webhook.resumed',
  'preset.created',
  'preset.updated',
  'preset.version_added',
  'preset.rolled_back',
  'preset.deleted',
] as const;

/** The API's default page size, and its maximum. */
export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;

/** The filter form as typed: days are `YYYY-MM-DD` from date inputs (UTC), '' when not set. */
export interface AuditFilters {
  action: string;
  from: string;
  to: string;
  limit: string;
}

export const noFilters = (): AuditFilters => ({ action: '', from: '', to: '', limit: String(DEFAULT_LIMIT) });

export type AuditQuery = { action?: string; since?: string; until?: string; limit?: string };

const DAY = /^(\d{4,})-(\d{2})-(\d{2})$/;
/** Days of four-digit years, the only ones that compare as text. */
const ISO_DAY = /^\d{4}-\d{2}-\d{2}$/;

/** The first instant of a UTC day: `since` is inclusive. */
export function dayStart(day: string): string {
  return `${day}T00:00:00Z`;
}

/**
 * The first instant of the day after: `until` is exclusive, so a range "to March 3rd" includes
 * all of March 3rd. A year the date input allows but ISO 8601 does not (five digits) is passed
 * on as it is typed, for the API to refuse with its own words.
 */
export function dayAfter(day: string): string {
  const match = DAY.exec(day);
  if (!match) return dayStart(day);
  const date = new Date(0);
  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0-99 as 1900-1999.
  date.setUTCFullYear(Number(match[1]), Number(match[2]) - 1, Number(match[3]) + 1);
  const pad = (n: number, width: number) => String(n).padStart(width, '0');
  return dayStart(`${pad(date.getUTCFullYear(), 4)}-${pad(date.getUTCMonth() + 1, 2)}-${pad(date.getUTCDate(), 2)}`);
}

/**
 * The query of GET /v1/audit-log for the filters, or the problem the API would not see (a range
 * that ends before it starts answers nothing rather than an error), placed on `until`.
 */
export function auditQuery(filters: AuditFilters): { query: AuditQuery } | { problem: ApiFailure } {
  const action = filters.action.trim();
  const limit = filters.limit.trim();
  if (ISO_DAY.test(filters.from) && ISO_DAY.test(filters.to) && filters.to < filters.from) {
    return {
      problem: new ApiFailure(
        400,
        null,
        'until',
        `The end date (${filters.to}) is before the start date (${filters.from}): choose an end on or after the start.`,
      ),
    };
  }
  return {
    query: {
      ...(action ? { action } : {}),
      ...(filters.from ? { since: dayStart(filters.from) } : {}),
      ...(filters.to ? { until: dayAfter(filters.to) } : {}),
      ...(limit && limit !== String(DEFAULT_LIMIT) ? { limit } : {}),
    },
  };
}

/**
 * Who made a change, in words: a management key by its name where this workspace has one by that
 * id (a key of another account, or one without a name, by its id), the operator's tools otherwise.
 */
export function actorOf(
  entry: Pick<AuditEntry, 'actor' | 'actor_account_id' | 'account_id'>,
  names: KeyNames = new Map(),
): { who: string; key: string | null; keyName: string | null; account: string | null } {
  const account = entry.actor_account_id && entry.actor_account_id !== entry.account_id ? entry.actor_account_id : null;
  const key = keyRef(entry.actor, names);
  if (key) return { who: key.name ? `Key “${key.name}”` : `Key ${key.id}`, key: key.id, keyName: key.name, account };
  const named: Record<string, string> = { admin: 'Operator (admin API)', cli: 'Operator (CLI)', webhooks: 'Webhook dispatcher', unknown: 'Unknown' };
  return { who: Object.hasOwn(named, entry.actor) ? named[entry.actor] : entry.actor, key: null, keyName: null, account };
}

const text = (value: unknown): string => {
  if (value === null || value === undefined) return '—';
  if (Array.isArray(value)) return value.length ? value.map(text).join(', ') : 'none';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
};

const onOff = (value: unknown) => (value === true ? 'on' : value === false ? 'off' : text(value));

/** An entry's `details` as one short line a person reads at a glance. */
export function detailsSummary(entry: Pick<AuditEntry, 'action' | 'details'>): string {
  const d = entry.details ?? {};
  switch (entry.action) {
    case 'credits.added':
      return [usd(d.amount_usd as number | null), d.reason ? `(${text(d.reason)})` : null].filter(Boolean).join(' ');
    case 'account.daily_limit_set':
      return d.daily_limit_usd === null ? 'daily limit removed' : `daily limit ${usd(d.daily_limit_usd as number)}`;
    case 'key.created':
      return [
        d.name ? `“${text(d.name)}”` : 'no name',
        d.scope ? `${text(d.scope)} scope` : null,
        d.environment ? text(d.environment) : null,
        d.org_id ? `in ${text(d.org_id)}` : null,
      ]
        .filter(Boolean)
        .join(', ');
    case 'key.updated':
      return `changed ${text(d.fields)}`;
    case 'key.rotated':
      return d.previous_valid_until ? `old secret valid until ${text(d.previous_valid_until)}` : 'old secret stopped at once';
    case 'org.created':
      return `“${text(d.name)}”`;
    case 'org.member_added':
    case 'org.member_role_changed':
      return `${text(d.account_id)} as ${text(d.role)}`;
    case 'org.member_removed':
      return text(d.account_id);
    case 'provider_key.saved':
      return `${text(d.provider)} ${text(d.hint)}`;
    case 'provider_key.deleted':
      return text(d.provider);
    case 'settings.prompt_logging_set':
      return d.enabled ? `on, kept ${text(d.retention_days)} days` : 'off';
    case 'settings.step_up_set':
      return d.enabled ? `on, codes to ${text(d.email)}` : 'off';
    case 'webhook.saved':
      return [text(d.url), d.events === null ? 'all events' : text(d.events), d.new_secret ? 'new secret' : null].filter(Boolean).join(', ');
    case 'webhook.paused':
      return `after ${text(d.consecutive_failures)} failed deliveries`;
    case 'preset.version_added':
      return `version ${text(d.version)}`;
    case 'preset.rolled_back':
      return `version ${text(d.version)}, back to ${text(d.rolled_back_to)}`;
    default:
      return Object.entries(d)
        .filter(([, v]) => v !== null && v !== undefined)
        .map(([k, v]) => `${k.replace(/_/g, ' ')}: ${typeof v === 'boolean' ? onOff(v) : text(v)}`)
        .join(', ');
  }
}
