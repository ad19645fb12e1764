/**
 * The key form's values (what the inputs hold, as typed) to the body of POST and PATCH /v1/keys
 * (spec 4.19), and a key record back to values. Pure, so the rules that decide what is sent can
 * be pinned by tests.
 */
import type { Environment, KeyRecord, LimitReset, Scope } from '../records';

/** The form as typed: every input's text. */
export interface KeyFormValues {
  name: string;
  project: string;
  environment: Environment;
  scope: Scope;
  limit: string;
  limit_reset: LimitReset;
  allowed_models: string;
  allowed_ips: string;
  allowed_referrers: string;
  rpm_limit: string;
  tpm_limit: string;
  expires_in_days: string;
}

/** The body fields of spec 4.19; `null` clears a field on PATCH. */
export interface KeyBody {
  name?: string;
  project?: string | null;
  environment?: Environment;
  scope?: Scope;
  limit?: number | null;
  limit_reset?: LimitReset;
  allowed_models?: string[] | null;
  allowed_ips?: string[] | null;
  allowed_referrers?: string[] | null;
  rpm_limit?: number | null;
  tpm_limit?: number | null;
  expires_in_days?: number | null;
}

/** A value the form can tell is wrong before sending, named as the API would name it. */
export interface FormProblem {
  param: keyof KeyFormValues;
  message: string;
}

export type Checked<T> = { body: T; problem?: undefined } | { body?: undefined; problem: FormProblem };

/** The form's fields in the order they are shown (and the order a problem is reported in). */
export const KEY_FIELDS: (keyof KeyFormValues)[] = [
  'name',
  'project',
  'environment',
  'scope',
  'limit',
  'limit_reset',
  'allowed_models',
  'allowed_ips',
  'allowed_referrers',
  'rpm_limit',
  'tpm_limit',
  'expires_in_days',
];

