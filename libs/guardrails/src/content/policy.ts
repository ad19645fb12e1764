/**
 * A content policy as the management API takes it (`POST /v1/guardrails`):
 *
 *     content_filter_builtins?: [{ slug: 'email' | 'phone' | 'card' | 'api_key' | 'prompt_injection',
 *                                  action: 'block' | 'redact' | 'flag', label? }]
 *     content_filters?: [{ pattern, action, label? }]
 *
 * `parseContentPolicy` checks it and compiles it once, so that a request only runs it. Custom
 * patterns are RE2 syntax (no lookaround, no backreferences), case-sensitive unless they say `(?i)`,
 * and run on `re2js`, whose matching takes time linear in the text: an organization's pattern can
 * be slow only in proportion to its size, which is bounded here, never exponentially.
 */
import { RE2JS } from 're2js';
import { BUILTIN_DETECTORS, BUILTIN_LABELS, BUILTIN_SLUGS, type BuiltinSlug } from './builtins';
import type { Detector, Span } from './spans';

export const CONTENT_ACTIONS = ['block', 'redact', 'flag'] as const;
export type ContentAction = (typeof CONTENT_ACTIONS)[number];

export const CONTENT_POLICY_LIMITS = {
  /** Custom filters per policy. */
  maxFilters: 50,
  /** Characters of one custom pattern. */
  maxPatternLength: 512,
  /**
   * Instructions of one compiled custom pattern. Matching is linear in the text, but in the worst
   * case (a long counted repetition against a text built to keep every repetition alive) it costs
   * text length times program size: about 5 s for 1 MiB against `[a-z]{200}[0-9]` on this
   * machine. Counted repetitions are what make programs large (`[a-z]{1000}` is 1000 instructions
   * in 11 characters); this bound still takes any literal of the longest pattern allowed, and a
   * list of words compiles to less than its length.
   */
  maxPatternProgram: 600,
  /** Characters of a label; a label is letters, digits, spaces and `_ . : -`. */
  maxLabelLength: 64,
};

const LABEL = /^[A-Za-z0-9_.:-](?:[A-Za-z0-9 _.:-]*[A-Za-z0-9_.:-])?$/;

/** The label of a redacted custom match when the filter names none. */
export const CUSTOM_LABEL = 'REDACTED';

/** One filter of a compiled policy; `filter` names it in findings: the builtin's slug or `content_filters[i]`. */
export interface ContentFilter {
  readonly filter: string;
  readonly action: ContentAction;
  readonly label: string;
  readonly detect: Detector;
}

/** A checked and compiled policy: builtins first, in the order given, then the custom filters. */
export interface ContentPolicy {
  readonly filters: readonly ContentFilter[];
}

export type ContentPolicyProblemCode =
  | 'invalid_type'
  | 'unknown_field'
  | 'missing_field'
  | 'unknown_slug'
  | 'duplicate_slug'
  | 'invalid_action'
  | 'invalid_label'
  | 'too_many_filters'
  | 'pattern_too_long'
  | 'pattern_too_complex'
  | 'pattern_invalid'
  | 'pattern_matches_empty';

/** What is wrong, and where: `field` is a path into the input (`content_filters[2].pattern`). */
export interface ContentPolicyProblem {
  readonly field: string;
  readonly code: ContentPolicyProblemCode;
  readonly message: string;
}

export type ParsedContentPolicy = { ok: true; policy: ContentPolicy } | { ok: false; problems: ContentPolicyProblem[] };

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const BUILTIN_FIELDS = new Set(['slug', 'action', 'label']);
const CUSTOM_FIELDS = new Set(['pattern', 'action', 'label']);

/**
 * Checks a policy and compiles it; every problem is reported, not only the first. Fields other than
 * the two content fields are left to their own parsers (the same body carries budgets and access
 * rules). Messages never quote the input: a pattern may hold the very secret it is meant to catch.
 */
export function parseContentPolicy(input: unknown): ParsedContentPolicy {
  const problems: ContentPolicyProblem[] = [];
  const problem = (field: string, code: ContentPolicyProblemCode, message: string) => problems.push({ field, code, message });
  if (!isRecord(input)) {
    problem('', 'invalid_type', 'A guardrail must be a JSON object.');
    return { ok: false, problems };
  }
  const filters: ContentFilter[] = [];

  const builtins = listOf(input, 'content_filter_builtins', problem);
  const seen = new Set<string>();
  builtins.forEach((entry, i) => {
    const at = `content_filter_builtins[${i}]`;
    if (!isRecord(entry)) return problem(at, 'invalid_type', 'Each builtin filter must be an object with slug and action.');
    unknownFields(entry, BUILTIN_FIELDS, at, problem);
    const slug = entry.slug;
    let known: BuiltinSlug | null = null;
    if (slug === undefined) problem(`${at}.slug`, 'missing_field', 'slug is required.');
    else if (typeof slug !== 'string' || !(BUILTIN_SLUGS as readonly string[]).includes(slug))
      problem(`${at}.slug`, 'unknown_slug', `slug must be one of ${BUILTIN_SLUGS.join(', ')}.`);
    else if (seen.has(slug)) problem(`${at}.slug`, 'duplicate_slug', `${slug} is listed more than once; list each builtin once, with one action.`);
    else known = slug as BuiltinSlug;
    if (known) seen.add(known);
    const action = actionOf(entry, at, problem);
    const label = labelOf(entry, at, problem);
    if (known && action && label !== null) filters.push({ filter: known, action, label: label ?? BUILTIN_LABELS[known], detect: BUILTIN_DETECTORS[known] });
  });

  const custom = listOf(input, 'content_filters', problem);
  if (custom.length > CONTENT_POLICY_LIMITS.maxFilters)
    problem('content_filters', 'too_many_filters', `At most ${CONTENT_POLICY_LIMITS.maxFilters} custom filters; ${custom.length} were given.`);
  else
    custom.forEach((entry, i) => {
      const at = `content_filters[${i}]`;
      if (!isRecord(entry)) return problem(at, 'invalid_type', 'Each custom filter must be an object with pattern and action.');
      unknownFields(entry, CUSTOM_FIELDS, at, problem);
      const detect = patternOf(entry, at, problem);
      const action = actionOf(entry, at, problem);
      const label = labelOf(entry, at, problem);
      if (detect && action && label !== null) filters.push({ filter: at, action, label: label ?? CUSTOM_LABEL, detect });
    });

  return problems.length > 0 ? { ok: false, problems } : { ok: true, policy: { filters } };
}

