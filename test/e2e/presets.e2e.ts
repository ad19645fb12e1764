import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';

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
    expect(created.json.data.versions).toEqual([{ version: 1, config: config1, rolled_back_to: null, created_at: expect.any(String), created_by: expect.stringMatching(/^key:/) }]);
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
    for (const r of [await call('GET', '/presets/support', { key: management }), await call('DELETE', '/presets/support', { key: management }), await call('GET', '/presets/never', { key: management })]) {
      expect(r.status).toBe(404);
      expect(r.json.error.code).toBe('preset_not_found');
    }
    const again = await call('POST', '/presets', { key: management, body: { slug: 'support', config: config2 } });
    expect(again.json.data).toMatchObject({ version: 1, config: config2 });
    expect(again.json.data.versions).toHaveLength(1);
  });
});
