import fc from 'fast-check';
import { usdToNano } from '@svc/platform';
import { startGateway, stopGateway, type StartedGateway } from '../support/gateway';

/**
 * Issue 14: property-based fuzzing of every route with the families of input that once answered
 * 500, poisoned a projection for every tenant, or were read by guessing: wrong types, nulls,
 * bounds, NUL and unpaired surrogates (in values, keys, paths and queries), deep nesting,
 * prototype keys, duplicate keys, bodies that are not objects, other content types and
 * encodings, oversized bodies. Seeded (FUZZ_SEED) and sized (FUZZ_RUNS cases per route) so a
 * failure replays exactly. Properties, for every request:
 *  1. no 5xx;
 *  2. every 4xx is the spec's error object (section 2.1), Anthropic's on /v1/messages*;
 * and over the run:
 *  3. the balance moved by exactly what the 2xx answers of billed routes said they cost;
 *  4. every projection is back at lag 0 with nothing set aside, and a revocation still takes effect;
 *  5. an unrelated request answers meanwhile.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20261124);
const RUNS = Number(process.env.FUZZ_RUNS ?? 60);
const ADMIN_TOKEN = 'admin-token-for-fuzz-tests';

type Key = 'full' | 'management' | 'admin' | 'none';

interface Route {
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  /** `{id}` and `{provider}` are filled with generated path segments (or real ids). */
  path: string;
  key: Key;
  /** The body's known fields, given hostile values; none for routes without a body. */
  fields?: string[];
  /** Query parameters given hostile values. */
  query?: string[];
  /** The answer is billed (its cost counts in property 3). */
  billed?: boolean;
}

const KEY_FIELDS = [
  'name',
  'project',
  'environment',
  'scope',
  'limit',
  'limit_reset',
  'allowed_models',
  'allowed_ips',
  'allowed_referrers',
  'rpm_limit',
  'tpm_limit',
  'expires_in_days',
];

