/**
 * The guardrail form's values (what the inputs hold, as typed) to the body of POST and PATCH
 * /v1/guardrails (docs/api/guardrails.md), a guardrail back to values, and how a guardrail reads
 * in short. Pure, so the rules that decide what is sent can be pinned by tests.
 */
import type { ContentAction, Guardrail, GuardrailBuiltin, GuardrailPattern, LimitReset } from '../records';
import { amountOf, listOf } from './keyForm';

/** The builtin filters the API knows (libs/guardrails `BUILTIN_SLUGS`), in the order the form shows them. */
export const BUILTIN_SLUGS = ['email', 'phone', 'card', 'api_key', 'prompt_injection'] as const;
export type BuiltinSlug = (typeof BUILTIN_SLUGS)[number];

export const BUILTIN_NAMES: Record<BuiltinSlug, string> = {
  email: 'Email addresses',
  phone: 'Phone numbers',
  card: 'Payment card numbers',
  api_key: 'API keys and tokens',
  prompt_injection: 'Prompt injection phrases',
};

/** A filter's actions, mildest first: flag reports a match, redact replaces it with the label, block refuses the request. */
export const CONTENT_ACTIONS: ContentAction[] = ['flag', 'redact', 'block'];

export const RESET_INTERVALS: { value: LimitReset; label: string }[] = [
  { value: 'daily', label: 'daily' },
  { value: 'weekly', label: 'weekly (from Monday)' },
  { value: 'monthly', label: 'monthly' },
  { value: 'never', label: 'never: a lifetime budget' },
];

/** A custom pattern as typed. */
export interface PatternValues {
  pattern: string;
  action: ContentAction;
  label: string;
}

/** The form as typed: every input's text, checkbox and select. */
export interface GuardrailFormValues {
  name: string;
  description: string;
  limit_usd: string;
  reset_interval: LimitReset;
  include_byok_in_budgets: boolean;
  allowed_models: string;
  ignored_models: string;
  allowed_providers: string;
  ignored_providers: string;
  enforce_zdr: boolean;
  /** `data_collection: "deny"`: only endpoints that do not collect data. */
  deny_data_collection: boolean;
  /** Each builtin's action, '' when it is off. */
  builtins: Record<BuiltinSlug, ContentAction | ''>;
  /** Labels the builtins had (the form does not edit them; a save keeps them). */
  builtin_labels: Partial<Record<BuiltinSlug, string>>;
  content_filters: PatternValues[];
}

/** The body fields the API takes; `null` resets a field to its default on PATCH. */
export interface GuardrailBody {
  name?: string;
  description?: string | null;
  limit_usd?: number | null;
  reset_interval?: LimitReset;
  include_byok_in_budgets?: boolean;
  allowed_models?: string[] | null;
  ignored_models?: string[] | null;
  allowed_providers?: string[] | null;
  ignored_providers?: string[] | null;
  enforce_zdr?: boolean;
  data_collection?: 'allow' | 'deny';
  content_filter_builtins?: GuardrailBuiltin[];
  content_filters?: GuardrailPattern[];
}

/** The body's fields in the order the form shows them: a failure naming none of them is shown under the form. */
export const GUARDRAIL_FIELDS: (keyof GuardrailBody)[] = [
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
];

export type Checked<T> = { body: T; problem?: undefined } | { body?: undefined; problem: { param: keyof GuardrailBody; message: string } };

const noBuiltins = (): Record<BuiltinSlug, ContentAction | ''> => ({ email: '', phone: '', card: '', api_key: '', prompt_injection: '' });

export function emptyGuardrailForm(): GuardrailFormValues {
  return {
    name: '',
    description: '',
    limit_usd: '',
    reset_interval: 'monthly',
    include_byok_in_budgets: false,
    allowed_models: '',
    ignored_models: '',
    allowed_providers: '',
    ignored_providers: '',
    enforce_zdr: false,
    deny_data_collection: false,
    builtins: noBuiltins(),
    builtin_labels: {},
    content_filters: [],
  };
}

/** A guardrail as the edit form shows it. */
export function guardrailFormOf(g: Guardrail): GuardrailFormValues {
  const builtins = noBuiltins();
  const labels: Partial<Record<BuiltinSlug, string>> = {};
  for (const b of g.content_filter_builtins) {
    if (!(BUILTIN_SLUGS as readonly string[]).includes(b.slug)) continue;
    builtins[b.slug as BuiltinSlug] = b.action;
    if (b.label) labels[b.slug as BuiltinSlug] = b.label;
  }
  return {
    name: g.name,
    description: g.description ?? '',
    limit_usd: g.limit_usd === null ? '' : String(g.limit_usd),
    reset_interval: g.reset_interval,
    include_byok_in_budgets: g.include_byok_in_budgets,
    allowed_models: (g.allowed_models ?? []).join(', '),
    ignored_models: g.ignored_models.join(', '),
    allowed_providers: (g.allowed_providers ?? []).join(', '),
    ignored_providers: g.ignored_providers.join(', '),
    enforce_zdr: g.enforce_zdr,
    deny_data_collection: g.data_collection === 'deny',
    builtins,
    builtin_labels: labels,
    content_filters: g.content_filters.map((f) => ({ pattern: f.pattern, action: f.action, label: f.label ?? '' })),
  };
}