export function emptyKeyForm(): KeyFormValues {
  return {
    name: '',
    project: '',
    environment: 'live',
    scope: 'full',
    limit: '',
    limit_reset: 'monthly',
    allowed_models: '',
    allowed_ips: '',
    allowed_referrers: '',
    rpm_limit: '',
    tpm_limit: '',
    expires_in_days: '',
  };
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** Whole days until `expiresAt`, rounded up so a key expiring later today still shows 1. */
export function daysUntil(expiresAt: string, now: Date): number {
  return Math.max(0, Math.ceil((new Date(expiresAt).getTime() - now.getTime()) / DAY_MS));
}

/** A key's settings as the edit form shows them. */
export function keyFormOf(key: KeyRecord, now: Date): KeyFormValues {
  const list = (values: string[] | null) => (values ?? []).join('\n');
  const number = (value: number | null) => (value === null ? '' : String(value));
  return {
    name: key.name ?? '',
    project: key.project ?? '',
    environment: key.environment,
    scope: key.scope,
    limit: number(key.limit),
    limit_reset: key.limit_reset,
    allowed_models: list(key.allowed_models),
    allowed_ips: list(key.allowed_ips),
    allowed_referrers: list(key.allowed_referrers),
    rpm_limit: number(key.rpm_limit),
    tpm_limit: number(key.tpm_limit),
    expires_in_days: key.expires_at === null ? '' : String(daysUntil(key.expires_at, now)),
  };
}

/** Entries separated by commas or line breaks, trimmed; an empty text is no list (null). */
export function listOf(text: string): string[] | null {
  const entries = text
    .split(/[,\n]/)
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  return entries.length === 0 ? null : entries;
}

/** USD as typed ("5", "12.50", "$1"); null when empty; NaN when it is not an amount. */
export function amountOf(text: string): number | null {
  const trimmed = text.trim().replace(/^\$\s*/, '');
  if (trimmed === '') return null;
  return /^\d+(\.\d+)?$|^\.\d+$/.test(trimmed) ? Number(trimmed) : NaN;
}

/** A number as typed; null when empty; NaN when it is not a number. Ranges are the API's to check. */
function numberOf(text: string): number | null {
  const trimmed = text.trim().replace(/[_\s]/g, '');
  if (trimmed === '') return null;
  return /^-?\d+(\.\d+)?$/.test(trimmed) ? Number(trimmed) : NaN;
}

const NUMBER_MESSAGES: Record<'limit' | 'rpm_limit' | 'tpm_limit' | 'expires_in_days', string> = {
  limit: 'The limit must be an amount in USD, such as 5 or 12.50, or empty for no limit.',
  rpm_limit: 'Requests per minute must be a whole number, or empty for the default.',
  tpm_limit: 'Tokens per minute must be a whole number, or empty for the default.',
  expires_in_days: 'Expires in must be a whole number of days, or empty for a key that does not expire.',
};

/** Every field as the API takes it, empty ones as null; or the first value that is not a number. */
function fieldsOf(values: KeyFormValues): Checked<Required<KeyBody>> {
  const limit = amountOf(values.limit);
  const numbers = { rpm_limit: numberOf(values.rpm_limit), tpm_limit: numberOf(values.tpm_limit), expires_in_days: numberOf(values.expires_in_days) };
  for (const [param, value] of [['limit', limit], ...Object.entries(numbers)] as [keyof typeof NUMBER_MESSAGES, number | null][]) {
    if (value !== null && Number.isNaN(value)) return { problem: { param, message: NUMBER_MESSAGES[param] } };
  }
  const project = values.project.trim();
  return {
    body: {
      // The API refuses a null name, so an emptied one is sent as the empty text it is.
      name: values.name.trim(),
      project: project === '' ? null : project,
      environment: values.environment,
      scope: values.scope,
      limit,
      limit_reset: values.limit_reset,
      allowed_models: listOf(values.allowed_models),
      allowed_ips: listOf(values.allowed_ips),
      allowed_referrers: listOf(values.allowed_referrers),
      ...numbers,
    },
  };
}

/** POST /v1/keys: what the form holds, leaving out what is empty so the API's defaults apply. */
export function createKeyBody(values: KeyFormValues): Checked<KeyBody> {
  const checked = fieldsOf(values);
  if (!checked.body) return checked;
  const body: KeyBody = {};
  for (const [field, value] of Object.entries(checked.body)) {
    if (value !== null && value !== '') Object.assign(body, { [field]: value });
  }
  return { body };
}

/**
 * PATCH /v1/keys/{id}: only what changed from `initial` (the form as it was opened), an emptied
 * field as null (which clears it). Sending only changes keeps an untouched expiry from being
 * moved, and an untouched management scope from asking for a step-up code.
 */
export function updateKeyBody(initial: KeyFormValues, values: KeyFormValues): Checked<KeyBody> {
  const before = fieldsOf(initial);
  const after = fieldsOf(values);
  if (!after.body) return after;
  const body: KeyBody = {};
  for (const [field, value] of Object.entries(after.body) as [keyof KeyBody, unknown][]) {
    const old = before.body?.[field];
    if (JSON.stringify(old) !== JSON.stringify(value)) Object.assign(body, { [field]: value });
  }
  return { body };
}

export type KeyStatus = 'revoked' | 'expired' | 'active';

export function keyStatus(key: Pick<KeyRecord, 'revoked' | 'expires_at'>, now: Date): KeyStatus {
  if (key.revoked) return 'revoked';
  if (key.expires_at !== null && new Date(key.expires_at).getTime() <= now.getTime()) return 'expired';
  return 'active';
}

/** The grace periods a rotation offers (docs/api/endpoints.md: 0 to 604800 seconds). */
export const GRACE_PERIODS: { seconds: number; label: string }[] = [
  { seconds: 0, label: 'None: the old secret stops working now' },
  { seconds: 3600, label: '1 hour' },
  { seconds: 86_400, label: '24 hours' },
  { seconds: 604_800, label: '7 days' },
];

/** The step-up action the server asks for (apps/gateway/src/keys/keys.controller.ts). */
export function createAction(body: KeyBody): 'grant_management' | 'create_key' {
  return body.scope === 'management' ? 'grant_management' : 'create_key';
}

/** An update needs a code only when it sends the management scope, whatever the key had. */
export function updateAction(body: KeyBody): 'grant_management' | null {
  return body.scope === 'management' ? 'grant_management' : null;
}
