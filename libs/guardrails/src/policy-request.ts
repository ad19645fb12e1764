import { DomainError, isStorableText, MAX_AMOUNT_NANO, usdToNano } from '@svc/platform';
import { parseContentPolicy } from './content/policy';
import type { BudgetReset, GuardrailPolicy } from './guardrail';

/**
 * The body of `POST /v1/guardrails` and `PATCH /v1/guardrails/{id}` (issue 44, shaped like
 * OpenRouter's so its clients port over), checked field by field: a refusal names the field.
 * PATCH sends only what changes; `null` clears an optional field.
 */
const FIELDS = [
  'name',
  'description',
  'limit_usd',
  'reset_interval',
  'include_byok_in_budgets',
  'allowed_models',
  'ignored_models',
  'allowed_providers',
  'ignored_providers',
  'enforce_zdr',
  'data_collection',
  'content_filter_builtins',
  'content_filters',
] as const;

const RESETS: readonly BudgetReset[] = ['daily', 'weekly', 'monthly', 'never'];
/** Bounds that keep a guardrail (an event, a row, a per-request check) small. */
const MAX_NAME = 200;
const MAX_DESCRIPTION = 2000;
const MAX_LIST = 500;
const MAX_ID = 200;

export const DEFAULT_POLICY: Omit<GuardrailPolicy, 'name'> = {
  description: null,
  limit_nano: null,
  reset_interval: 'never',
  include_byok_in_budgets: false,
  allowed_models: null,
  ignored_models: [],
  allowed_providers: null,
  ignored_providers: [],
  enforce_zdr: false,
  data_collection: 'allow',
  content_filter_builtins: [],
  content_filters: [],
};

const invalid = (param: string, message: string) => DomainError.invalid(message, param, 'invalid_guardrail');

function text(value: unknown, param: string, max: number): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > max || !isStorableText(value)) {
    throw invalid(param, `${param} is a non-empty string of at most ${max} characters.`);
  }
  return value;
}

function flag(value: unknown, param: string): boolean {
  if (typeof value !== 'boolean') throw invalid(param, `${param} is true or false.`);
  return value;
}

function oneOf<T extends string>(value: unknown, param: string, allowed: readonly T[]): T {
  if (typeof value !== 'string' || !allowed.includes(value as T)) throw invalid(param, `${param} is one of ${allowed.join(', ')}.`);
  return value as T;
}

function ids(value: unknown, param: string): string[] {
  if (!Array.isArray(value) || value.length > MAX_LIST) throw invalid(param, `${param} is an array of at most ${MAX_LIST} ids.`);
  return [...new Set(value.map((v, i) => text(v, `${param}[${i}]`, MAX_ID)))];
}

function limitNano(value: unknown): string | null {
  if (value === null) return null;
  if (typeof value !== 'number' && typeof value !== 'string') throw invalid('limit_usd', 'limit_usd is a non-negative USD amount, or null for no budget.');
  let nano: bigint;
  try {
    nano = usdToNano(value);
  } catch {
    throw invalid('limit_usd', 'limit_usd is a non-negative USD amount with at most 9 decimals, or null for no budget.');
  }
  if (nano > MAX_AMOUNT_NANO) throw invalid('limit_usd', 'limit_usd is too large.');
  return nano.toString();
}

/** One field of the body into the policy; `null` resets an optional field to its default. */
function apply(policy: GuardrailPolicy, field: (typeof FIELDS)[number], value: unknown): GuardrailPolicy {
  if (value === null && field !== 'name')
    return { ...policy, [field === 'limit_usd' ? 'limit_nano' : field]: DEFAULT_POLICY[field === 'limit_usd' ? 'limit_nano' : field] };
  switch (field) {
    case 'name':
      return { ...policy, name: text(value, 'name', MAX_NAME) };
    case 'description':
      return { ...policy, description: text(value, 'description', MAX_DESCRIPTION) };
    case 'limit_usd':
      return { ...policy, limit_nano: limitNano(value) };
    case 'reset_interval':
      return { ...policy, reset_interval: oneOf(value, field, RESETS) };
    case 'include_byok_in_budgets':
    case 'enforce_zdr':
      return { ...policy, [field]: flag(value, field) };
    case 'allowed_models':
    case 'ignored_models':
    case 'allowed_providers':
    case 'ignored_providers':
      return { ...policy, [field]: ids(value, field) };
    case 'data_collection':
      return { ...policy, data_collection: oneOf(value, field, ['allow', 'deny'] as const) };
    case 'content_filter_builtins':
    case 'content_filters':
      // Checked as a whole by parseContentPolicy, which also compiles the patterns.
      return { ...policy, [field]: value };
  }
}

/** `current` for a PATCH (fields absent keep their value); absent for a POST, where `name` is required. */
export function parseGuardrailPolicy(body: unknown, current?: GuardrailPolicy): GuardrailPolicy {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid('body', 'The body is a JSON object.');
  const fields = body as Record<string, unknown>;
  const unknown = Object.keys(fields).find((k) => !(FIELDS as readonly string[]).includes(k));
  if (unknown !== undefined) throw invalid(unknown, `A guardrail has no field ${unknown}.`);
  if (!current && fields.name === undefined) throw invalid('name', 'name is required.');
  let policy: GuardrailPolicy = current ?? { name: '', ...DEFAULT_POLICY };
  for (const field of FIELDS) if (field in fields && fields[field] !== undefined) policy = apply(policy, field, fields[field]);
  const content = parseContentPolicy({ content_filter_builtins: policy.content_filter_builtins, content_filters: policy.content_filters });
  if (!content.ok) throw invalid(content.problems[0]!.field, content.problems[0]!.message);
  return policy;
}