const ROUTES: Route[] = [
  {
    method: 'POST',
    path: '/v1/chat/completions',
    key: 'full',
    billed: true,
    fields: [
      'model',
      'messages',
      'max_tokens',
      'max_completion_tokens',
      'temperature',
      'top_p',
      'top_k',
      'stop',
      'seed',
      'stream',
      'stream_options',
      'tools',
      'tool_choice',
      'response_format',
      'reasoning',
      'logit_bias',
      'user',
      'safety_identifier',
      'n',
      'provider',
      'models',
      'plugins',
      'transforms',
      'prediction',
    ],
  },
  {
    method: 'POST',
    path: '/v1/messages',
    key: 'full',
    billed: true,
    fields: ['model', 'messages', 'max_tokens', 'system', 'stream', 'tools', 'tool_choice', 'temperature', 'top_k', 'stop_sequences', 'metadata', 'thinking'],
  },
  { method: 'POST', path: '/v1/messages/count_tokens', key: 'full', fields: ['model', 'messages', 'system', 'tools'] },
  {
    method: 'POST',
    path: '/v1/responses',
    key: 'full',
    billed: true,
    fields: [
      'model',
      'input',
      'instructions',
      'stream',
      'store',
      'previous_response_id',
      'tools',
      'max_output_tokens',
      'text',
      'reasoning',
      'metadata',
      'user',
    ],
  },
  {
    method: 'POST',
    path: '/v1/completions',
    key: 'full',
    billed: true,
    fields: ['model', 'prompt', 'max_tokens', 'echo', 'suffix', 'logprobs', 'stream', 'stop', 'temperature'],
  },
  { method: 'POST', path: '/v1/embeddings', key: 'full', billed: true, fields: ['model', 'input', 'dimensions', 'encoding_format', 'user'] },
  { method: 'POST', path: '/v1/rerank', key: 'full', billed: true, fields: ['model', 'query', 'documents', 'top_n', 'return_documents', 'provider'] },
  { method: 'POST', path: '/v1/moderations', key: 'full', billed: true, fields: ['model', 'input'] },
  {
    method: 'POST',
    path: '/v1/images/generations',
    key: 'full',
    billed: true,
    fields: ['model', 'prompt', 'n', 'size', 'quality', 'response_format', 'image', 'user'],
  },
  {
    method: 'POST',
    path: '/v1/audio/speech',
    key: 'full',
    billed: true,
    fields: ['model', 'input', 'voice', 'response_format', 'speed', 'instructions', 'stream_format'],
  },
  // Takes multipart forms only: every JSON or raw body here must be refused with the error object.
  { method: 'POST', path: '/v1/audio/transcriptions', key: 'full', fields: ['model', 'file', 'response_format'] },
  { method: 'POST', path: '/v1/generations/lookup', key: 'full', fields: ['ids'] },
  { method: 'GET', path: '/v1/generation', key: 'full', query: ['id'] },
  { method: 'GET', path: '/v1/activity', key: 'full', query: ['date', 'key_id', 'user'] },
  { method: 'GET', path: '/v1/credits', key: 'full', query: ['x'] },
  { method: 'GET', path: '/v1/key', key: 'full' },
  { method: 'GET', path: '/v1/models', key: 'full', query: ['type', 'supported_parameters', 'input_modalities', 'output_modalities'] },
  { method: 'GET', path: '/v1/models/count', key: 'full', query: ['type', 'supported_parameters'] },
  { method: 'GET', path: '/v1/models/{id}', key: 'full' },
  { method: 'GET', path: '/v1/responses/{id}', key: 'full' },
  { method: 'DELETE', path: '/v1/responses/{id}', key: 'full' },
  { method: 'GET', path: '/v1/responses/{id}/input_items', key: 'full', query: ['limit', 'order', 'after'] },
  { method: 'POST', path: '/v1/keys', key: 'management', fields: KEY_FIELDS },
  { method: 'GET', path: '/v1/keys', key: 'management' },
  { method: 'GET', path: '/v1/keys/{id}', key: 'management' },
  { method: 'PATCH', path: '/v1/keys/{id}', key: 'management', fields: KEY_FIELDS },
  { method: 'DELETE', path: '/v1/keys/{id}', key: 'management' },
  { method: 'POST', path: '/v1/keys/{id}/rotate', key: 'management', fields: ['grace_period_seconds'] },
  { method: 'POST', path: '/admin/accounts', key: 'admin', fields: ['initial_credits_usd'] },
  { method: 'GET', path: '/admin/accounts/{id}', key: 'admin' },
  { method: 'PATCH', path: '/admin/accounts/{id}', key: 'admin', fields: ['daily_limit_usd'] },
  { method: 'POST', path: '/admin/accounts/{id}/credits', key: 'admin', fields: ['amount_usd'] },
  { method: 'POST', path: '/admin/accounts/{id}/keys', key: 'admin', fields: [...KEY_FIELDS, 'org_id'] },
  { method: 'PUT', path: '/admin/accounts/{id}/provider-keys/{provider}', key: 'admin', fields: ['api_key'] },
  { method: 'DELETE', path: '/admin/accounts/{id}/provider-keys/{provider}', key: 'admin' },
  { method: 'POST', path: '/admin/orgs', key: 'admin', fields: ['owner_account_id', 'name'] },
  { method: 'POST', path: '/admin/orgs/{id}/members', key: 'admin', fields: ['account_id', 'role'] },
  { method: 'GET', path: '/admin/audit-log', key: 'admin', query: ['account_id', 'limit'] },
  { method: 'GET', path: '/v1/no-such-route/{id}', key: 'full' },
];

/** Strings PostgreSQL cannot store, or that probe edges. */
const NASTY_STRINGS = [
  '',
  ' ',
  'a\u0000b',
  '\u0000',
  'x\ud800',
  '\udc00y',
  '__proto__',
  'constructor',
  'sim/echo',
  'sim/embed',
  '../../etc/passwd',
  'http://127.0.0.1:1/',
  '%00',
  '😀',
  'x'.repeat(5_000),
  '1e309',
  'null',
  'true',
];
const NASTY_NUMBERS = [0, -0, -1, 1, 0.5, 1e10, 1e300, -1e300, 2 ** 31, 2 ** 53 + 2, Number.MAX_SAFE_INTEGER, 1e-12];

const leaf = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(...NASTY_NUMBERS),
  fc.string({ maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.constantFrom(...NASTY_STRINGS),
);
const { value: hostile } = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom(...NASTY_STRINGS)), tie('value'), { maxKeys: 4 }),
  ),
}));

/** A message list that is nearly right, so validation past the top level is reached too. */
const messages = fc.array(
  fc.record(
    { role: fc.oneof(fc.constantFrom('user', 'assistant', 'system', 'tool', 'developer'), hostile), content: fc.oneof(fc.string({ maxLength: 30 }), hostile) },
    { requiredKeys: [] },
  ),
  { maxLength: 3 },
);

/**
 * Valid bodies of the billed routes: one field at a time is given a hostile value, so the checks
 * behind the first one are reached too, and some requests succeed (and are billed).
 */
