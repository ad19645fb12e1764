import fc from 'fast-check';
import type { JsonSchema } from '../json-schema';

/**
 * Request bodies drawn from the document's own request schemas (issue 41 item 12): `valid` fits
 * the schema, `violating` breaks exactly one documented constraint of one top-level field, so a
 * generated request tests the document's word against the server's rules.
 */
export interface RequestArbitraries {
  valid: fc.Arbitrary<Record<string, unknown>>;
  violating: fc.Arbitrary<{ body: Record<string, unknown>; violated: string }>;
}

/** Values the test must choose from a live catalog (a model of the right type, one of its voices). */
export type Overrides = Record<string, fc.Arbitrary<unknown> | null>;

type Resolve = (schema: JsonSchema) => JsonSchema;

export function resolverOf(schemas: Record<string, JsonSchema>): Resolve {
  const resolve: Resolve = (schema) => {
    const target = typeof schema.$ref === 'string' ? schemas[schema.$ref.replace('#/components/schemas/', '')] : schema;
    if (!target) throw new Error(`unresolved ${String(schema.$ref)}`);
    return target.$ref ? resolve(target) : target;
  };
  return resolve;
}

/** A schema that says what a value is; a bare `{description}` or a member-less object does not. */
function described(schema: JsonSchema): boolean {
  if ('const' in schema || 'enum' in schema || '$ref' in schema) return true;
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as JsonSchema[]).filter((branch) => branch.type !== 'null').every(described);
  if (Array.isArray(schema.type)) return (schema.type as string[]).filter((type) => type !== 'null').every((type) => described({ ...schema, type }));
  if (schema.type === 'object') return schema.properties !== undefined;
  if (schema.type === 'array') return described(schema.items as JsonSchema);
  return schema.type !== undefined;
}

const SHORT = 12;

export function valueOf(schema: JsonSchema, resolve: Resolve): fc.Arbitrary<unknown> {
  const s = resolve(schema);
  if ('const' in s) return fc.constant(s.const);
  if (Array.isArray(s.enum)) return fc.constantFrom(...(s.enum as unknown[]));
  if (Array.isArray(s.anyOf)) return fc.oneof(...(s.anyOf as JsonSchema[]).filter(described).map((branch) => valueOf(branch, resolve)));
  if (Array.isArray(s.type)) return fc.oneof(...(s.type as string[]).map((type) => valueOf({ ...s, type }, resolve)));
  switch (s.type) {
    case 'string':
      return stringOf(s);
    case 'integer': {
      const min = (s.minimum as number | undefined) ?? -1000;
      const max = (s.maximum as number | undefined) ?? Math.max(min, 0) + 1000;
      // The bounds themselves are drawn often: they are where a document and a server disagree.
      return fc.oneof(
        fc.constantFrom(min, Math.min(max, Number.MAX_SAFE_INTEGER)),
        fc.integer({ min: Math.max(min, -(2 ** 31)), max: Math.min(max, 2 ** 31) }),
      );
    }
    case 'number': {
      const min = (s.minimum as number | undefined) ?? -1000;
      const max = (s.maximum as number | undefined) ?? 1000;
      return fc.oneof(fc.constantFrom(min, max), fc.double({ min, max, noNaN: true, noDefaultInfinity: true }));
    }
    case 'boolean':
      return fc.boolean();
    case 'array': {
      const minLength = (s.minItems as number | undefined) ?? 0;
      const maxLength = Math.min((s.maxItems as number | undefined) ?? 3, minLength + 3);
      return fc.array(valueOf(s.items as JsonSchema, resolve), { minLength, maxLength });
    }
    case 'object':
      return objectOf(s, resolve, {});
    default:
      return fc.constant(null);
  }
}

function stringOf(s: JsonSchema): fc.Arbitrary<string> {
  const minLength = (s.minLength as number | undefined) ?? 0;
  const maxLength = (s.maxLength as number | undefined) ?? Infinity;
  const fits = (v: string) => [...v].length >= minLength && [...v].length <= maxLength;
  if (typeof s.pattern === 'string') {
    const pattern = new RegExp(s.pattern, 'u');
    const anchored = s.pattern.startsWith('^');
    const base = anchored
      ? fc.stringMatching(pattern)
      : fc.string({ minLength: Math.max(minLength, 1), maxLength: Math.min(maxLength, minLength + SHORT) }).filter((v) => pattern.test(v));
    return base.filter(fits);
  }
  const short = fc.string({ minLength, maxLength: Math.min(maxLength, minLength + SHORT) });
  // The longest string the document allows must pass too.
  return Number.isFinite(maxLength) && maxLength > minLength + SHORT ? fc.oneof(short, fc.constant('a'.repeat(maxLength))) : short;
}

