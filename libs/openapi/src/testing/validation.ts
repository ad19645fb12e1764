import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { OpenApiDocument } from '../document';

/**
 * `@seriousme/openapi-schema-validator` ships as ESM only; jest (with --experimental-vm-modules)
 * loads it through a real dynamic import, which swc would otherwise turn into require().
 */
const importEsm = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<any>;

/** Validates a document against the official OpenAPI 3.1 schema; the errors, or [] when valid. */
export async function openApiErrors(document: unknown): Promise<unknown[]> {
  const { Validator } = await importEsm('@seriousme/openapi-schema-validator');
  const validator = new Validator();
  const result = await validator.validate(structuredClone(document));
  if (result.valid && validator.version !== '3.1') return [`validated as OpenAPI ${validator.version}, not 3.1`];
  return result.valid ? [] : (result.errors as unknown[]);
}

/**
 * Checks bodies against the document's schemas with ajv's 2020-12 validator, the dialect of
 * OpenAPI 3.1: `check(schema, body)` answers the errors, or [] when the body fits.
 */
export function responseChecker(document: OpenApiDocument) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  const base = 'urn:svc:openapi';
  ajv.addSchema({ $id: base, components: document.components }, base);
  return (schema: unknown, body: unknown): unknown[] => {
    const validate = ajv.compile({ $id: `${base}:check:${Math.random()}`, ...(resolveLocalRefs(schema, base) as object) });
    return validate(body) ? [] : (validate.errors ?? []);
  };
}

/** `#/components/...` refs made absolute, so a schema taken out of the document still resolves them. */
function resolveLocalRefs(schema: unknown, base: string): unknown {
  if (Array.isArray(schema)) return schema.map((s) => resolveLocalRefs(s, base));
  if (schema === null || typeof schema !== 'object') return schema;
  return Object.fromEntries(
    Object.entries(schema).map(([k, v]) => [k, k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `${base}${v}` : resolveLocalRefs(v, base)]),
  );
}

/** The schema of the documented answer `status` of `method path` with `contentType`. */
export function responseSchema(document: OpenApiDocument, method: string, path: string, status: number, contentType = 'application/json'): unknown {
  const operation = document.paths[path]?.[method.toLowerCase()];
  if (!operation) throw new Error(`${method} ${path} is not documented`);
  const response = operation.responses[String(status)];
  if (!response) throw new Error(`${method} ${path} documents no ${status} answer (it documents ${Object.keys(operation.responses).join(', ')})`);
  const schema = response.content?.[contentType]?.schema;
  if (!schema) throw new Error(`${method} ${path} ${status} has no ${contentType} schema`);
  return schema;
}