/** Every field as the API takes it, empty ones as null; or the limit that is not an amount. */
function fieldsOf(values: GuardrailFormValues): Checked<Required<GuardrailBody>> {
  const limit = amountOf(values.limit_usd);
  if (limit !== null && Number.isNaN(limit)) {
    return { problem: { param: 'limit_usd', message: 'The limit must be an amount in USD, such as 5 or 12.50, or empty for no budget.' } };
  }
  const description = values.description.trim();
  const builtins: GuardrailBuiltin[] = [];
  for (const slug of BUILTIN_SLUGS) {
    const action = values.builtins[slug];
    if (!action) continue;
    const label = values.builtin_labels[slug];
    builtins.push(label ? { slug, action, label } : { slug, action });
  }
  const patterns: GuardrailPattern[] = values.content_filters.map((f) => {
    const label = f.label.trim();
    // The pattern is sent as typed: spaces may be part of it.
    return label ? { pattern: f.pattern, action: f.action, label } : { pattern: f.pattern, action: f.action };
  });
  return {
    body: {
      // The API refuses an empty name with its own words, next to the field.
      name: values.name.trim(),
      description: description === '' ? null : description,
      limit_usd: limit,
      reset_interval: values.reset_interval,
      include_byok_in_budgets: values.include_byok_in_budgets,
      allowed_models: listOf(values.allowed_models),
      ignored_models: listOf(values.ignored_models),
      allowed_providers: listOf(values.allowed_providers),
      ignored_providers: listOf(values.ignored_providers),
      enforce_zdr: values.enforce_zdr,
      data_collection: values.deny_data_collection ? 'deny' : 'allow',
      content_filter_builtins: builtins,
      content_filters: patterns,
    },
  };
}

/** POST /v1/guardrails: what the form holds, leaving out what is empty or default so the API's defaults apply. */
export function createGuardrailBody(values: GuardrailFormValues): Checked<GuardrailBody> {
  const checked = fieldsOf(values);
  if (!checked.body) return checked;
  const body: GuardrailBody = {};
  for (const [field, value] of Object.entries(checked.body)) {
    const empty = value === null || value === false || (Array.isArray(value) && value.length === 0) || (field === 'data_collection' && value === 'allow');
    if (!empty || field === 'name') Object.assign(body, { [field]: value });
  }
  return { body };
}

/**
 * PATCH /v1/guardrails/{id}: only what changed from `initial` (the form as it was opened), an
 * emptied field as null (which resets it to its default).
 */
export function updateGuardrailBody(initial: GuardrailFormValues, values: GuardrailFormValues): Checked<GuardrailBody> {
  const before = fieldsOf(initial);
  const after = fieldsOf(values);
  if (!after.body) return after;
  const body: GuardrailBody = {};
  for (const [field, value] of Object.entries(after.body) as [keyof GuardrailBody, unknown][]) {
    if (JSON.stringify(before.body?.[field]) !== JSON.stringify(value)) Object.assign(body, { [field]: value });
  }
  return { body };
}

/** A list of ids in short: "sim/echo, openai/gpt-4o and 3 more". */
export function shortList(ids: readonly string[], shown = 3): string {
  if (ids.length <= shown) return ids.join(', ');
  return `${ids.slice(0, shown).join(', ')} and ${ids.length - shown} more`;
}

/** The access rules of a guardrail in short, one line each; "any model or provider" when there are none. */
export function accessRules(g: Guardrail): string[] {
  const rules: string[] = [];
  if (g.allowed_models !== null) rules.push(g.allowed_models.length ? `models: only ${shortList(g.allowed_models)}` : 'models: none allowed');
  if (g.ignored_models.length) rules.push(`models: not ${shortList(g.ignored_models)}`);
  if (g.allowed_providers !== null) rules.push(g.allowed_providers.length ? `providers: only ${shortList(g.allowed_providers)}` : 'providers: none allowed');
  if (g.ignored_providers.length) rules.push(`providers: not ${shortList(g.ignored_providers)}`);
  if (g.enforce_zdr) rules.push('zero data retention only');
  if (g.data_collection === 'deny') rules.push('no data collection');
  return rules.length ? rules : ['any model or provider'];
}

/** How many content filters a guardrail has, in words: "2 filters (email: redact, 1 pattern)". */
export function filtersSummary(g: Pick<Guardrail, 'content_filter_builtins' | 'content_filters'>): string {
  const total = g.content_filter_builtins.length + g.content_filters.length;
  if (total === 0) return 'none';
  const parts = g.content_filter_builtins.map((b) => `${b.slug}: ${b.action}`);
  if (g.content_filters.length) parts.push(`${g.content_filters.length} ${g.content_filters.length === 1 ? 'pattern' : 'patterns'}`);
  return `${total} (${parts.join(', ')})`;
}