type Report = (field: string, code: ContentPolicyProblemCode, message: string) => void;

function listOf(input: Record<string, unknown>, field: string, problem: Report): unknown[] {
  const value = input[field];
  if (value === undefined || value === null) return [];
  if (Array.isArray(value)) return value;
  problem(field, 'invalid_type', `${field} must be an array.`);
  return [];
}

function unknownFields(entry: Record<string, unknown>, known: Set<string>, at: string, problem: Report): void {
  for (const name of Object.keys(entry))
    if (!known.has(name)) problem(`${at}.${name}`, 'unknown_field', `Unknown field; a filter has ${[...known].join(', ')}.`);
}

function actionOf(entry: Record<string, unknown>, at: string, problem: Report): ContentAction | null {
  const action = entry.action;
  if (action === undefined) problem(`${at}.action`, 'missing_field', 'action is required.');
  else if (typeof action !== 'string' || !(CONTENT_ACTIONS as readonly string[]).includes(action))
    problem(`${at}.action`, 'invalid_action', `action must be one of ${CONTENT_ACTIONS.join(', ')}.`);
  else return action as ContentAction;
  return null;
}

/** The label given, undefined when there is none, null when it is wrong. */
function labelOf(entry: Record<string, unknown>, at: string, problem: Report): string | undefined | null {
  const label = entry.label;
  if (label === undefined || label === null) return undefined;
  if (typeof label === 'string' && label.length <= CONTENT_POLICY_LIMITS.maxLabelLength && LABEL.test(label)) return label;
  problem(
    `${at}.label`,
    'invalid_label',
    `label must be 1 to ${CONTENT_POLICY_LIMITS.maxLabelLength} letters, digits, spaces or _ . : - (it replaces what is redacted, as [label]).`,
  );
  return null;
}

function patternOf(entry: Record<string, unknown>, at: string, problem: Report): Detector | null {
  const pattern = entry.pattern;
  const field = `${at}.pattern`;
  if (pattern === undefined) problem(field, 'missing_field', 'pattern is required.');
  else if (typeof pattern !== 'string' || pattern.length === 0) problem(field, 'invalid_type', 'pattern must be a non-empty string.');
  else if (pattern.length > CONTENT_POLICY_LIMITS.maxPatternLength)
    problem(field, 'pattern_too_long', `pattern is ${pattern.length} characters; at most ${CONTENT_POLICY_LIMITS.maxPatternLength}.`);
  else {
    const compiled = compilePattern(pattern);
    if ('error' in compiled) problem(field, compiled.code, compiled.error);
    else return compiled.detect;
  }
  return null;
}

type Compiled = { detect: Detector } | { code: ContentPolicyProblemCode; error: string };

function compilePattern(pattern: string): Compiled {
  let re: RE2JS;
  try {
    re = RE2JS.compile(pattern);
  } catch (e) {
    // re2js puts the offending fragment in `message` and only the reason in `error`.
    const reason = typeof (e as { error?: unknown }).error === 'string' ? (e as { error: string }).error : 'unsupported syntax';
    return {
      code: 'pattern_invalid',
      error: `pattern does not compile as RE2 syntax (${reason}); lookaround and backreferences are not supported.`,
    };
  }
  if (re.programSize() > CONTENT_POLICY_LIMITS.maxPatternProgram)
    return {
      code: 'pattern_too_complex',
      error: `pattern compiles to ${re.programSize()} instructions; at most ${CONTENT_POLICY_LIMITS.maxPatternProgram} (large repetition counts are what costs: write {1,20} rather than {1,1000}).`,
    };
  if (re.matcher('').find())
    return { code: 'pattern_matches_empty', error: 'pattern matches the empty text, so it would fire on every request; require at least one character.' };
  return { detect: (text) => re2Spans(re, text) };
}

/** Every non-empty match, in order; an empty match (`\b`, `x*` between letters) counts for nothing. */
function re2Spans(re: RE2JS, text: string): Span[] {
  const spans: Span[] = [];
  const m = re.matcher(text);
  while (m.find()) if (m.end() > m.start()) spans.push([m.start(), m.end()]);
  return spans;
}
