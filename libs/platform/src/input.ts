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

/** A container being walked: its children are visited in order, one at a time. */
interface Frame {
  container: object;
  /** An object's keys; null for an array. */
  keys: string[] | null;
  next: number;
  parent: Frame | null;
  /** Its key in its parent; null for the value itself. */
  key: string | number | null;
  depth: number;
}

/** The field path of `frame` (and of its child `key`), built only for a problem: most values have none. */
function pathOf(frame: Frame, key?: string | number): string | null {
  const keys: (string | number)[] = key === undefined ? [] : [key];
  for (let f: Frame | null = frame; f !== null && f.key !== null; f = f.parent) keys.push(f.key);
  let path: string | null = null;
  for (let i = keys.length - 1; i >= 0; i--) path = child(path, keys[i]);
  return path;
}

function textProblem(path: string | null, text: string): InputProblem {
  return { param: path, message: `${path ? `'${path}'` : 'The body'} contains ${describe(text)}, which is not accepted.` };
}

function depthProblem(path: string | null, maxDepth: number): InputProblem {
  return { param: path, message: `${path ? `'${path}'` : 'The body'} is nested deeper than ${maxDepth} levels.` };
}

/**
 * A frame for `container`, or the problem with one of its field names (a name names its object:
 * the name itself may not be printable).
 */
function open(container: object, parent: Frame | null, key: string | number | null, depth: number): Frame | InputProblem {
  const frame: Frame = { container, keys: Array.isArray(container) ? null : Object.keys(container), next: 0, parent, key, depth };
  for (const name of frame.keys ?? []) {
    if (!isStorableText(name)) {
      const path = pathOf(frame);
      return { param: path, message: `A field name in ${path ? `'${path}'` : 'the body'} contains ${describe(name)}, which is not accepted.` };
    }
  }
  return frame;
}

/**
 * The first problem of a parsed JSON value, in document order: a string (value or key)
 * PostgreSQL cannot store, or nesting deeper than `maxDepth`. Iterative, so a hostile depth
 * cannot overflow the stack, and linear in the size of the value. It runs on every request
 * body and every appended event, so it allocates one frame per object or array and no path
 * until it has a problem to name.
 */
export function inspectJson(value: unknown, maxDepth = MAX_JSON_DEPTH): InputProblem | null {
  if (typeof value === 'string') return isStorableText(value) ? null : textProblem(null, value);
  if (value === null || typeof value !== 'object') return null;
  if (maxDepth <= 0) return depthProblem(null, maxDepth);
  const root = open(value, null, null, 0);
  if (!('container' in root)) return root;
  let frame: Frame | null = root;
  while (frame !== null) {
    const f: Frame = frame;
    const length = f.keys === null ? (f.container as unknown[]).length : f.keys.length;
    if (f.next >= length) {
      frame = f.parent;
      continue;
    }
    const i = f.next++;
    const key = f.keys === null ? i : f.keys[i];
    const item = f.keys === null ? (f.container as unknown[])[i] : (f.container as Record<string, unknown>)[key];
    if (typeof item === 'string') {
      if (!isStorableText(item)) return textProblem(pathOf(f, key), item);
      continue;
    }
    if (item === null || typeof item !== 'object') continue;
    if (f.depth + 1 >= maxDepth) return depthProblem(pathOf(f, key), maxDepth);
    const next = open(item, f, key, f.depth + 1);
    if (!('container' in next)) return next;
    frame = next;
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
