/**
 * The OpenAPI 3.1 document, generated from the routes the app registered (issue 22): each route
 * is joined with its description in OPERATIONS by "METHOD /path" as Fastify spells it. What does
 * not join is returned (`undocumented`, `unserved`) for the truth test to fail on; an
 * undocumented route still appears, marked, rather than vanishing from the document.
 */
import { SCHEMAS } from './components';
import { EXTENSION, type JsonSchema, ref } from './json-schema';
import { type Access, OPERATIONS, type OperationDescription } from './operations';
import { webhooks } from './webhooks';

export interface RegisteredRoute {
  method: string;
  url: string;
}

export interface OpenApiBuild {
  document: OpenApiDocument;
  /** Routes the app serves that OPERATIONS does not describe. */
  undocumented: string[];
  /** Descriptions in OPERATIONS that no registered route matches. */
  unserved: string[];
}

export type OpenApiDocument = {
  openapi: string;
  info: Record<string, unknown>;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, JsonSchema>; [key: string]: unknown };
  [key: string]: unknown;
};

export type Operation = Record<string, unknown> & { responses: Record<string, { description: string; content?: Record<string, { schema: JsonSchema }> }> };

/** Spec 9: the interface version. */
export const API_VERSION = '2026-10-02';

/** The extension that marks an operation no description covered. */
export const UNDOCUMENTED = 'x-svc-undocumented';

/**
 * Not operations of the API: HEAD twins of GETs and CORS preflights Fastify adds for every
 * route, and static files (the console's, the reference page's assets).
 */
export function isDocumentable(route: RegisteredRoute): boolean {
  if (route.method === 'HEAD' || route.method === 'OPTIONS') return false;
  // `/internal/`: what the gateways say to each other (issue 45), not the API.
  return !(route.url === '/console' || route.url.startsWith('/console/') || route.url.startsWith('/docs/') || route.url.startsWith('/internal/'));
}

export const operationKey = (route: RegisteredRoute): string => `${route.method} ${route.url}`;

/** Fastify's `:param` is OpenAPI's `{param}`; a wildcard needs a name its description gives. */
export function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

export function buildOpenApiDocument(registered: readonly RegisteredRoute[]): OpenApiBuild {
  const routes = new Map(registered.filter(isDocumentable).map((r) => [operationKey(r), r]));
  const paths: Record<string, Record<string, Operation>> = {};
  const undocumented: string[] = [];
  for (const [key, route] of [...routes].sort(([a], [b]) => a.localeCompare(b))) {
    const description = OPERATIONS[key];
    if (!description) undocumented.push(key);
    const path = description?.path ?? openApiPath(route.url);
    (paths[path] ??= {})[route.method.toLowerCase()] = description ? operationOf(key, path, description) : undocumentedOperation(key, path);
  }
  const unserved = Object.keys(OPERATIONS).filter((key) => !routes.has(key));
  return { document: documentOf(paths), undocumented, unserved };
}

function documentOf(paths: OpenApiDocument['paths']): OpenApiDocument {
  return {
    openapi: '3.1.0',
    info: {
      title: 'svc-gateway',
      version: API_VERSION,
      description: [
        'An AI model gateway: OpenAI- and Anthropic-compatible interfaces to many models, billed from a prepaid credit balance.',
        "Send the key as `Authorization: Bearer <key>` or `x-api-key: <key>` (spec 5). Every 4XX/5XX body is the error object (spec 2.1), in Anthropic's shape on `/v1/messages*`.",
        `Fields marked \`${EXTENSION}: true\` are the gateway's additions to OpenAI's wire format.`,
        'Every `/v1` answer carries the rate-limit headers `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (spec 8).',
      ].join('\n\n'),
    },
    servers: [{ url: '/', description: 'this gateway' }],
    tags: TAGS.map((name) => ({ name })),
    paths,
    webhooks: webhooks(),
    components: {
      schemas: SCHEMAS,
      securitySchemes: {
        bearerKey: { type: 'http', scheme: 'bearer', description: 'An API key, `svc_live_...` or `svc_test_...` (spec 5).' },
        xApiKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: "The same key, as Anthropic's SDKs send it." },
        adminToken: { type: 'http', scheme: 'bearer', description: "The operator's SVC_ADMIN_TOKEN (docs/api/operator.md)." },
      },
    },
  };
}

