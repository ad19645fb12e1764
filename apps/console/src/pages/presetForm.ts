/**
 * The preset editor's logic (docs/api/presets.md, spec 2.5 and 4.18): the JSON config checked before
 * sending (a syntax error by line and column), the POST/PATCH body, and the line diff between two
 * versions' configs. Pure, so tests can pin it.
 */
import { diffLines } from 'diff';
import type { Preset, PresetVersion } from '../records';

export interface PresetFormValues {
  slug: string;
  name: string;
  description: string;
  config: string;
}

export interface PresetBody {
  slug: string;
  name?: string | null;
  description?: string | null;
  config?: Record<string, unknown>;
}

/** Where a JSON text stops being JSON: 0-based offset, 1-based line and column, and why. */
export interface JsonSyntaxError {
  offset: number;
  line: number;
  column: number;
  message: string;
}

export type ParsedConfig = { ok: true; config: Record<string, unknown> | undefined } | { ok: false; message: string; error?: JsonSyntaxError };

/** The 1-based line and column of an offset in `text`. */
export function lineColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  return { line, column: offset - (before.lastIndexOf('\n') + 1) + 1 };
}

class Stop extends Error {
  constructor(
    readonly offset: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The first syntax error of a JSON text, or null when it is JSON. The browser's own JSON.parse
 * messages differ between engines and often give no position, so the position comes from here.
 */
export function findJsonSyntaxError(text: string): JsonSyntaxError | null {
  let i = 0;
  const at = () => (i >= text.length ? 'the end of the text' : `'${text[i]}'`);
  const stop = (message: string): never => {
    throw new Stop(i, message);
  };
  const space = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i])) i++;
  };
  const string = () => {
    const start = i;
    i++;
    while (i < text.length) {
      const c = text[i];
      if (c === '"') {
        i++;
        return;
      }
      if (c === '\\') {
        const escaped = text[i + 1];
        if (escaped === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) {
            i++;
            stop('\\u must be followed by 4 hexadecimal digits.');
          }
          i += 6;
          continue;
        }
        if (escaped === undefined || !'"\\/bfnrt'.includes(escaped)) {
          i++;
          stop(`Invalid escape \\${escaped ?? ''} in a string.`);
        }
        i += 2;
        continue;
      }
      if (c < ' ') stop(c === '\n' ? 'A string cannot span lines: close it with " or write \\n.' : 'A string cannot hold a control character.');
      i++;
    }
    i = start;
    stop('This string is not closed: a " is missing.');
  };
  const number = () => {
    const match = /-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
    match.lastIndex = i;
    const found = match.exec(text);
    if (!found) stop(`Unexpected ${at()}: a number must have digits after its sign.`);
    i += found![0].length;
    if (i < text.length && /[0-9.eE]/.test(text[i])) stop(`Unexpected ${at()} in a number.`);
  };
  const value = (): void => {
    space();
    const c = text[i];
    if (c === '{') return object();
    if (c === '[') return array();
    if (c === '"') return string();
    if (c === '-' || (c >= '0' && c <= '9')) return number();
    for (const word of ['true', 'false', 'null']) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return;
      }
    }
    if (c === "'") stop('Strings take double quotes ("), not single quotes.');
    if (c === '}' || c === ']') stop(`Unexpected ${at()}: a value is missing (a comma before it is one too many).`);
    stop(
      i >= text.length
        ? 'The text ends where a value should be.'
        : `Unexpected ${at()}: expected a value (object, array, string, number, true, false or null).`,
    );
  };
  const object = () => {
    i++;
    space();
    if (text[i] === '}') return void i++;
    for (;;) {
      space();
      if (text[i] === '}') stop("Unexpected '}': a comma before it is one too many.");
      if (text[i] !== '"') stop(`Expected a property name in double quotes, found ${at()}.`);
      string();
      space();
      if (text[i] !== ':') stop(`Expected ':' after the property name, found ${at()}.`);
      i++;
      value();
      space();
      if (text[i] === ',') {
        i++;
        continue;
      }
      if (text[i] === '}') return void i++;
      stop(`Expected ',' or '}' after a property value, found ${at()}.`);
    }
  };
  const array = () => {
    i++;
    space();
    if (text[i] === ']') return void i++;
    for (;;) {
      value();
      space();
      if (text[i] === ',') {
        i++;
        continue;
      }
      if (text[i] === ']') return void i++;
      stop(`Expected ',' or ']' after an array element, found ${at()}.`);
    }
  };
  try {
    value();
    space();
    if (i < text.length) stop(`Unexpected ${at()} after the end of the JSON value.`);
    return null;
  } catch (err) {
    if (!(err instanceof Stop)) throw err;
    return { offset: err.offset, ...lineColumn(text, err.offset), message: err.message };
  }
}

