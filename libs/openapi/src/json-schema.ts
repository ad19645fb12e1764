/**
 * JSON Schema 2020-12 (the dialect of OpenAPI 3.1) as plain objects, built by a few helpers so
 * the document reads like the spec's tables. Objects are closed unless `open` says otherwise:
 * the gateway's own records list every field they carry, while OpenAI- and Anthropic-shaped
 * objects stay open, as the SDKs that read them do.
 */
export type JsonSchema = { [keyword: string]: unknown };

/** Marks a field that OpenAI's wire format does not have (issue 22: `x-svc-extension`). */
export const EXTENSION = 'x-svc-extension';

export const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });

export const str = (description?: string, more: JsonSchema = {}): JsonSchema => ({ type: 'string', ...(description ? { description } : {}), ...more });
export const int = (description?: string, more: JsonSchema = {}): JsonSchema => ({ type: 'integer', ...(description ? { description } : {}), ...more });
export const num = (description?: string, more: JsonSchema = {}): JsonSchema => ({ type: 'number', ...(description ? { description } : {}), ...more });
export const bool = (description?: string): JsonSchema => ({ type: 'boolean', ...(description ? { description } : {}) });
export const usd = (description = 'USD'): JsonSchema => num(description);
export const dateTime = (description?: string): JsonSchema => str(description, { format: 'date-time' });
export const unixSeconds = (description = 'unix seconds'): JsonSchema => int(description);
export const oneOfValues = (values: readonly string[], description?: string): JsonSchema => ({
  type: 'string',
  enum: [...values],
  ...(description ? { description } : {}),
});
export const constant = (value: string | boolean): JsonSchema => ({ const: value });
export const arr = (items: JsonSchema, more: JsonSchema = {}): JsonSchema => ({ type: 'array', items, ...more });
/** A JSON object whose members are not described (request `metadata`, tool parameters...). */
export const anyObject = (description?: string): JsonSchema => ({ type: 'object', ...(description ? { description } : {}) });

/** `schema` or null: a type list when the schema has a single type, else `anyOf` (a gateway field stays marked). */
export function nullable(schema: JsonSchema): JsonSchema {
  if (typeof schema.type === 'string' && !('enum' in schema) && !('const' in schema)) return { ...schema, type: [schema.type, 'null'] };
  return { anyOf: [schema, { type: 'null' }], ...(schema[EXTENSION] ? { [EXTENSION]: true } : {}) };
}

/** Adds `x-svc-extension: true`: a gateway field on an OpenAI-compatible object. */
export const extension = (schema: JsonSchema): JsonSchema => ({ ...schema, [EXTENSION]: true });

export interface ObjectOptions {
  /** Which properties must be present; all of them by default (the gateway's own records). */
  required?: readonly string[];
  /** Other members allowed (OpenAI- and Anthropic-compatible objects). */
  open?: boolean;
  description?: string;
}

export function obj(properties: Record<string, JsonSchema>, options: ObjectOptions = {}): JsonSchema {
  const required = options.required ?? Object.keys(properties);
  return {
    type: 'object',
    ...(options.description ? { description: options.description } : {}),
    properties,
    ...(required.length > 0 ? { required: [...required] } : {}),
    additionalProperties: options.open ?? false,
  };
}

/** `{ data: <schema> }`, the envelope of the gateway's own records. */
export const dataOf = (schema: JsonSchema): JsonSchema => obj({ data: schema });

/** OpenAI's cursor list `{object: "list", data, first_id, last_id, has_more}`. */
export const cursorList = (item: JsonSchema): JsonSchema =>
  obj({ object: constant('list'), data: arr(item), first_id: nullable(str()), last_id: nullable(str()), has_more: bool() });
