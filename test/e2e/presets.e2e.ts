import OpenAI from 'openai';
import { countChatPromptTokens } from '@svc/providers';
import { generateEncryptionKey } from '@svc/platform';
import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { twoGateways } from '../support/second-gateway';

const ADMIN_TOKEN = 'admin-token-for-preset-tests';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/** Spec 4.18, 2.5: presets stored with their versions; any key reads them, a management key changes them. */
describe('presets: create, versions, rollback, delete (spec 4.18, 2.5)', () => {
  let gw: StartedGateway;
  let call: Call;
  let management: string;

  beforeAll(async () => {
    gw = await startGateway();
    call = api(gw.url);
    management = gw.keys.management_key;
  }, 60_000);
  afterAll(() => stopGateway(gw));

  const config1 = { model: 'sim/echo', models: ['sim/claude-echo'], system_prompt: 'Be brief.', cache: { enabled: true, ttl_seconds: 60 } };
  const config2 = { ...config1, system_prompt: 'Be kind.' };

  it('creates a preset as version 1; any key of the workspace reads it', async () => {
    const created = await call('POST', '/presets', { key: management, body: { slug: 'support', name: 'Support', config: config1 } });
    expect(created.status).toBe(201);
    expect(created.json.data).toMatchObject({ slug: 'support', name: 'Support', description: null, version: 1, config: config1 });
    expect(created.json.data.versions).toEqual([
      { version: 1, config: config1, rolled_back_to: null, created_at: expect.any(String), created_by: expect.stringMatching(/^key:/) },
    ]);
    const listed = await call('GET', '/presets', { key: gw.keys.api_key });
    expect(listed.status).toBe(200);
    expect(listed.json.data.map((p: { slug: string }) => p.slug)).toEqual(['support']);
    expect((await call('GET', '/presets/support', { key: gw.keys.api_key })).json.data.version).toBe(1);
  });

  it('a config change adds a version; a rollback makes an old one the latest as a new version', async () => {
    const patched = await call('PATCH', '/presets/support', { key: management, body: { slug: 'support', config: config2 } });
    expect(patched.status).toBe(200);
    expect(patched.json.data).toMatchObject({ version: 2, config: config2 });
    const renamed = await call('PATCH', '/presets/support', { key: management, body: { slug: 'support', description: 'Help desk' } });
    expect(renamed.json.data).toMatchObject({ version: 2, description: 'Help desk', name: 'Support' });
    const rolled = await call('POST', '/presets/support/rollback', { key: management, body: { version: 1 } });
    expect(rolled.status).toBe(200);
    expect(rolled.json.data).toMatchObject({ version: 3, config: config1 });
    expect(rolled.json.data.versions.map((v: { version: number; rolled_back_to: number | null }) => [v.version, v.rolled_back_to])).toEqual([
      [1, null],
      [2, null],
      [3, 1],
    ]);
    const actions = (await call('GET', '/audit-log?limit=100', { key: management })).json.data.map((e: { action: string }) => e.action);
    for (const action of ['preset.created', 'preset.version_added', 'preset.updated', 'preset.rolled_back']) expect(actions).toContain(action);
  });

  it('is changed with a management key only (403 management_key_required)', async () => {
    for (const [method, path, body] of [
      ['POST', '/presets', { slug: 'other' }],
      ['PATCH', '/presets/support', { slug: 'support', name: 'x' }],
      ['POST', '/presets/support/rollback', { version: 1 }],
      ['DELETE', '/presets/support', undefined],
    ] as const) {
      const r = await call(method, path, { key: gw.keys.api_key, body });
      expect(r.status).toBe(403);
      expect(r.json.error.code).toBe('management_key_required');
    }
    expect((await call('GET', '/presets/support', { key: management })).json.data.version).toBe(3);
  });

  describe('bad input: a clear error, nothing written', () => {
    it.each([
      ['a slug with spaces', 'POST', '/presets', { slug: 'has spaces' }, 400, 'slug'],
      ['a missing slug', 'POST', '/presets', { name: 'x' }, 400, 'slug'],
      ['an unknown model', 'POST', '/presets', { slug: 'x', config: { model: 'nope/model' } }, 400, 'config.model'],
      ['an unknown fallback', 'POST', '/presets', { slug: 'x', config: { models: ['sim/echo', 'nope/model'] } }, 400, 'config.models[1]'],
      ['a TTL of 0', 'POST', '/presets', { slug: 'x', config: { cache: { ttl_seconds: 0 } } }, 400, 'config.cache.ttl_seconds'],
      ['an unknown config field', 'POST', '/presets', { slug: 'x', config: { temperature: 1 } }, 400, 'config.temperature'],
      ['tools that are not objects', 'POST', '/presets', { slug: 'x', config: { tools: ['search'] } }, 400, 'config.tools[0]'],
      ['an existing slug', 'POST', '/presets', { slug: 'support' }, 409, 'slug'],
      ['a PATCH naming another slug', 'PATCH', '/presets/support', { slug: 'other' }, 400, 'slug'],
      ['a version that does not exist', 'POST', '/presets/support/rollback', { version: 9 }, 400, 'version'],
      ['a version that is not a number', 'POST', '/presets/support/rollback', { version: 'latest' }, 400, 'version'],
    ])('%s', async (_, method, path, body, status, param) => {
      const before = (await call('GET', '/presets/support', { key: management })).json.data;
      const r = await call(method, path, { key: management, body });
      expect(r.status).toBe(status);
      expect(r.json.error.param).toBe(param);
      expect((await call('GET', '/presets/support', { key: management })).json.data).toEqual(before);
      expect((await call('GET', '/presets', { key: management })).json.data).toHaveLength(1);
    });
  });

  it('deletes; an unknown or deleted slug is 404 preset_not_found; made again it starts from version 1', async () => {
    expect((await call('DELETE', '/presets/support', { key: management })).json).toEqual({ slug: 'support', deleted: true });
    for (const r of [
      await call('GET', '/presets/support', { key: management }),
      await call('DELETE', '/presets/support', { key: management }),
      await call('GET', '/presets/never', { key: management }),
    ]) {
      expect(r.status).toBe(404);
      expect(r.json.error.code).toBe('preset_not_found');
    }
    const again = await call('POST', '/presets', { key: management, body: { slug: 'support', config: config2 } });
    expect(again.json.data).toMatchObject({ version: 1, config: config2 });
    expect(again.json.data.versions).toHaveLength(1);
  });
});