/** The config editor's text as a config: empty means none sent; otherwise a JSON object. */
export function parseConfig(text: string): ParsedConfig {
  if (text.trim() === '') return { ok: true, config: undefined };
  const error = findJsonSyntaxError(text);
  if (error) return { ok: false, message: `Line ${error.line}, column ${error.column}: ${error.message}`, error };
  const value: unknown = JSON.parse(text);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false, message: 'The config must be a JSON object, such as {"model": "sim/echo"}.' };
  }
  return { ok: true, config: value as Record<string, unknown> };
}

export type CheckedPreset =
  { body: PresetBody; problem?: undefined } | { body?: undefined; problem: { param: keyof PresetFormValues; message: string; offset?: number } };

/**
 * POST /v1/presets (`edit` false: empty name and description left out) or PATCH (`edit` true:
 * emptied ones sent as null, which clears them). An empty config is not sent: on PATCH that
 * keeps the latest version.
 */
export function presetBody(values: PresetFormValues, edit: boolean): CheckedPreset {
  const slug = values.slug.trim();
  const parsed = parseConfig(values.config);
  if (!parsed.ok) return { problem: { param: 'config', message: parsed.message, offset: parsed.error?.offset } };
  const body: PresetBody = { slug };
  for (const field of ['name', 'description'] as const) {
    const value = values[field].trim();
    if (value !== '') body[field] = value;
    else if (edit) body[field] = null;
  }
  if (parsed.config !== undefined) body.config = parsed.config;
  return { body };
}

/** A config as the editor and the diff show it. */
export function prettyConfig(config: unknown): string {
  return JSON.stringify(config ?? {}, null, 2);
}

export function presetFormOf(preset: Preset): PresetFormValues {
  return { slug: preset.slug, name: preset.name ?? '', description: preset.description ?? '', config: prettyConfig(preset.config) };
}

export interface DiffLine {
  kind: 'added' | 'removed' | 'same';
  /** `+`, `-` or a space: the change is said by a sign as well as by colour. */
  sign: '+' | '-' | ' ';
  text: string;
}

/**
 * The line diff from one config to another, on their pretty-printed JSON, one entry a line;
 * from null (before the first version) every line is added.
 */
export function configDiff(from: Record<string, unknown> | null, to: Record<string, unknown>): DiffLine[] {
  const lines: DiffLine[] = [];
  for (const change of diffLines(from === null ? '' : prettyConfig(from), prettyConfig(to))) {
    const kind = change.added ? 'added' : change.removed ? 'removed' : 'same';
    const sign = change.added ? '+' : change.removed ? '-' : ' ';
    const texts = change.value.split('\n');
    // A change ending in a line break leaves an empty piece after it, not a line.
    if (texts.at(-1) === '') texts.pop();
    for (const text of texts) lines.push({ kind, sign, text });
  }
  return lines;
}

/** What a version is compared with: the version before it, or the latest. */
export type CompareWith = 'previous' | 'latest';

/**
 * The two versions to diff, older first: `version` against the one before it (none for version
 * 1: its config is all added) or against the latest.
 */
export function comparison(versions: PresetVersion[], version: number, against: CompareWith): { from: PresetVersion | null; to: PresetVersion } | null {
  const index = versions.findIndex((v) => v.version === version);
  if (index < 0) return null;
  const chosen = versions[index];
  if (against === 'previous') return { from: index > 0 ? versions[index - 1] : null, to: chosen };
  return { from: chosen, to: versions[versions.length - 1] };
}

/** The slug a hash like `#/presets/my-preset` names, or null for the list. */
export function slugOfHash(hash: string): string | null {
  const match = /^#\/?presets\/([^/?#]+)/.exec(hash);
  return match ? decodeURIComponent(match[1]) : null;
}