const VALID: Record<string, Record<string, unknown>> = {
  '/v1/chat/completions': { model: 'sim/echo', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
  '/v1/messages': { model: 'sim/echo', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
  '/v1/messages/count_tokens': { model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }] },
  '/v1/responses': { model: 'sim/echo', max_output_tokens: 16, input: 'hi', store: false },
  '/v1/completions': { model: 'sim/echo', max_tokens: 5, prompt: 'hi' },
  '/v1/embeddings': { model: 'sim/embed', input: 'hi' },
  '/v1/rerank': { model: 'sim/rerank', query: 'hi', documents: ['hi there', 'bye'] },
  '/v1/moderations': { model: 'sim/moderation', input: 'hi' },
  '/v1/images/generations': { model: 'sim/image', prompt: 'a dot', size: '16x16' },
  '/v1/audio/speech': { model: 'sim/tts', input: 'hi', response_format: 'pcm' },
};

function nearlyValid(route: Route): fc.Arbitrary<Record<string, unknown>> | null {
  const valid = VALID[route.path];
  if (!valid || !route.fields) return null;
  return fc.tuple(fc.constantFrom(...route.fields), hostile, fc.boolean()).map(([field, value, drop]) => {
    const body: Record<string, unknown> = { ...valid, [field]: value };
    if (drop) delete body[field];
    return body;
  });
}

/** A body of the route's fields, each given a hostile value (sometimes a plausible one). */
function bodyFor(route: Route): fc.Arbitrary<Record<string, unknown>> {
  const fields = route.fields ?? [];
  const model = fc.constantFrom('sim/echo', 'sim/embed', 'sim/small-8k', 'sim/rerank', 'sim/moderation', 'sim/image', 'sim/tts', 'no/such-model');
  const shape: Record<string, fc.Arbitrary<unknown>> = {};
  for (const f of fields) shape[f] = f === 'model' ? fc.oneof(model, hostile) : f === 'messages' || f === 'input' ? fc.oneof(messages, hostile) : hostile;
  return fc
    .record(shape, { requiredKeys: [] })
    .chain((body) =>
      fc.dictionary(fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom(...NASTY_STRINGS)), hostile, { maxKeys: 2 }).map((extra) => ({ ...extra, ...body })),
    );
}

/** Bodies as raw text: what JSON.stringify of a generated value cannot produce. */
const RAW_BODIES: { name: string; body: string; type?: string; encoding?: string }[] = [
  { name: 'null', body: 'null' },
  { name: 'a number', body: '42' },
  { name: 'a string', body: '"text"' },
  { name: 'an array', body: '[{"model": "sim/echo"}]' },
  { name: 'prototype keys', body: '{"__proto__": {"admin": true}, "constructor": {"prototype": {"x": 1}}, "model": "sim/echo"}' },
  { name: 'duplicate keys', body: '{"name": "a", "name": null, "model": "sim/echo", "model": 5}' },
  { name: 'an escaped NUL key', body: '{"\\u0000": 1, "model": "sim/echo"}' },
  { name: 'an escaped lone surrogate', body: '{"name": "\\ud800", "model": "sim/echo\\udfff"}' },
  { name: '3,000 levels of nesting', body: `{"messages": ${'['.repeat(3000)}${']'.repeat(3000)}}` },
  { name: 'deep objects', body: `${'{"a":'.repeat(2000)}1${'}'.repeat(2000)}` },
  { name: 'truncated JSON', body: '{"model": "sim/echo", "messages": [' },
  { name: 'an empty body labelled JSON', body: '' },
  { name: 'a form body', body: 'name=sneaky&scope=management', type: 'application/x-www-form-urlencoded' },
  { name: 'plain text', body: 'hello', type: 'text/plain' },
  { name: 'a body without a content type', body: '{"name": "x"}', type: '' },
  { name: 'a gzip label on a plain body', body: '{"name": "x"}', encoding: 'gzip' },
  { name: 'just over 10 MB', body: `{"name": "${'x'.repeat(10 * 1024 * 1024)}"}` },
];

/** Path segments: real ids, and what should never reach a handler. */
const segment = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom('%00', '%ED%A0%80', '%E0%A4%A', '..', '%2e%2e', 'sim%2Fecho', 'x'.repeat(300), '__proto__', '%F0%9F%98%80', 'a%0Ab'),
);

interface Outcome {
  status: number;
  body: any;
  text: string;
  headers: Headers;
}

