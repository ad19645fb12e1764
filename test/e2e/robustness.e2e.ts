import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { countChatPromptTokens } from '@svc/providers';
import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';

const ADMIN_TOKEN = 'admin-token-for-robustness-tests';

/** One raw HTTP exchange, for what fetch will not send (two Authorization headers, broken requests). */
function raw(port: number, bytes: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.end(bytes));
    let data = '';
    socket.on('data', (chunk) => (data += chunk.toString('utf8')));
    socket.on('error', reject);
    socket.on('close', () => {
      const [head, ...rest] = data.split('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), body: JSON.parse(rest.join('\r\n\r\n')) });
    });
  });
}

function withHeaders(port: number, path: string, headers: Record<string, string | string[]>): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, method: 'GET', headers }, (res) => {
      let data = '';
      res.on('data', (chunk) => (data += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(data) }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Spec 2.1: `{error: {message, type, code, param}}`, code and param a string or null. */
function expectErrorObject(body: any): void {
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect([typeof body.error.message, typeof body.error.type]).toEqual(['string', 'string']);
  for (const field of ['code', 'param']) expect(body.error[field] === null || typeof body.error[field] === 'string').toBe(true);
}

/**
 * Issue 14: requests that once poisoned the log (an event no projection could apply), answered
 * 500, or were read by guessing. Each is refused with the spec's error object (section 2.1)
 * naming the field, and changes nothing: no event, no charge, every projection at lag 0.
 */
describe('robustness: bad input changes nothing', () => {
  let gw: StartedGateway;
  let call: Call;
  let port: number;
  let account: string;
  let management: string;
  let full: string;
  const admin = (method: string, path: string, body?: unknown) => call(method, path, { body, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });

  const balance = async () => (await call('GET', '/v1/credits', { key: full })).json.data.balance as number;
  const eventCount = async () => Number((await gw.runtime.sql.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0].n);
  const projectionsHealthy = async () => {
    await gw.runtime.projections.catchUpAll();
    expect((await gw.runtime.projections.status()).map((s) => [s.name, s.lag, s.quarantined])).toEqual(
      gw.runtime.projections.projections.map((p) => [p.name, 0, 0]),
    );
  };

  beforeAll(async () => {
    gw = await startGateway({ SVC_ADMIN_TOKEN: ADMIN_TOKEN });
    call = api(gw.url.replace(/\/v1$/, ''));
    port = Number(new URL(gw.url).port);
    account = (await admin('POST', '/admin/accounts', { initial_credits_usd: 5 })).json.id;
    management = (await admin('POST', `/admin/accounts/${account}/keys`, { scope: 'management', name: 'manager' })).json.key;
    full = (await admin('POST', `/admin/accounts/${account}/keys`, { name: 'caller' })).json.key;
  }, 60_000);

  afterAll(() => stopGateway(gw));

  describe('key and account writes refuse what no read model could hold (14.1)', () => {
    const poison: [Record<string, unknown>, string][] = [
      [{ name: null }, 'name'],
      [{ scope: null }, 'scope'],
      [{ environment: null }, 'environment'],
      [{ limit_reset: null }, 'limit_reset'],
      [{ limit: 1e10 }, 'limit'],
      [{ rpm_limit: 2 ** 31 }, 'rpm_limit'],
      [{ allowed_models: Array.from({ length: 1001 }, (_, i) => `m${i}`) }, 'allowed_models'],
    ];

    it.each(poison.map(([body, param]) => [JSON.stringify(body).slice(0, 40), body, param] as const))(
      'POST /v1/keys, PATCH /v1/keys/{id} and the operator key route refuse %s',
      async (_label, body, param) => {
        const before = await eventCount();
        const created = await call('POST', '/v1/keys', { key: management, body });
        expect([created.status, created.json.error?.param]).toEqual([400, param]);
        const someKey = (await call('GET', '/v1/keys', { key: management })).json.data[0].id;
        const patched = await call('PATCH', `/v1/keys/${someKey}`, { key: management, body });
        expect([patched.status, patched.json.error?.param]).toEqual([400, param]);
        const byAdmin = await admin('POST', `/admin/accounts/${account}/keys`, body);
        expect([byAdmin.status, byAdmin.json.error?.param]).toEqual([400, param]);
        expect(await eventCount()).toBe(before);
      },
    );

    it('bounds every money field of the operator API, and refuses credits whose sum would overflow', async () => {
      const before = await eventCount();
      for (const [path, body, param] of [
        ['/admin/accounts', { initial_credits_usd: 1e10 }, 'initial_credits_usd'],
        ['/admin/accounts', { initial_credits_usd: null }, 'initial_credits_usd'],
        [`/admin/accounts/${account}/credits`, { amount_usd: 1e10 }, 'amount_usd'],
        ['/admin/orgs', { owner_account_id: account, name: null }, 'name'],
      ] as const) {
        const r = await admin('POST', path, body);
        expect([r.status, r.json.error?.param]).toEqual([400, param]);
      }
      const limit = await admin('PATCH', `/admin/accounts/${account}`, { daily_limit_usd: 1e10 });
      expect([limit.status, limit.json.error?.param]).toEqual([400, 'daily_limit_usd']);
      expect(await eventCount()).toBe(before);

      const rich = (await admin('POST', '/admin/accounts', { initial_credits_usd: 600_000_000 })).json.id;
      const second = await admin('POST', `/admin/accounts/${rich}/credits`, { amount_usd: 600_000_000 });
      expect(second.status).toBe(400);
      expect(second.json.error).toMatchObject({ code: 'credits_limit_exceeded', param: 'amount_usd' });
      expect((await admin('GET', `/admin/accounts/${rich}`)).json.data.total_credits).toBe(600_000_000);
    });

    it('leaves every projection applying: key writes, revocation and new keys still work for everyone', async () => {
      await projectionsHealthy();
      const created = await call('POST', '/v1/keys', { key: management, body: { name: 'after the attack' } });
      expect(created.status).toBe(201);
      expect((await call('GET', '/v1/credits', { key: created.json.key })).status).toBe(200);
      expect((await call('DELETE', `/v1/keys/${created.json.data.id}`, { key: management })).status).toBe(200);
      expect((await call('GET', '/v1/credits', { key: created.json.key })).status).toBe(401);
      await projectionsHealthy();
    });
  });

  describe('what PostgreSQL cannot store, or a walker cannot descend, is refused at the edge (14.5, 14.6, 14.11)', () => {
    it.each([
      ['a NUL in a body field', '/v1/keys', '{"name": "a\\u0000b"}', 'name'],
      ['a lone surrogate in a body field', '/v1/keys', '{"name": "a\\ud800b"}', 'name'],
      [
        'a NUL in a nested field',
        '/v1/chat/completions',
        '{"model": "sim/echo", "messages": [{"role": "user", "content": "hi\\u0000"}]}',
        'messages[0].content',
      ],
      [
        'a NUL in the end user id',
        '/v1/chat/completions',
        '{"model": "sim/echo", "messages": [{"role": "user", "content": "hi"}], "user": "u\\u0000"}',
        'user',
      ],
      ['a lone surrogate in a field name', '/v1/chat/completions', '{"model": "sim/echo", "messages": [], "\\udc00": 1}', null],
      ['3,000 levels of nesting', '/v1/keys', `{"name": ${'['.repeat(3000)}${']'.repeat(3000)}}`, expect.stringMatching(/^name\[0\]/)],
      ['a body of null', '/v1/keys', 'null', null],
      ['a body that is an array', '/v1/chat/completions', '[]', null],
      ['a body that is a number', '/v1/embeddings', '1', null],
    ])('%s: 400 naming the field, nothing written, nothing billed', async (_what, path, body, param) => {
      const [before, money] = [await eventCount(), await balance()];
      const r = await call('POST', path, { key: path === '/v1/keys' ? management : full, body });
      expect(r.status).toBe(400);
      expectErrorObject(r.json);
      expect(r.json.error.param).toEqual(param);
      expect([await eventCount(), await balance()]).toEqual([before, money]);
    });

    it('refuses a NUL in a query or a path parameter, and a URL that is not valid percent-encoding', async () => {
      const query = await call('GET', '/v1/generation?id=gen-%00', { key: full });
      expect([query.status, query.json.error?.param]).toEqual([400, 'id']);
      const path = await call('GET', '/v1/keys/%00', { key: management });
      expect([path.status, path.json.error?.param]).toEqual([400, 'id']);
      const broken = await call('GET', '/v1/keys/%E0%A4%A', { key: management });
      expect(broken.status).toBe(400);
      expectErrorObject(broken.json);
      expect(broken.json.error.code).toBe('invalid_url');
      const messages = await call('GET', '/v1/messages/%E0%A4%A', { key: full });
      expect(messages.json).toEqual({ type: 'error', error: expect.objectContaining({ type: 'invalid_request_error', message: expect.any(String) }) });
    });

    it('answers a request Node cannot parse, and headers over its limit, with the error object', async () => {
      const malformed = await raw(port, 'GET /v1/credits HTTP/1.1\r\nHost: x\r\nBroken Header\r\n\r\n');
      expect(malformed.status).toBe(400);
      expectErrorObject(malformed.body);
      const anthropic = await raw(port, 'POST /v1/messages HTTP/1.1\r\nHost: x\r\nBroken Header\r\n\r\n');
      expect(anthropic.body).toEqual({ type: 'error', error: expect.objectContaining({ type: 'invalid_request_error' }) });
      const huge = await withHeaders(port, '/v1/credits', { authorization: `Bearer ${full}`, 'x-filler': 'a'.repeat(20_000) });
      expect(huge.status).toBe(431);
      expectErrorObject(huge.body);
    });
  });

  describe('a request without a body (15.4)', () => {
    it('revokes with DELETE sent as empty JSON, as some clients send it', async () => {
      const created = await call('POST', '/v1/keys', { key: management, body: { name: 'to revoke' } });
      const r = await call('DELETE', `/v1/keys/${created.json.data.id}`, { key: management, body: '', headers: { 'content-type': 'application/json' } });
      expect([r.status, r.json.data?.revoked]).toEqual([200, true]);
      expect((await call('GET', '/v1/credits', { key: created.json.key })).status).toBe(401);
    });

    it('reads a POST without a body as one with every field left out: what is required is named, never a 500', async () => {
      const [before, money] = [await eventCount(), await balance()];
      const chat = await call('POST', '/v1/chat/completions', { key: full });
      expect([chat.status, chat.json.error?.param]).toEqual([400, 'model']);
      const emptyJson = await call('POST', '/v1/embeddings', { key: full, body: '', headers: { 'content-type': 'application/json' } });
      expect(emptyJson.status).toBe(400);
      expectErrorObject(emptyJson.json);
      expect([await eventCount(), await balance()]).toEqual([before, money]);
      // Every key field may be left out, so an empty POST /v1/keys creates a key with the defaults.
      const key = await call('POST', '/v1/keys', { key: management });
      expect([key.status, key.json.data?.name, key.json.data?.scope]).toEqual([201, 'Unnamed key', 'full']);
    });
  });

  describe('ambiguous input is refused rather than guessed (14.12)', () => {
    it('refuses two different keys, and two Authorization headers', async () => {
      const two = await call('GET', '/v1/credits', { key: full, headers: { 'x-api-key': management } });
      expect([two.status, two.json.error?.code, two.json.error?.param]).toEqual([400, 'ambiguous_api_key', 'x-api-key']);
      const same = await call('GET', '/v1/credits', { key: full, headers: { 'x-api-key': full } });
      expect(same.status).toBe(200);
      const doubled = await withHeaders(port, '/v1/credits', { authorization: [`Bearer ${full}`, `Bearer ${management}`] });
      expect([doubled.status, doubled.body.error?.param]).toEqual([400, 'Authorization']);
    });

    it('refuses a form body on a JSON route (it once created a key) and a compressed body, changing nothing', async () => {
      const before = await eventCount();
      const form = await call('POST', '/v1/keys', { key: management, body: 'name=sneaky', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      expect([form.status, form.json.error?.code]).toEqual([415, 'unsupported_media_type']);
      const gzip = await call('POST', '/v1/keys', { key: management, body: { name: 'x' }, headers: { 'content-encoding': 'gzip' } });
      expect([gzip.status, gzip.json.error?.code, gzip.json.error?.param]).toEqual([415, 'unsupported_content_encoding', 'Content-Encoding']);
      expect(await eventCount()).toBe(before);
    });
  });

  it('lists ignored fields in a bounded, always writable header, and bills what it answered (14.7)', async () => {
    const body: Record<string, unknown> = { model: 'sim/echo', messages: [{ role: 'user', content: 'hello' }], max_tokens: 8 };
    body['bad\u0001name,with comma'] = 1;
    for (let i = 0; i < 1000; i++) body[`unknown_${i}`] = i;
    const before = await balance();
    const r = await call('POST', '/v1/chat/completions', { key: full, body });
    expect(r.status).toBe(200);
    const header = r.headers.get('x-svc-ignored-params')!;
    expect(header.startsWith('bad%01name%2Cwith%20comma,unknown_0,')).toBe(true);
    expect(header.endsWith(',...')).toBe(true);
    expect(header.split(',')).toHaveLength(33);
    const after = await balance();
    expect(Math.round((before - after) * 1e9)).toBe(Math.round(r.json.usage.cost * 1e9));
    expect(r.json.usage.cost).toBeGreaterThan(0);
  });

  describe('errors that say what happened (15.5)', () => {
    it('answers a provider rate limit as the model being unavailable (503, retry-after), not billed', async () => {
      const before = await balance();
      const r = await call('POST', '/v1/chat/completions', {
        key: full,
        body: { model: 'sim/echo', max_tokens: 5, messages: [{ role: 'user', content: 'x\n#sim {"fail": 429}' }] },
      });
      expect([r.status, r.json.error?.type, r.json.error?.code, r.headers.get('retry-after')]).toEqual([503, 'service_unavailable', 'model_rate_limited', '1']);
      expect(await balance()).toBe(before);
    });

    it('tells a read-only key deleting a stored response that it can only read', async () => {
      const readOnly = (await admin('POST', `/admin/accounts/${account}/keys`, { scope: 'read_only' })).json.key;
      const r = await call('DELETE', '/v1/responses/resp_0123456789abcdef01234567', { key: readOnly });
      expect([r.status, r.json.error?.code]).toEqual([403, 'read_only_key']);
      expect(r.json.error.message).toMatch(/can only read/);
      expect(r.json.error.message).toMatch(/delete/);
    });
  });

  describe('rate-limit headers on every authenticated /v1 answer (15.3, spec 8)', () => {
    const windows = (headers: Headers) =>
      ['limit', 'remaining', 'reset'].flatMap((w) => ['requests', 'tokens'].map((k) => headers.get(`x-ratelimit-${w}-${k}`)));

    it('on a 403 (a key outside its scope) and an unknown /v1 route, counting neither', async () => {
      const keyOf = (await admin('POST', `/admin/accounts/${account}/keys`, { name: 'headers' })).json.key;
      const refused = await call('GET', '/v1/keys', { key: keyOf });
      expect(refused.status).toBe(403);
      expect(windows(refused.headers).every((v) => v !== null)).toBe(true);
      const missing = await call('GET', '/v1/no-such-thing', { key: keyOf });
      expect(missing.status).toBe(404);
      expect(windows(missing.headers).every((v) => v !== null)).toBe(true);
      // Neither counted against the key's requests per minute.
      expect(missing.headers.get('x-ratelimit-remaining-requests')).toBe(missing.headers.get('x-ratelimit-limit-requests'));
      // Without a valid key there is no window to report.
      expect(windows((await call('GET', '/v1/no-such-thing')).headers).every((v) => v === null)).toBe(true);
    });

    it('counts the prompt of the request it answers in x-ratelimit-remaining-tokens', async () => {
      const keyOf = (await admin('POST', `/admin/accounts/${account}/keys`, { name: 'tokens' })).json.key;
      const messages = [{ role: 'user', content: 'count me in this window please' }];
      const r = await call('POST', '/v1/chat/completions', { key: keyOf, body: { model: 'sim/echo', max_tokens: 5, messages } });
      expect(r.status).toBe(200);
      const limit = Number(r.headers.get('x-ratelimit-limit-tokens'));
      expect(Number(r.headers.get('x-ratelimit-remaining-tokens'))).toBe(limit - countChatPromptTokens(messages));
    });
  });

  describe('every id handed out can be looked up (15.2)', () => {
    it('a /v1/responses id, in /v1/generation and in the lookup', async () => {
      const created = await call('POST', '/v1/responses', { key: full, body: { model: 'sim/echo', input: 'hi', max_output_tokens: 16, store: false } });
      expect(created.status).toBe(200);
      const id = created.json.id as string;
      expect(id).toMatch(/^resp_/);
      const one = await call('GET', `/v1/generation?id=${id}`, { key: full });
      expect(one.status).toBe(200);
      expect(one.json.data).toMatchObject({ id: created.headers.get('x-svc-generation-id'), status: 'completed' });
      const many = await call('POST', '/v1/generations/lookup', { key: full, body: { ids: [id, 'resp_000000000000000000000000'] } });
      expect(many.json.data.map((g: { found: boolean }) => g.found)).toEqual([true, false]);
    });

    it('a request that failed after its hold answers with the id of its failed record', async () => {
      const r = await call('POST', '/v1/chat/completions', {
        key: full,
        body: { model: 'sim/echo', max_tokens: 5, messages: [{ role: 'user', content: 'x\n#sim {"fail": 503}' }] },
      });
      expect(r.status).toBe(503);
      const id = r.headers.get('x-svc-generation-id');
      expect(id).toMatch(/^gen-/);
      const record = await call('GET', `/v1/generation?id=${id}`, { key: full });
      expect(record.json.data).toMatchObject({ id, status: 'failed', total_cost: 0 });
    });
  });

  describe('the audit log (15.7)', () => {
    it("records credit grants and daily-limit changes, names fields as the API does, and is the account's to read", async () => {
      const created = await call('POST', '/v1/keys', { key: management, body: { name: 'audited', limit: 5 } });
      await call('PATCH', `/v1/keys/${created.json.data.id}`, { key: management, body: { limit: 7, rpm_limit: 10 } });
      await admin('POST', `/admin/accounts/${account}/credits`, { amount_usd: 2.5 });
      await admin('PATCH', `/admin/accounts/${account}`, { daily_limit_usd: 40 });
      await admin('PATCH', `/admin/accounts/${account}`, { daily_limit_usd: null });

      const log = await call('GET', '/v1/audit-log?limit=50', { key: management });
      expect(log.status).toBe(200);
      const entries = log.json.data as { action: string; target_id: string; actor: string; ip: string | null; details: Record<string, unknown> }[];
      expect(entries.find((e) => e.action === 'key.updated' && e.target_id === created.json.data.id)?.details).toEqual({ fields: ['limit', 'rpm_limit'] });
      expect(entries.find((e) => e.action === 'credits.added')).toMatchObject({ actor: 'admin', details: { amount_usd: 2.5, reason: 'admin' } });
      expect(entries.filter((e) => e.action === 'account.daily_limit_set').map((e) => e.details.daily_limit_usd)).toEqual([null, 40]);
      expect(JSON.stringify(entries)).not.toContain('_nano');
      const keysOnly = await call('GET', '/v1/audit-log?action=key.created', { key: management });
      expect(new Set(keysOnly.json.data.map((e: { action: string }) => e.action))).toEqual(new Set(['key.created']));
      expect((await call('GET', '/v1/audit-log', { key: full })).status).toBe(403);
      expect((await call('GET', '/v1/audit-log?limit=0', { key: management })).json.error.param).toBe('limit');
    });
  });

  describe('every typed field of a chat request is checked (15.6)', () => {
    const user = [{ role: 'user', content: 'hi' }];
    it.each([
      ['temperature', { temperature: 'hot' }, 'temperature'],
      ['temperature out of range', { temperature: 3 }, 'temperature'],
      ['top_k', { top_k: 'many' }, 'top_k'],
      ['stop', { stop: 5 }, 'stop'],
      ['too many stops', { stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop'],
      ['seed', { seed: 1.5 }, 'seed'],
      ['tools', { tools: 'all of them' }, 'tools'],
      ['a tool without a name', { tools: [{ type: 'function', function: {} }] }, 'tools'],
      ['tool_choice', { tool_choice: 3 }, 'tool_choice'],
      ['response_format', { response_format: 'json' }, 'response_format'],
      ['reasoning', { reasoning: 1 }, 'reasoning'],
      ['logit_bias', { logit_bias: { a: 500 } }, 'logit_bias'],
      ['an unknown content part', { messages: [{ role: 'user', content: [{ type: 'hologram', data: 'x' }] }] }, 'messages[0].content'],
      ['a tool message without tool_call_id', { messages: [...user, { role: 'tool', content: '42' }] }, 'messages[1].tool_call_id'],
      [
        'a file part pointing at a URL',
        { messages: [{ role: 'user', content: [{ type: 'file', file: { file_data: 'http://127.0.0.1:9/secret' } }] }] },
        'messages[0].content',
      ],
      [
        'a file part naming a path',
        { messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: '../../etc/passwd' } }] }] },
        'messages[0].content',
      ],
    ])('refuses %s with 400 naming the field; nothing reaches the upstream or is billed', async (_what, fields, param) => {
      const [money, calls] = [await balance(), gw.runtime.simulator!.received.length];
      const r = await call('POST', '/v1/chat/completions', { key: full, body: { model: 'sim/echo', max_tokens: 5, messages: user, ...fields } });
      expect([r.status, r.json.error?.type, r.json.error?.param]).toEqual([400, 'invalid_request_error', param]);
      expect([await balance(), gw.runtime.simulator!.received.length]).toEqual([money, calls]);
    });

    it('refuses fields a management body does not have, naming them, and writes nothing', async () => {
      const before = await eventCount();
      const typo = await call('POST', '/v1/keys', { key: management, body: { name: 'x', limitt: 5 } });
      expect([typo.status, typo.json.error?.param]).toEqual([400, 'limitt']);
      const admin1 = await admin('POST', '/admin/accounts', { initial_credit_usd: 5 });
      expect([admin1.status, admin1.json.error?.param]).toEqual([400, 'initial_credit_usd']);
      expect(await eventCount()).toBe(before);
    });

    it('lists the fields /v1/messages and /v1/responses ignore, as chat does', async () => {
      const messages = await call('POST', '/v1/messages', {
        key: full,
        body: { model: 'sim/echo', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }], service_tier: 'auto', frobnicate: 1 },
      });
      expect(messages.status).toBe(200);
      expect(messages.headers.get('x-svc-ignored-params')).toBe('service_tier,frobnicate');
      const responses = await call('POST', '/v1/responses', {
        key: full,
        body: { model: 'sim/echo', input: 'hi', store: false, max_output_tokens: 16, truncation: 'auto' },
      });
      expect(responses.status).toBe(200);
      expect(responses.headers.get('x-svc-ignored-params')).toBe('truncation');
      const clean = await call('POST', '/v1/messages', { key: full, body: { model: 'sim/echo', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] } });
      expect(clean.headers.get('x-svc-ignored-params')).toBeNull();
    });

    it('passes what is well-formed: a data URL file part, a tool round trip', async () => {
      const pdf = `data:application/pdf;base64,${Buffer.from('%PDF-1.4 fake').toString('base64')}`;
      const r = await call('POST', '/v1/chat/completions', {
        key: full,
        body: {
          model: 'sim/echo',
          max_tokens: 5,
          temperature: 0.2,
          stop: ['\n\n'],
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: 'read' },
                { type: 'file', file: { filename: 'a.pdf', file_data: pdf } },
              ],
            },
            { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
            { role: 'tool', tool_call_id: 'call_1', content: '42' },
            { role: 'user', content: 'thanks' },
          ],
        },
      });
      expect(r.status).toBe(200);
    });
  });

  describe('guessing keys is not free (14.13)', () => {
    let guarded: StartedGateway;
    let guardedCall: Call;
    const from = (address: string) => ({ 'x-forwarded-for': address });
    const randomAddress = () => `2001:db8::${randomBytes(2).toString('hex')}:${randomBytes(2).toString('hex')}`;

    beforeAll(async () => {
      // Behind a trusted proxy, so each test is its own client address on a shared Redis.
      guarded = await startGateway({ SVC_ADMIN_TOKEN: ADMIN_TOKEN, SVC_AUTH_FAILURE_LIMIT: '5', SVC_TRUST_PROXY: '127.0.0.1' });
      guardedCall = api(guarded.url.replace(/\/v1$/, ''));
    }, 60_000);
    afterAll(() => stopGateway(guarded));

    it('refuses an address with 429 once it failed to authenticate more often than the limit, whatever key it sends then', async () => {
      const address = randomAddress();
      const good = guarded.keys.api_key;
      for (let i = 0; i < 5; i++) {
        const wrong = await guardedCall('GET', '/v1/credits', { key: `svc_live_${'x'.repeat(39)}${i}`, headers: from(address) });
        expect(wrong.status).toBe(401);
      }
      const over = await guardedCall('GET', '/v1/credits', { key: `svc_live_${'y'.repeat(40)}`, headers: from(address) });
      expect([over.status, over.json.error?.type, over.json.error?.code]).toEqual([429, 'rate_limit_error', 'too_many_failed_authentications']);
      expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
      expect((await guardedCall('GET', '/v1/credits', { key: good, headers: from(address) })).status).toBe(429);
      // Another address, and a request without a key (a mistake, not a guess), are not refused.
      expect((await guardedCall('GET', '/v1/credits', { key: good, headers: from('198.51.100.7') })).status).toBe(200);
      const careless = randomAddress();
      for (let i = 0; i < 8; i++) expect((await guardedCall('GET', '/v1/credits', { headers: from(careless) })).status).toBe(401);
    });
  });
});