function objectOf(s: JsonSchema, resolve: Resolve, overrides: Overrides): fc.Arbitrary<Record<string, unknown>> {
  const properties = (s.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((s.required ?? []) as string[]);
  const record: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [name, property] of Object.entries(properties)) {
    if (name in overrides) {
      if (overrides[name] !== null) record[name] = overrides[name]!;
    } else if (required.has(name) || described(resolve(property))) record[name] = valueOf(property, resolve);
  }
  return fc.record(record, { requiredKeys: Object.keys(record).filter((name) => required.has(name)) }) as fc.Arbitrary<Record<string, unknown>>;
}

/** JSON types a value of `schema` may have (`integer` counted as `number`). */
function typesOf(schema: JsonSchema, resolve: Resolve): Set<string> | null {
  const s = resolve(schema);
  if ('const' in s) return new Set([jsonType(s.const)]);
  if (Array.isArray(s.enum)) return new Set((s.enum as unknown[]).map(jsonType));
  if (Array.isArray(s.anyOf)) {
    const all = (s.anyOf as JsonSchema[]).map((branch) => typesOf(branch, resolve));
    return all.includes(null) ? null : new Set(all.flatMap((set) => [...set!]));
  }
  if (s.type === undefined) return null;
  return new Set([s.type].flat().map((t) => (t === 'integer' ? 'number' : String(t))));
}

const jsonType = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);
const OF_TYPE: Record<string, unknown> = { string: 'x', number: 7, boolean: true, array: ['x'], object: { x: 1 }, null: null };

/** One way to break a field's documented constraint, with a name for the report. */
function violationsOf(
  name: string,
  schema: JsonSchema,
  resolve: Resolve,
  requiredField: boolean,
): { violated: string; value: fc.Arbitrary<unknown> | 'absent' }[] {
  const s = resolve(schema);
  const out: { violated: string; value: fc.Arbitrary<unknown> | 'absent' }[] = [];
  if (requiredField) out.push({ violated: `${name}: required`, value: 'absent' });
  const types = typesOf(s, resolve);
  if (types)
    for (const type of Object.keys(OF_TYPE).filter((t) => !types.has(t)))
      out.push({ violated: `${name}: type ${[...types].join('|')}, not ${type}`, value: fc.constant(OF_TYPE[type]) });
  if ('const' in s && typeof s.const !== 'boolean')
    out.push({ violated: `${name}: const`, value: fc.constant(typeof s.const === 'number' ? s.const + 1 : `${String(s.const)}-other`) });
  if (Array.isArray(s.enum)) out.push({ violated: `${name}: enum`, value: fc.constant('not-one-of-them') });
  if (s.type === 'string' || (Array.isArray(s.type) && s.type.includes('string'))) {
    if (typeof s.minLength === 'number' && s.minLength > 0) out.push({ violated: `${name}: minLength`, value: fc.constant('') });
    if (typeof s.maxLength === 'number') out.push({ violated: `${name}: maxLength`, value: fc.constant('a'.repeat(s.maxLength + 1)) });
    if (s.pattern === '\\S') out.push({ violated: `${name}: pattern`, value: fc.constantFrom(' ', '\t\n') });
    else if (typeof s.pattern === 'string') out.push({ violated: `${name}: pattern`, value: fc.constantFrom('%', ' x', '9'.repeat(9)) });
  }
  if (s.type === 'integer' || s.type === 'number') {
    if (typeof s.minimum === 'number') out.push({ violated: `${name}: minimum`, value: fc.constant(s.minimum - 1) });
    if (typeof s.maximum === 'number') out.push({ violated: `${name}: maximum`, value: fc.constant(s.maximum + 1) });
    if (s.type === 'integer') out.push({ violated: `${name}: integer`, value: fc.constant(((s.minimum as number | undefined) ?? 1) + 0.5) });
  }
  if (s.type === 'array') {
    if (typeof s.minItems === 'number' && s.minItems > 0) out.push({ violated: `${name}: minItems`, value: fc.constant([]) });
    if (typeof s.maxItems === 'number')
      out.push({
        violated: `${name}: maxItems`,
        value: fc.array(valueOf(s.items as JsonSchema, resolve), { minLength: s.maxItems + 1, maxLength: s.maxItems + 1 }),
      });
  }
  return out;
}

export function requestArbitraries(schema: JsonSchema, schemas: Record<string, JsonSchema>, overrides: Overrides = {}): RequestArbitraries {
  const resolve = resolverOf(schemas);
  const s = resolve(schema);
  const valid = objectOf(s, resolve, overrides);
  const required = new Set((s.required ?? []) as string[]);
  const violations = Object.entries((s.properties ?? {}) as Record<string, JsonSchema>).flatMap(([name, property]) =>
    violationsOf(name, property, resolve, required.has(name)).map((v) => ({ name, ...v })),
  );
  const violating = fc.tuple(valid, fc.constantFrom(...violations)).chain(([body, violation]) => {
    if (violation.value === 'absent') {
      const { [violation.name]: _left, ...rest } = body;
      return fc.constant({ body: rest, violated: violation.violated });
    }
    return violation.value.map((value) => ({ body: { ...body, [violation.name]: value }, violated: violation.violated }));
  });
  return { valid, violating };
}