const TAGS = [
  'Models',
  'Models catalog',
  'Files and batches',
  'Videos',
  'Presets',
  'Guardrails',
  'Keys',
  'Account',
  'Organizations',
  'Settings',
  'Operator',
  'Operations',
];

/** Spec 7: what each status means. */
const STATUS_TEXT: Record<number, string> = {
  400: 'invalid_request_error: malformed request; `param` names the field',
  401: 'authentication_error: missing, invalid, revoked or expired key',
  402: 'insufficient_quota: balance too low for the worst case',
  403: 'permission_error: scope, IP or domain not allowed, or a step-up code needed',
  404: 'not_found_error',
  409: 'conflict: an Idempotency-Key still running, or a state that forbids it',
  410: 'model_retired',
  413: 'file_too_large',
  415: 'unsupported_media_type',
  422: 'idempotency_key_reused',
  429: 'rate_limit_error or a spend limit (insufficient_quota); header retry-after',
  502: 'api_error: every provider tried failed; safe to retry',
  503: 'service_unavailable',
  504: 'api_error: upstream timeout',
};

/** What every route of an access level can answer, besides its own errors. */
const BASE_ERRORS: Record<Access, number[]> = {
  none: [],
  admin: [400, 401],
  any: [400, 401, 403, 429],
  full: [400, 401, 403, 429],
  management: [400, 401, 403, 429],
};

/**
 * What a route answers before its handler runs (apps/gateway/src/http/request-checks.ts and
 * error-mapping.ts): every one 415 for a Content-Encoding, a form or a multipart body it does
 * not take; one whose method carries a body, also 413 over the 10 MB limit (spec 8) and 415 for
 * a content type no parser reads.
 */
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const beforeHandler = (method: string): number[] => (BODY_METHODS.has(method) ? [413, 415] : [415]);

const KEY_SECURITY = [{ bearerKey: [] }, { xApiKey: [] }];

const header = (name: string, description: string, schema: JsonSchema = { type: 'string' }) => ({ name, in: 'header', description, schema });

/** Spec 4: optional headers on billed POSTs. */
const BILLED_HEADERS = [
  header('Idempotency-Key', 'spec 3.3, 8: replays the first answer for 24 hours', { type: 'string', minLength: 1, maxLength: 255 }),
  header('X-Title', 'app attribution'),
  header('HTTP-Referer', 'app attribution'),
  header('X-Client-Request-Id', 'echoed back and stored on the generation'),
];

/** Spec 4.2, "Response caching". */
const CACHE_HEADERS = [
  header('X-Svc-Cache', 'true enables the response cache', { type: 'string', enum: ['true', 'false'] }),
  header('X-Svc-Cache-TTL', 'seconds, 1 to 86400, default 300', { type: 'string', pattern: '^\\d+$' }),
  header('X-Svc-Cache-Clear', 'true refreshes the entry', { type: 'string', enum: ['true', 'false'] }),
];

