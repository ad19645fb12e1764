/**
 * What every request body, path and query must satisfy before any handler sees it, whatever
 * the route. PostgreSQL's jsonb and text refuse NUL and unpaired surrogates, so such a string
 * reaching an event or a row would fail an append or a projection; class-transformer and other
 * recursive walkers overflow the stack on deep nesting. Both are refused at the edge, naming
 * the field.
 */

/** Deeper than any request the spec describes (a JSON schema in `response_format` included). */
export const MAX_JSON_DEPTH = 64;

export interface InputProblem {
  /** The field in OpenAI's notation (`messages[0].content`); null for the body itself. */
  param: string | null;
  message: string;
}

/** True when PostgreSQL can store the string as text or in jsonb. */
export function isStorableText(text: string): boolean {
  return text.isWellFormed() && !text.includes('\u0000');
}

function describe(text: string): string {
  return text.includes('\u0000') ? 'a NUL character (\\u0000)' : 'an unpaired UTF-16 surrogate';
}

/** A field path's length once deeper than anything legitimate: hostile nesting makes it huge. */
const MAX_PATH_LENGTH = 120;

function child(path: string | null, key: string | number): string {
  if (path !== null && path.length > MAX_PATH_LENGTH) return path;
  const next = typeof key === 'number' ? `${path ?? ''}[${key}]` : path ? `${path}.${key}` : key;
  return next.length > MAX_PATH_LENGTH ? `${next.slice(0, MAX_PATH_LENGTH)}...` : next;
}

/**
 * The first problem of a parsed JSON value: a string (value or key) PostgreSQL cannot store, or
 * nesting deeper than `maxDepth`. Iterative, so a hostile depth cannot overflow the stack, and
 * linear in the size of the value.
 */
export function inspectJson(value: unknown, maxDepth = MAX_JSON_DEPTH): InputProblem | null {
  const stack: { value: unknown; path: string | null; depth: number }[] = [{ value, path: null, depth: 0 }];
  while (stack.length > 0) {
    const { value: v, path, depth } = stack.pop()!;
    if (typeof v === 'string') {
      if (!isStorableText(v)) return { param: path, message: `${path ? `'${path}'` : 'The body'} contains ${describe(v)}, which is not accepted.` };
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth >= maxDepth) return { param: path, message: `${path ? `'${path}'` : 'The body'} is nested deeper than ${maxDepth} levels.` };
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], path: child(path, i), depth: depth + 1 });
      continue;
    }
    const keys = Object.keys(v);
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i];
      if (!isStorableText(key)) return { param: path, message: `A field name in ${path ? `'${path}'` : 'the body'} contains ${describe(key)}, which is not accepted.` };
      stack.push({ value: (v as Record<string, unknown>)[key], path: child(path, key), depth: depth + 1 });
    }
  }
  return null;
}

/** The first query or path parameter (name or value) PostgreSQL cannot store. */
export function inspectParameters(parameters: Record<string, unknown> | null | undefined): InputProblem | null {
  for (const [name, value] of Object.entries(parameters ?? {})) {
    if (!isStorableText(name)) return { param: null, message: `A parameter name contains ${describe(name)}, which is not accepted.` };
    for (const v of Array.isArray(value) ? value : [value]) {
      if (typeof v === 'string' && !isStorableText(v)) return { param: name, message: `'${name}' contains ${describe(v)}, which is not accepted.` };
    }
  }
  return null;
}
