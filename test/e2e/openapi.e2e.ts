import { request as httpRequest } from 'node:http';
import { existsSync } from 'node:fs';
import { OPERATIONS, UNDOCUMENTED, type OpenApiDocument } from '@svc/openapi';
import { openApiErrors, responseChecker, responseSchema } from '@svc/openapi/testing/validation';
import { CHROMIUM, launchBrowser } from '../support/browser';
import { api, type Call, startGateway, stopGateway, type StartedGateway } from '../support/gateway';

/**
 * Issue 22: the OpenAPI document tells the truth. Every route the running gateway serves is in
 * it, every operation in it is served, it is valid OpenAPI 3.1, and real answers, success and
 * error, fit the schema it documents for their status.
 */
describe('GET /openapi.json and GET /docs (issue 22)', () => {
  let gw: StartedGateway;
  let root: Call;
  let document: OpenApiDocument;
  let check: ReturnType<typeof responseChecker>;
  let key: string;
  let management: string;
  let admin: { authorization: string };

  beforeAll(async () => {
    gw = await startGateway();
    root = api(gw.url.replace(/\/v1$/, ''));
    key = gw.keys.api_key;
    management = gw.keys.management_key;
    admin = { authorization: `Bearer ${gw.keys.admin_token}` };
    const served = await root('GET', '/openapi.json');
    expect(served.status).toBe(200);
    expect(served.headers.get('content-type')).toMatch(/^application\/json/);
    document = served.json;
    check = responseChecker(document);
  }, 60_000);

  afterAll(() => stopGateway(gw));

  /** `method template` with every documented operation, as [method, OpenAPI path, operation]. */
  const operations = () =>
    Object.entries(document.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => [method.toUpperCase(), path, op] as const));

  it('is valid OpenAPI 3.1 by the official schema, served without a key', async () => {
    expect(document.openapi).toBe('3.1.0');
    expect(await openApiErrors(document)).toEqual([]);
  });

  it('documents every route Fastify serves (read from its own route tree), and nothing else', () => {
    const served = routeTree(gw.app.getHttpAdapter().getInstance().printRoutes({ commonPrefix: false }))
      .filter(({ method, url }) => method !== 'HEAD' && method !== 'OPTIONS' && !/^\/(console|docs\/)/.test(url))
      .map(({ method, url }) => `${method} ${url}`)
      .sort();
    const documented = operations()
      .filter(([, , op]) => !op['x-svc-websocket'])
      .map(([, , op]) => String(op['x-svc-route']))
      .sort();
    expect(documented).toEqual(served);
    const fastify = gw.app.getHttpAdapter().getInstance();
    for (const route of documented) {
      const [method, url] = route.split(' ');
      expect({ route, registered: fastify.hasRoute({ method: method as 'GET', url }) }).toEqual({ route, registered: true });
    }
    expect(operations().filter(([, , op]) => op[UNDOCUMENTED])).toEqual([]);
    // And no description is left over for a route that is gone (the upgrade is no Fastify route).
    expect(Object.keys(OPERATIONS).filter((k) => !OPERATIONS[k].websocket && !served.includes(k))).toEqual([]);
    // The document covers the whole surface: every /v1 route, the operator API, health, metrics.
    expect(served.filter((r) => r.includes(' /admin/')).length).toBeGreaterThanOrEqual(14);
    expect(served).toEqual(
      expect.arrayContaining(['GET /health/live', 'GET /health/ready', 'GET /metrics', 'POST /v1/chat/completions', 'GET /openapi.json', 'GET /docs']),
    );
  });

  it('serves every documented operation: none answers route_not_found, and the realtime upgrade is refused as an upgrade', async () => {
    const missing: string[] = [];
    for (const [method, path, op] of operations()) {
      const url = path.replace(/\{[^}]+\}/g, 'x');
      if (op['x-svc-websocket']) {
        // Spec 4.16: a WebSocket upgrade without a key is refused with a plain HTTP 401 and the error object.
        const refused = await upgrade(`${gw.url.replace(/\/v1$/, '')}${url}?model=sim/realtime`);
        expect(refused.status).toBe(401);
        expect(check(responseSchema(document, method, path, 401), refused.json)).toEqual([]);
        continue;
      }
      const r = await root(method, url);
      if (r.status === 404 && r.json?.error?.code === 'route_not_found') missing.push(`${method} ${path}`);
    }
    expect(missing).toEqual([]);
  });

  /** The answer fits the schema the document gives for its status and content type. */
  function expectDocumented(method: string, path: string, r: { status: number; headers: Headers; json: unknown }) {
    const type = (r.headers.get('content-type') ?? '').split(';')[0];
    const errors = check(responseSchema(document, method, path, r.status, type), r.json);
    expect({ operation: `${method} ${path} ${r.status}`, errors }).toEqual({ operation: `${method} ${path} ${r.status}`, errors: [] });
  }

  it('real successes fit their documented schemas', async () => {
    const call = (method: string, path: string, options: Parameters<Call>[2] = {}) => root(method, path, options);
    const chat = await call('POST', '/v1/chat/completions', { key, body: { model: 'sim/echo', messages: [{ role: 'user', content: 'hello' }] } });
    expect(chat.status).toBe(200);
    expectDocumented('POST', '/v1/chat/completions', chat);
    const embeddings = await call('POST', '/v1/embeddings', { key, body: { model: 'sim/embed', input: ['a', 'b'] } });
    expect(embeddings.status).toBe(200);
    expectDocumented('POST', '/v1/embeddings', embeddings);
    expectDocumented('GET', '/v1/models', await call('GET', '/v1/models', { key }));
    expectDocumented('GET', '/v1/models/count', await call('GET', '/v1/models/count?type=chat', { key }));
    expectDocumented('GET', '/v1/models/{id}', await call('GET', '/v1/models/sim/echo', { key }));
    expectDocumented('GET', '/v1/credits', await call('GET', '/v1/credits', { key }));
    const generation = await call('GET', `/v1/generation?id=${chat.json.id}`, { key });
    expect(generation.status).toBe(200);
    expectDocumented('GET', '/v1/generation', generation);
    expectDocumented('POST', '/v1/generations/lookup', await call('POST', '/v1/generations/lookup', { key, body: { ids: [chat.json.id, 'gen-unknown'] } }));
    expectDocumented('GET', '/v1/activity', await call('GET', '/v1/activity', { key }));
    expectDocumented('GET', '/v1/key', await call('GET', '/v1/key', { key }));
    const created = await call('POST', '/v1/keys', {
      key: management,
      body: { name: 'openapi', limit: 5, limit_reset: 'weekly', allowed_models: ['sim/echo'] },
    });
    expect(created.status).toBe(201);
    expectDocumented('POST', '/v1/keys', created);
    expectDocumented('GET', '/v1/keys', await call('GET', '/v1/keys', { key: management }));
    expectDocumented('GET', '/v1/keys/{id}', await call('GET', `/v1/keys/${created.json.data.id}`, { key: management }));
    expectDocumented(
      'POST',
      '/v1/messages',
      await call('POST', '/v1/messages', { key, body: { model: 'sim/echo', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] } }),
    );
    expectDocumented(
      'POST',
      '/v1/messages/count_tokens',
      await call('POST', '/v1/messages/count_tokens', { key, body: { model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }] } }),
    );
    expectDocumented('POST', '/v1/responses', await call('POST', '/v1/responses', { key, body: { model: 'sim/echo', input: 'hi' } }));
    expectDocumented('POST', '/v1/completions', await call('POST', '/v1/completions', { key, body: { model: 'sim/echo', prompt: 'hi' } }));
    expectDocumented(
      'POST',
      '/v1/rerank',
      await call('POST', '/v1/rerank', { key, body: { model: 'sim/rerank', query: 'q', documents: ['a', { text: 'b' }], return_documents: true } }),
    );
    expectDocumented('POST', '/v1/moderations', await call('POST', '/v1/moderations', { key, body: { input: 'hi' } }));
    expectDocumented('POST', '/v1/search', await call('POST', '/v1/search', { key, body: { query: ['one', 'two'], max_results: 2 } }));
    expectDocumented(
      'POST',
      '/v1/images/generations',
      await call('POST', '/v1/images/generations', { key, body: { model: 'sim/image', prompt: 'a dot', size: '16x16' } }),
    );
    const preset = await call('POST', '/v1/presets', {
      key: management,
      body: { slug: 'openapi', config: { model: 'sim/echo', cache: { enabled: true, ttl_seconds: 60 } } },
    });
    expect(preset.status).toBe(201);
    expectDocumented('POST', '/v1/presets', preset);
    expectDocumented('GET', '/v1/presets', await call('GET', '/v1/presets', { key }));
    expectDocumented('GET', '/v1/settings', await call('GET', '/v1/settings', { key: management }));
    expectDocumented('GET', '/v1/audit-log', await call('GET', '/v1/audit-log', { key: management }));
    expectDocumented('GET', '/v1/files', await call('GET', '/v1/files', { key }));
    expectDocumented('GET', '/v1/batches', await call('GET', '/v1/batches', { key }));
    expectDocumented('GET', '/v1/provider-keys', await call('GET', '/v1/provider-keys', { key: management }));
    const account = await call('POST', '/admin/accounts', { headers: admin, body: { initial_credits_usd: 2 } });
    expectDocumented('POST', '/admin/accounts', account);
    expectDocumented('GET', '/admin/accounts/{id}', await call('GET', `/admin/accounts/${account.json.id}`, { headers: admin }));
    expectDocumented(
      'POST',
      '/admin/accounts/{id}/keys',
      await call('POST', `/admin/accounts/${account.json.id}/keys`, { headers: admin, body: { scope: 'read_only' } }),
    );
    // Issue 23: a correction and a statement, as answered.
    const adjustment = await call('POST', `/admin/accounts/${account.json.id}/adjustments`, {
      headers: admin,
      body: { amount_usd: -0.5, kind: 'adjustment', reason: 'openapi', operator: 'ops' },
    });
    expect(adjustment.status).toBe(201);
    expectDocumented('POST', '/admin/accounts/{id}/adjustments', adjustment);
    const statement = await call('GET', `/v1/credits/statement?from=2020-01-01&to=2020-12-31`, { key: management });
    expect(statement.status).toBe(200);
    expectDocumented('GET', '/v1/credits/statement', statement);
    const since = new Date(Date.now() - 3_600_000).toISOString();
    const recent = await call('GET', `/v1/credits/statement?from=${since}&to=${new Date().toISOString()}`, { key: management });
    expect(recent.status).toBe(200);
    expect(recent.json.data.charges.length).toBeGreaterThan(0);
    expectDocumented('GET', '/v1/credits/statement', recent);
    expectDocumented('GET', '/admin/audit-log', await call('GET', '/admin/audit-log?limit=5', { headers: admin }));
    expectDocumented('GET', '/health/live', await call('GET', '/health/live'));
    expectDocumented('GET', '/health/ready', await call('GET', '/health/ready'));
  });

  it("real errors fit the error object of spec 2.1, and Anthropic's shape on /v1/messages", async () => {
    const badParam = await root('POST', '/v1/embeddings', { key, body: { model: 'sim/embed', input: 'hi', encoding_format: 'hex' } });
    expect(badParam.status).toBe(400);
    expect(badParam.json.error.param).toBe('encoding_format');
    expectDocumented('POST', '/v1/embeddings', badParam);

    const unauthenticated = await root('GET', '/v1/credits', { key: 'svc_test_not-a-key' });
    expect(unauthenticated.status).toBe(401);
    expectDocumented('GET', '/v1/credits', unauthenticated);

    const unknownModel = await root('GET', '/v1/models/sim/no-such-model', { key });
    expect(unknownModel.status).toBe(404);
    expectDocumented('GET', '/v1/models/{id}', unknownModel);
    const unknownGeneration = await root('GET', '/v1/generation?id=gen-unknown', { key });
    expect(unknownGeneration.status).toBe(404);
    expectDocumented('GET', '/v1/generation', unknownGeneration);

    const wrongScope = await root('GET', '/v1/keys', { key });
    expect(wrongScope.status).toBe(403);
    expectDocumented('GET', '/v1/keys', wrongScope);

    const messages = await root('POST', '/v1/messages', { key, body: { model: 'sim/echo', max_tokens: 5, messages: [] } });
    expect(messages.status).toBe(400);
    expect(messages.json.type).toBe('error');
    expectDocumented('POST', '/v1/messages', messages);
    const messagesUnknownModel = await root('POST', '/v1/messages', {
      key,
      body: { model: 'sim/nope', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(messagesUnknownModel.status).toBe(404);
    expectDocumented('POST', '/v1/messages', messagesUnknownModel);

    const adminRefused = await root('GET', '/admin/audit-log');
    expect(adminRefused.status).toBe(401);
    expectDocumented('GET', '/admin/audit-log', adminRefused);
  });

  it('a real answer with one field of the wrong type does not fit: the schemas are not catch-alls', async () => {
    const created = await root('POST', '/v1/keys', { key: management, body: { name: 'strict' } });
    const schema = responseSchema(document, 'POST', '/v1/keys', 201);
    expect(check(schema, created.json)).toEqual([]);
    expect(check(schema, { ...created.json, data: { ...created.json.data, id: 42 } })).not.toEqual([]);
    expect(check(schema, { ...created.json, data: { ...created.json.data, rate_limit: { requests_per_minute: '600' } } })).not.toEqual([]);
    const credits = await root('GET', '/v1/credits', { key });
    expect(
      check(responseSchema(document, 'GET', '/v1/credits', 200), { data: { ...credits.json.data, balance: String(credits.json.data.balance) } }),
    ).not.toEqual([]);
    const embeddings = await root('POST', '/v1/embeddings', { key, body: { model: 'sim/embed', input: 'a' } });
    expect(
      check(responseSchema(document, 'POST', '/v1/embeddings', 200), { ...embeddings.json, data: [{ ...embeddings.json.data[0], embedding: [true] }] }),
    ).not.toEqual([]);
  });

  it('serves the reference page and its files from this origin, under the same policy as the console', async () => {
    const page = await fetch(`${gw.url.replace(/\/v1$/, '')}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = page.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    const html = await page.text();
    expect(html).not.toMatch(/https?:\/\//);
    const sources = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map(([, s]) => s);
    expect(sources).toEqual(expect.arrayContaining(['/docs/swagger-ui-bundle.js', '/docs/init.js', '/docs/swagger-ui.css']));
    for (const source of sources) {
      const r = await fetch(`${gw.url.replace(/\/v1$/, '')}${source}`);
      // Read to the end: a body left unread (the bundle is about 1 MB) keeps its response
      // in flight, and the gateway's close in afterAll waits for it.
      const bytes = (await r.arrayBuffer()).byteLength;
      expect({ source, status: r.status, empty: bytes === 0 }).toEqual({ source, status: 200, empty: false });
    }
    // Only the files the page names: not Swagger UI's own index.html with its petstore URL.
    expect((await root('GET', '/docs/index.html')).status).toBe(404);
    expect((await root('GET', '/docs/../package.json')).status).toBe(404);
  });

  (existsSync(CHROMIUM) ? it : it.skip)(
    'renders every operation in Chromium offline, loading nothing from elsewhere and breaking no CSP rule',
    async () => {
      const browser = await launchBrowser();
      try {
        const page = await browser.newPage();
        const origin = gw.url.replace(/\/v1$/, '').replace('localhost', '127.0.0.1');
        const elsewhere: string[] = [];
        const violations: string[] = [];
        await page.route('**/*', (route) => {
          if (route.request().url().startsWith(origin)) return route.continue();
          elsewhere.push(route.request().url());
          return route.abort();
        });
        page.on('console', (m) => {
          if (/Content Security Policy|Refused to/i.test(m.text())) violations.push(m.text());
        });
        await page.goto(`${origin}/docs`);
        await page.locator('.swagger-ui .info .title').filter({ hasText: 'svc-gateway' }).waitFor({ timeout: 20_000 });
        // Each operation, and each webhook of spec 6.1, is one block.
        const shown = await page.locator('.opblock').count();
        expect(shown).toBe(operations().length + Object.keys(document.webhooks as object).length);
        expect(elsewhere).toEqual([]);
        expect(violations).toEqual([]);
      } finally {
        await browser.close();
      }
    },
    60_000,
  );
});

/** Fastify's printRoutes({commonPrefix: false}) tree as [method, full path] pairs. */
function routeTree(tree: string): { method: string; url: string }[] {
  const routes: { method: string; url: string }[] = [];
  const prefixes: string[] = [];
  for (const line of tree.split('\n')) {
    const match = /^([│ ]*)[└├]── (.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!match) continue;
    const depth = match[1].length / 4;
    prefixes.length = depth;
    const parent = depth > 0 ? prefixes[depth - 1] : '';
    // The tree prints a wildcard as a child `*` of the path before its slash (`/v1/models` > `*`).
    const url = parent + (match[2] === '*' && parent !== '' && !parent.endsWith('/') ? '/*' : match[2]);
    prefixes[depth] = url;
    for (const method of match[3]?.split(', ') ?? []) routes.push({ method, url });
  }
  return routes;
}

/** A WebSocket upgrade request without a key; the status and JSON body of the refusal. */
function upgrade(url: string): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' },
    });
    req.on('response', (res) => {
      let body = '';
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(body) }));
    });
    req.on('upgrade', () => reject(new Error('upgraded without a key')));
    req.on('error', reject);
    req.end();
  });
}
