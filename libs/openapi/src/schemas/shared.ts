/** The helpers and the schema pieces more than one family of schemas is built from. */
import { QUANTIZATIONS, SORTS } from '@svc/catalog';
import { arr, bool, extension, type JsonSchema, nullable, obj, oneOfValues, str } from '../json-schema';

/**
 * The request rules below come from the constants the server's validators use (libs/interfaces,
 * libs/videos), so the document cannot drift from what the server refuses (issue 41 item 12).
 * `model` and the other identifiers the server reads with `requireString` must not be empty.
 */
export const modelId = (description?: string): JsonSchema => str(description, { minLength: 1 });
/** What the server checks with `value.trim() !== ''`: at least one character that is not white space. */
const NOT_BLANK = '\\S';
export const text = (description?: string, more: JsonSchema = {}): JsonSchema => str(description, { minLength: 1, pattern: NOT_BLANK, ...more });

/** `^(?:1|...|max)$` for whole numbers from 1 to `max` without leading zeros, as a pattern can say it. */
export function upToPattern(max: number): string {
  const digits = String(max);
  const alternatives: string[] = [];
  for (let length = 1; length < digits.length; length++) alternatives.push(length === 1 ? '[1-9]' : `[1-9]\\d{${length - 1}}`);
  for (let i = 0; i < digits.length; i++) {
    const low = i === 0 ? 1 : 0;
    const high = Number(digits[i]) - 1;
    const rest = digits.length - i - 1;
    if (high >= low) alternatives.push(`${digits.slice(0, i)}[${low}-${high}]${rest > 0 ? `\\d{${rest}}` : ''}`);
  }
  alternatives.push(digits);
  return `(?:${alternatives.join('|')})`;
}

/**
 * The chat, messages and responses validators read an optional field set to null as left out
 * (class-validator's IsOptional, the `optional*` readers of libs/interfaces): so does the document.
 */
export function nullWhenOptional(
  properties: Record<string, JsonSchema>,
  required: readonly string[],
  notNull: readonly string[] = [],
): Record<string, JsonSchema> {
  const typed = (schema: JsonSchema) => 'type' in schema || 'anyOf' in schema || 'const' in schema || 'enum' in schema;
  const keep = (name: string, schema: JsonSchema) => required.includes(name) || notNull.includes(name) || !typed(schema);
  return Object.fromEntries(Object.entries(properties).map(([name, schema]) => [name, keep(name, schema) ? schema : nullable(schema)]));
}

export const stringOrStrings = (description?: string): JsonSchema => ({ anyOf: [str(), arr(str())], ...(description ? { description } : {}) });

/** Spec 4.2, as `parseProviderPreferences` (libs/catalog) reads it: unknown members are refused; null is none. */
const providerNames = arr(str(undefined, { minLength: 1 }));
export const ProviderPreferences = extension(
  nullable(
    obj(
      {
        order: providerNames,
        only: providerNames,
        ignore: providerNames,
        allow_fallbacks: bool(),
        sort: oneOfValues(SORTS),
        require_parameters: bool(),
        data_collection: oneOfValues(['allow', 'deny']),
        quantizations: arr(oneOfValues(QUANTIZATIONS)),
        zdr: bool(),
      },
      { required: [], description: 'Spec 4.2: provider routing preferences.' },
    ),
  ),
);