function operationOf(key: string, path: string, d: OperationDescription): Operation {
  // Fastify's wildcard takes the rest of the path, slashes and all (model ids are `sim/echo`).
  // OpenAPI 3.1 allows `allowReserved` on query parameters only (the official schema refuses it
  // on a path), so the parameter keeps the default simple style: a client built from the
  // document sends `sim%2Fecho`, which the route decodes; `x-svc-wildcard` tells a validator
  // that the raw `/v1/models/sim/echo` is the same operation.
  const wildcard = key.endsWith('/*') ? /\{([^}]+)\}$/.exec(path)?.[1] : undefined;
  const pathParameters = [...path.matchAll(/\{([^}]+)\}/g)].map(([, name]) => ({
    name,
    in: 'path',
    required: true,
    ...(d.pathParameters?.[name] ? { description: d.pathParameters[name] } : {}),
    ...(name === wildcard ? { 'x-svc-wildcard': true } : {}),
    schema: name === wildcard ? { type: 'string', minLength: 1, pattern: '^[^?#]+$' } : { type: 'string' },
  }));
  const parameters = [
    ...pathParameters,
    ...(d.query ?? []).map((q) => ({
      name: q.name,
      in: 'query',
      ...(q.required ? { required: true } : {}),
      ...(q.description ? { description: q.description } : {}),
      schema: q.schema,
    })),
    ...(d.billed ? BILLED_HEADERS : []),
    ...(d.cacheable ? CACHE_HEADERS : []),
    ...(d.anthropic ? [header('anthropic-version', 'accepted, not required')] : []),
    ...(d.websocket ? [header('Upgrade', 'websocket', { type: 'string', const: 'websocket' }), header('Connection', 'Upgrade')] : []),
  ];
  return {
    operationId: operationId(key),
    summary: d.summary,
    ...(d.description ? { description: d.description } : {}),
    tags: [d.tag],
    security: d.access === 'none' ? [] : d.access === 'admin' ? [{ adminToken: [] }] : KEY_SECURITY,
    'x-svc-key-scope': d.access,
    // The route as the app registered it, so a reader (and the truth test) can match it back.
    'x-svc-route': key,
    ...(d.websocket ? { 'x-svc-websocket': true } : {}),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(d.body ? { requestBody: requestBodyOf(d.body) } : {}),
    responses: responsesOf(key.split(' ')[0], d),
  };
}

function requestBodyOf(body: NonNullable<OperationDescription['body']>) {
  const content: Record<string, { schema: JsonSchema }> = {};
  if (!body.multipart || body.json) content['application/json'] = { schema: body.schema };
  if (body.multipart) content['multipart/form-data'] = { schema: body.schema };
  return { required: body.required ?? true, content };
}

function responsesOf(method: string, d: OperationDescription): Operation['responses'] {
  const status = d.ok.status ?? 200;
  const content: Record<string, { schema: JsonSchema }> = {};
  if (d.ok.schema) content['application/json'] = { schema: d.ok.schema };
  for (const [type, schema] of Object.entries(d.ok.content ?? {})) content[type] = { schema };
  const responses: Operation['responses'] = {
    [String(status)]: {
      description: d.ok.description ?? 'OK',
      ...(d.ok.headers
        ? { headers: Object.fromEntries(Object.entries(d.ok.headers).map(([name, description]) => [name, { description, schema: { type: 'string' } }])) }
        : {}),
      ...(Object.keys(content).length > 0 ? { content } : {}),
    } as Operation['responses'][string],
  };
  const errorSchema = ref(d.anthropic ? 'AnthropicError' : 'ErrorObject');
  for (const code of [...new Set([...BASE_ERRORS[d.access], ...(d.websocket ? [] : beforeHandler(method)), ...(d.errors ?? [])])].sort((a, b) => a - b)) {
    responses[String(code)] = { description: STATUS_TEXT[code] ?? 'error', content: { 'application/json': { schema: errorSchema } } };
  }
  for (const [code, extra] of Object.entries(d.also ?? {}))
    responses[code] = { description: extra.description, content: { 'application/json': { schema: extra.schema } } };
  return responses;
}

function undocumentedOperation(key: string, path: string): Operation {
  return {
    operationId: operationId(key),
    summary: `Undocumented: ${key}`,
    description: 'This route has no description in libs/openapi/src/operations.ts.',
    [UNDOCUMENTED]: true,
    'x-svc-route': key,
    parameters: [...path.matchAll(/\{([^}]+)\}/g)].map(([, name]) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
    responses: { default: { description: 'unknown' } },
  };
}

/** `POST /v1/chat/completions` -> `post_v1_chat_completions`; unique since keys are. */
function operationId(key: string): string {
  return key
    .toLowerCase()
    .replace(/\*/g, 'any')
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_|_$/g, '');
}