describe('fuzzing every route (issue 14)', () => {
  let gw: StartedGateway;
  let base: string;
  let account: string;
  let other: string;
  let keys: Record<Key, string | null>;
  let realKeyId: string;
  const billedCosts: bigint[] = [];
  const cases = new Map<string, number>();
  const failures: string[] = [];

  const send = async (route: Route, path: string, init: { body?: string; type?: string; encoding?: string }): Promise<Outcome> => {
    const headers: Record<string, string> = {};
    const key = keys[route.key];
    if (key) headers.authorization = `Bearer ${key}`;
    if (init.body !== undefined && init.type !== '') headers['content-type'] = init.type ?? 'application/json';
    if (init.encoding) headers['content-encoding'] = init.encoding;
    const response = await fetch(`${base}${path}`, { method: route.method, headers, body: route.method === 'GET' ? undefined : init.body });
    const text = await response.text();
    let body: any = null;
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
    return { status: response.status, body, text, headers: response.headers };
  };

  /** Properties 1 and 2, and the cost of a billed success for property 3. */
  const check = (route: Route, what: string, o: Outcome): void => {
    cases.set(`${route.method} ${route.path}`, (cases.get(`${route.method} ${route.path}`) ?? 0) + 1);
    const where = `${route.method} ${route.path} with ${what.slice(0, 300)}: ${o.status} ${o.text.slice(0, 300)}`;
    if (o.status >= 500) failures.push(`5xx: ${where}`);
    if (o.status >= 400) {
      const anthropic = route.path.startsWith('/v1/messages');
      const ok = anthropic
        ? o.body?.type === 'error' && typeof o.body?.error?.type === 'string' && typeof o.body?.error?.message === 'string'
        : o.body !== null &&
          Object.keys(o.body).join() === 'error' &&
          typeof o.body.error.message === 'string' &&
          typeof o.body.error.type === 'string' &&
          (o.body.error.code === null || typeof o.body.error.code === 'string') &&
          (o.body.error.param === null || typeof o.body.error.param === 'string');
      if (!ok) failures.push(`not the error object: ${where}`);
    }
    if (route.billed && o.status >= 200 && o.status < 300) {
      // A 2xx of a billed route says what it cost: usage.cost, or the stream's last usage event.
      // Audio carries it in x-svc-cost (spec 4.9: the body is the audio itself).
      const header = o.headers.get('x-svc-cost');
      const cost = header !== null ? Number(header) : (o.body?.usage?.cost ?? [...o.text.matchAll(/"cost":\s*([0-9.e-]+)/g)].map((m) => Number(m[1])).at(-1));
      if (typeof cost !== 'number') failures.push(`billed 2xx without a cost: ${where}`);
      else billedCosts.push(usdToNano(cost));
    }
  };

  const balanceNano = async () => {
    const r = await fetch(`${base}/v1/credits`, { headers: { authorization: `Bearer ${keys.full}` } });
    expect(r.status).toBe(200);
    const { data } = (await r.json()) as { data: { total_credits: number; total_usage: number } };
    return usdToNano(data.total_credits) - usdToNano(data.total_usage);
  };

  const pathOf = (route: Route, id: string, provider = 'sim') => route.path.replace('{id}', id).replace('{provider}', provider);

  beforeAll(async () => {
    // Thousands of requests a minute on one live key: the rate limits are not what is tested here.
    gw = await startGateway({ SVC_ADMIN_TOKEN: ADMIN_TOKEN, SVC_RATE_LIMITS_LIVE: 'rpm=1000000,tpm=1000000000,concurrent=1000' });
    base = gw.url.replace(/\/v1$/, '');
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
    const post = async (path: string, body: unknown) =>
      (await (await fetch(`${base}${path}`, { method: 'POST', headers: admin, body: JSON.stringify(body) })).json()) as any;
    account = (await post('/admin/accounts', { initial_credits_usd: 50 })).id;
    other = (await post('/admin/accounts', { initial_credits_usd: 1 })).id;
    const full = await post(`/admin/accounts/${account}/keys`, { name: 'fuzz' });
    const management = await post(`/admin/accounts/${account}/keys`, { name: 'fuzz manager', scope: 'management' });
    keys = { full: full.key, management: management.key, admin: ADMIN_TOKEN, none: null };
    // A key of the other account: PATCH, rotate and DELETE with real ids must not touch the fuzzing keys.
    realKeyId = (await post(`/admin/accounts/${other}/keys`, { name: 'target' })).data.id;
  }, 60_000);

  afterAll(() => stopGateway(gw));

  it('holds properties 1 to 5 over generated bodies, paths and queries of every route', async () => {
    const before = await balanceNano();
    let sent = 0;
    const alive = async () => {
      // Property 5: an unrelated request answers while hostile ones are processed.
      if (++sent % 25 === 0) expect((await fetch(`${base}/v1/credits`, { headers: { authorization: `Bearer ${keys.full}` } })).status).toBe(200);
    };
    const idFor = (route: Route) =>
      route.path.startsWith('/admin/accounts/')
        ? fc.constantFrom(other, other, 'acc_missing')
        : route.path.startsWith('/v1/keys/')
          ? fc.oneof(fc.constant(realKeyId), segment)
          : segment;

    for (const route of ROUTES) {
      const path = route.path.includes('{') ? fc.tuple(idFor(route), fc.constantFrom('sim', 'sim-backup', 'nope')) : fc.constant(['', ''] as const);
      const query = route.query
        ? fc.array(
            fc.tuple(
              fc.constantFrom(...route.query),
              fc.oneof(fc.string({ maxLength: 10 }), fc.constantFrom('%00', '%ED%A0%80', '-1', '1e309', '2026-13-45', 'x'.repeat(3000))),
            ),
            { maxLength: 3 },
          )
        : fc.constant([]);
      const near = nearlyValid(route);
      const body = route.fields ? (near ? fc.oneof(bodyFor(route), near) : bodyFor(route)).map((b) => JSON.stringify(b)) : fc.constant(undefined);
      await fc.assert(
        fc.asyncProperty(path, query, body, async ([id, provider], params, json) => {
          const q = params.map(([k, v]) => `${k}=${v.startsWith('%') ? v : encodeURIComponent(v)}`).join('&');
          const url = `${pathOf(route, String(id).startsWith('%') ? String(id) : encodeURIComponent(String(id)), provider)}${q ? `?${q}` : ''}`;
          check(route, `${url} ${json ?? ''}`, await send(route, url, { body: json }));
          await alive();
        }),
        { seed: SEED, numRuns: RUNS, endOnFailure: true },
      );
      for (const raw of route.method === 'GET' ? [] : RAW_BODIES) {
        const url = pathOf(route, route.path.startsWith('/admin/accounts/') ? other : route.path.startsWith('/v1/keys/') ? realKeyId : 'x');
        check(route, `${raw.name} (${url})`, await send(route, url, raw));
        await alive();
      }
    }
    // Keys that are not what they claim, on every route kind.
    for (const route of ROUTES.filter((r) => r.key !== 'none')) {
      const url = pathOf(route, 'x');
      const attempts: Record<string, string>[] = [
        { authorization: 'Bearer svc_live_short' },
        { authorization: `Bearer ${keys.full}`, 'x-api-key': `${keys.management}` },
        { authorization: 'Basic Zm9vOmJhcg==' },
      ];
      for (const headers of attempts) {
        const r = await fetch(`${base}${url}`, { method: route.method, headers });
        const text = await r.text();
        check(route, `auth ${JSON.stringify(headers).slice(0, 40)}`, {
          status: r.status,
          text,
          headers: r.headers,
          body: (() => {
            try {
              return JSON.parse(text);
            } catch {
              return null;
            }
          })(),
        });
      }
    }

    expect(failures.slice(0, 20)).toEqual([]);
    // Property 3: the balance moved by exactly what the billed answers said they cost.
    const spent = billedCosts.reduce((a, b) => a + b, 0n);
    expect(before - (await balanceNano())).toBe(spent);
    // Property 4: nothing poisoned; key writes and revocation work for everyone.
    await gw.runtime.projections.catchUpAll();
    expect((await gw.runtime.projections.status()).filter((s) => s.lag !== 0 || s.quarantined !== 0)).toEqual([]);
    const created = await fetch(`${base}/v1/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${keys.management}`, 'content-type': 'application/json' },
      body: '{"name": "after fuzzing"}',
    });
    expect(created.status).toBe(201);
    const { data, key } = (await created.json()) as { data: { id: string }; key: string };
    expect((await fetch(`${base}/v1/credits`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    expect((await fetch(`${base}/v1/keys/${data.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${keys.management}` } })).status).toBe(200);
    expect((await fetch(`${base}/v1/credits`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(401);
    console.log(
      `fuzz (seed ${SEED}, ${RUNS} generated cases per route): ${[...cases.values()].reduce((a, b) => a + b, 0)} requests over ${cases.size} routes, ${billedCosts.length} billed answers`,
    );
  }, 600_000);
});