/**
 * Spec 1, 2.5, 4.2: presets in requests, on every chat-based interface, with a second gateway
 * process on the same database to show that a PATCH reaches the very next request there too.
 */
describe('presets in requests (spec 2.5, 4.2)', () => {
  // Both processes open the presets' sealed system prompts (issue 41 S4): they share the key, as a deployment must.
  const gateways = twoGateways('presets', ADMIN_TOKEN, { SVC_ENCRYPTION_KEY: generateEncryptionKey() });
  let key: string;
  let management: string;
  let one: OpenAI;
  let two: OpenAI;

  beforeAll(async () => {
    const account = (await gateways.one('POST', '/admin/accounts', { body: { initial_credits_usd: 5 }, headers: admin })).json.id;
    key = (await gateways.one('POST', `/admin/accounts/${account}/keys`, { body: {}, headers: admin })).json.key;
    management = (await gateways.one('POST', `/admin/accounts/${account}/keys`, { body: { scope: 'management' }, headers: admin })).json.key;
    one = new OpenAI({ baseURL: gateways.first.url, apiKey: key, maxRetries: 0 });
    two = new OpenAI({ baseURL: `${gateways.second.url}/v1`, apiKey: key, maxRetries: 0 });
    const created = await gateways.one('POST', '/v1/presets', {
      key: management,
      body: { slug: 'brief', config: { model: 'sim/echo', models: ['sim/claude-echo'], system_prompt: 'Be brief.', params: { max_tokens: 40 } } },
    });
    expect(created.status).toBe(201);
  });

  const user = (content: string) => [{ role: 'user' as const, content }];
  const withSystem = (system: string, content: string) => countChatPromptTokens([{ role: 'system', content: system }, ...user(content)]);

  it('applies by all three forms: @preset/<slug>, <model>@preset/<slug>, and the preset field', async () => {
    const a = await one.chat.completions.create({ model: '@preset/brief', messages: user('hello') });
    expect(a.model).toBe('sim/echo');
    expect(a.usage!.prompt_tokens).toBe(withSystem('Be brief.', 'hello'));
    const b = await one.chat.completions.create({ model: 'sim/claude-echo@preset/brief', messages: user('hello') });
    expect(b.model).toBe('sim/claude-echo');
    expect(b.usage!.prompt_tokens).toBe(a.usage!.prompt_tokens);
    const c = await one.chat.completions.create({ model: 'sim/echo', messages: user('hello'), preset: 'brief' } as never);
    expect(c.usage!.prompt_tokens).toBe(a.usage!.prompt_tokens);

    // The generation record names the preset and its version; one without a preset names none.
    const generation = async (id: string) => (await gateways.one('GET', `/v1/generation?id=${id}`, { key })).json.data;
    expect((await generation(a.id)).preset).toEqual({ slug: 'brief', version: 1 });
    const plain = await one.chat.completions.create({ model: 'sim/echo', messages: user('hello') });
    expect((await generation(plain.id)).preset).toBeNull();
  });

  it("request fields beat the preset's; its fallbacks answer when the primary fails", async () => {
    const capped = await one.chat.completions.create({ model: '@preset/brief', messages: user('one two three four five six'), max_tokens: 2 });
    expect(capped.usage!.completion_tokens).toBeLessThanOrEqual(2);
    const fallback = await one.chat.completions.create({ model: '@preset/brief', messages: user('hi\n#sim {"fail_models": {"sim/echo": 503}}') });
    expect(fallback.model).toBe('sim/claude-echo');
  });

  it('works on messages, responses and completions too', async () => {
    const messages = await gateways.one('POST', '/v1/messages', { key, body: { model: '@preset/brief', max_tokens: 20, messages: user('hello') } });
    expect(messages.status).toBe(200);
    expect(messages.json.usage.input_tokens).toBe(withSystem('Be brief.', 'hello'));
    const response = await one.responses.create({ model: '@preset/brief', input: 'hello', store: false });
    expect(response.model).toBe('sim/echo');
    const recorded = (await gateways.one('GET', `/v1/generation?id=${response.id}`, { key })).json.data;
    expect(recorded).toMatchObject({ endpoint: '/v1/responses', preset: { slug: 'brief', version: 1 } });
    const completion = await one.completions.create({ model: '@preset/brief', prompt: 'hello' });
    expect(completion.model).toBe('sim/echo');
    // The preset field on the other interfaces' bodies too.
    const byField = await gateways.one('POST', '/v1/messages', {
      key,
      body: { model: 'sim/claude-echo', preset: 'brief', max_tokens: 20, messages: user('hello') },
    });
    expect(byField.json).toMatchObject({ model: 'sim/claude-echo', usage: { input_tokens: withSystem('Be brief.', 'hello') } });
    const responseByField = await gateways.one('POST', '/v1/responses', { key, body: { model: 'sim/echo', preset: 'brief', input: 'hello', store: false } });
    expect(responseByField.json.usage.input_tokens).toBe(withSystem('Be brief.', 'hello'));
  });

  it('a PATCH is used by the very next request, in this process and in the other one', async () => {
    const patched = await gateways.one('PATCH', '/v1/presets/brief', {
      key: management,
      body: { slug: 'brief', config: { model: 'sim/echo', system_prompt: 'Be very kind and thorough.' } },
    });
    expect(patched.json.data.version).toBe(2);
    const expected = withSystem('Be very kind and thorough.', 'hello');
    expect((await one.chat.completions.create({ model: '@preset/brief', messages: user('hello') })).usage!.prompt_tokens).toBe(expected);
    expect((await two.chat.completions.create({ model: '@preset/brief', messages: user('hello') })).usage!.prompt_tokens).toBe(expected);
    // And a rollback, the same way.
    await gateways.one('POST', '/v1/presets/brief/rollback', { key: management, body: { version: 1 } });
    expect((await two.chat.completions.create({ model: '@preset/brief', messages: user('hello') })).usage!.prompt_tokens).toBe(
      withSystem('Be brief.', 'hello'),
    );
  });

  it('a preset with the cache on answers MISS, then HIT', async () => {
    await gateways.one('POST', '/v1/presets', {
      key: management,
      body: { slug: 'cached', config: { model: 'sim/echo', cache: { enabled: true, ttl_seconds: 60 } } },
    });
    const ask = () => gateways.one('POST', '/v1/chat/completions', { key, body: { model: '@preset/cached', messages: user('cache me') } });
    const miss = await ask();
    expect(miss.headers.get('x-svc-cache-status')).toBe('MISS');
    const hit = await ask();
    expect(hit.headers.get('x-svc-cache-status')).toBe('HIT');
    expect(hit.json.choices).toEqual(miss.json.choices);
    // The request beats the preset: X-Svc-Cache: false asks afresh and keeps nothing.
    const refused = await gateways.one('POST', '/v1/chat/completions', {
      key,
      body: { model: '@preset/cached', messages: user('cache me') },
      headers: { 'x-svc-cache': 'false' },
    });
    expect(refused.status).toBe(200);
    expect(refused.headers.get('x-svc-cache-status')).toBeNull();
    expect(refused.json.id).not.toBe(hit.json.id);
  });

  it('a preset field that is not a slug is a 400 naming it', async () => {
    const r = await gateways.one('POST', '/v1/chat/completions', { key, body: { model: 'sim/echo', preset: 42, messages: user('x') } });
    expect(r.status).toBe(400);
    expect(r.json.error.param).toBe('preset');
  });

  it('an unknown preset is 404 preset_not_found, and nothing is billed', async () => {
    const before = (await gateways.one('GET', '/v1/credits', { key })).json.data.balance;
    for (const body of [
      { model: '@preset/nope', messages: user('x') },
      { model: 'sim/echo', preset: 'nope', messages: user('x') },
    ]) {
      const r = await gateways.one('POST', '/v1/chat/completions', { key, body });
      expect(r.status).toBe(404);
      expect(r.json.error.code).toBe('preset_not_found');
    }
    expect((await gateways.one('GET', '/v1/credits', { key })).json.data.balance).toBe(before);
  });
});
