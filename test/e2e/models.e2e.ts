import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { ManualClock } from '@svc/platform';
import { api, startGateway, type Call } from '../support/gateway';

const ADMIN_TOKEN = 'admin-token-for-models-tests';

/** A catalog built for these tests: one model per filter dimension, and deprecations at known dates. */
const CATALOG = `
providers:
  sim: { adapter: openai, base_url: simulator, api_key: k }
  sim-search: { adapter: searxng, base_url: simulator }
models:
  - id: t/vision
    name: Vision
    type: chat
    created: 2026-01-01T00:00:00Z
    owned_by: acme
    context_length: 128000
    input_modalities: [text, image]
    output_modalities: [text]
    supported_parameters: [max_tokens, temperature, tools, tool_choice]
    pricing: { input: "0.15", output: "0.60", cached_input: "0.075" }
    uptime: 0.998
    providers: [{ provider: sim, upstream_model: sim/echo }]
  - id: t/text
    type: chat
    context_length: 8192
    supported_parameters: [max_tokens, temperature]
    pricing: { input: 1, output: 2 }
    providers: [{ provider: sim, upstream_model: sim/small-8k }]
  - id: t/embed
    type: embedding
    context_length: 8192
    output_modalities: [embeddings]
    supported_parameters: [dimensions]
    pricing: { input: "0.02", output: 0 }
    providers: [{ provider: sim, upstream_model: sim/embed }]
  - id: t/search
    type: search
    context_length: 1000
    pricing: { per_query: "0.005" }
    providers: [{ provider: sim-search, upstream_model: searxng }]
  - id: t/video
    type: video
    context_length: 1000
    input_modalities: [text, image]
    output_modalities: [video]
    video: { durations: [12, 4, 8], aspect_ratios: ["16:9", "9:16"], resolutions: [720p, 1080p], sizes: ["1280x720", "720x1280"] }
    pricing: { per_second: "0.10" }
    providers: [{ provider: sim, upstream_model: sim/echo }]
  - id: t/old
    type: chat
    context_length: 8192
    supported_parameters: [max_tokens]
    pricing: { input: 1, output: 2 }
    deprecation: { sunset: 2026-12-01T00:00:00Z, replacement: t/text, announced: 2026-11-01T00:00:00Z }
    providers: [{ provider: sim, upstream_model: sim/small-8k }]
  - id: t/gone
    type: chat
    context_length: 8192
    pricing: { input: 1, output: 2 }
    deprecation: { sunset: 2026-10-01T00:00:00Z, replacement: null }
    providers: [{ provider: sim, upstream_model: sim/small-8k }]
  - id: t/soon
    type: chat
    context_length: 8192
    supported_parameters: [max_tokens]
    pricing: { input: 1, output: 2 }
    deprecation: { sunset: 2026-12-20T00:00:00Z, replacement: t/vision, announced: 2026-11-20T00:00:00Z }
    providers: [{ provider: sim, upstream_model: sim/small-8k }]
`;
/** Every model above but t/gone, past its sunset at the start. */
const LISTED = ['t/vision', 't/text', 't/embed', 't/search', 't/video', 't/old', 't/soon'];

/** GET /v1/models, /count and /{id} (spec 2.8, 4.17, 9) with the catalog above. */
describe('models', () => {
  const clock = new ManualClock(new Date('2026-11-02T10:00:00Z'));
  const catalogDir = mkdtempSync(join(tmpdir(), 'svc-models-catalog-'));
  let gw: Awaited<ReturnType<typeof startGateway>>;
  let call: Call;
  const keys: Record<string, string> = {};
  const get = (path: string, key = keys.full) => call('GET', path, { key });
  const ids = async (query = '', key = keys.full) => {
    const r = await get(`/v1/models${query}`, key);
    expect(r.status).toBe(200);
    return r.json.data.map((m: { id: string }) => m.id);
  };

  beforeAll(async () => {
    const catalogPath = join(catalogDir, 'catalog.yaml');
    writeFileSync(catalogPath, CATALOG);
    gw = await startGateway({ SVC_ADMIN_TOKEN: ADMIN_TOKEN, SVC_CATALOG: catalogPath }, undefined, { clock });
    call = api(gw.url.replace(/\/v1$/, ''));
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const account = (await call('POST', '/admin/accounts', { headers: admin, body: { initial_credits_usd: 1 } })).json.id;
    for (const [name, body] of Object.entries({
      full: {},
      read_only: { scope: 'read_only' },
      management: { scope: 'management' },
      restricted: { allowed_models: ['t/text', 't/embed', 't/gone'] },
    })) {
      const r = await call('POST', `/admin/accounts/${account}/keys`, { headers: admin, body: { name, ...body } });
      expect(r.status).toBe(201);
      keys[name] = r.json.key;
    }
  }, 60_000);

  afterAll(async () => {
    await gw?.close();
    gw?.removeDataDir();
    rmSync(catalogDir, { recursive: true, force: true });
  });

  it('lists the usable models through the openai SDK, and retrieves one whose id has a slash', async () => {
    const client = new OpenAI({ baseURL: gw.url, apiKey: keys.full, maxRetries: 0 });
    const listed = [];
    for await (const m of client.models.list()) listed.push(m.id);
    expect(listed).toEqual(LISTED);
    // The SDK sends the id percent-encoded (t%2Fvision).
    const vision = await client.models.retrieve('t/vision');
    expect(vision).toMatchObject({ id: 't/vision', object: 'model', owned_by: 'acme' });
  });

  it('shows every catalog fact of a model, prices in USD per token as exact strings', async () => {
    const r = await get('/v1/models/t/vision');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      id: 't/vision',
      object: 'model',
      created: 1767225600,
      owned_by: 'acme',
      name: 'Vision',
      type: 'chat',
      context_length: 128000,
      architecture: { input_modalities: ['text', 'image'], output_modalities: ['text'] },
      supported_parameters: ['max_tokens', 'temperature', 'tools', 'tool_choice'],
      pricing: { prompt: '0.00000015', completion: '0.0000006', input_cache_read: '0.000000075' },
      deprecated: false,
      sunset: null,
      replacement: null,
      uptime: 0.998,
      // Issue 15.5: the one model's providers, what `no_provider_available` points to.
      providers: [
        {
          name: 'sim',
          context_length: 128000,
          pricing: { prompt: '0.00000015', completion: '0.0000006', input_cache_read: '0.000000075' },
          quantization: expect.any(String),
          supports_tools: expect.any(Boolean),
          data_collection: expect.stringMatching(/^(allow|deny)$/),
          zdr: expect.any(Boolean),
          uptime: null,
        },
      ],
    });
    const list = await get('/v1/models');
    expect(list.json.object).toBe('list');
    const { providers: _providers, ...listed } = r.json;
    expect(list.json.data[0]).toEqual(listed);
  });

  it('shows per-unit prices only where the model has them, and defaults', async () => {
    expect((await get('/v1/models/t/search')).json.pricing).toEqual({ prompt: '0', completion: '0', input_cache_read: '0', request: '0.005' });
    expect((await get('/v1/models/t/video')).json.pricing).toEqual({ prompt: '0', completion: '0', input_cache_read: '0', second: '0.1' });
    expect((await get('/v1/models/t/text')).json).toMatchObject({
      name: 't/text',
      created: 0,
      owned_by: 't',
      pricing: { prompt: '0.000001', completion: '0.000002', input_cache_read: '0.000001' },
      uptime: null,
    });
  });

  it('lists what a video model makes beside its price per second (spec 4.15)', async () => {
    const r = await get('/v1/models?type=video');
    expect(r.status).toBe(200);
    expect(r.json.data).toHaveLength(1);
    expect(r.json.data[0]).toMatchObject({
      id: 't/video',
      type: 'video',
      pricing: { second: '0.1' },
      // Durations ascending whatever the file's order: the first is the default.
      video: { durations: [4, 8, 12], aspect_ratios: ['16:9', '9:16'], resolutions: ['720p', '1080p'], sizes: ['1280x720', '720x1280'], image_to_video: true },
    });
    expect((await get('/v1/models/t/video')).json.video).toEqual(r.json.data[0].video);
    // Only video models carry the member.
    expect((await get('/v1/models/t/vision')).json).not.toHaveProperty('video');
  });

  it('marks an announced deprecation, hides one not yet announced, and still shows a retired model by id', async () => {
    expect((await get('/v1/models/t/old')).json).toMatchObject({ deprecated: true, sunset: '2026-12-01T00:00:00.000Z', replacement: 't/text' });
    expect((await get('/v1/models/t/soon')).json).toMatchObject({ deprecated: false, sunset: null, replacement: null });
    expect((await get('/v1/models/t/gone')).json).toMatchObject({ deprecated: true, sunset: '2026-10-01T00:00:00.000Z', replacement: null });
  });

  const filters: [string, string[]][] = [
    ['', LISTED],
    ['?type=', LISTED],
    ['?type=chat', ['t/vision', 't/text', 't/old', 't/soon']],
    ['?type=embedding', ['t/embed']],
    ['?type=rerank', []],
    ['?type=video', ['t/video']],
    ['?supported_parameters=tools', ['t/vision']],
    ['?supported_parameters=max_tokens,temperature', ['t/vision', 't/text']],
    ['?supported_parameters=logprobs', []],
    ['?input_modalities=image', ['t/vision', 't/video']],
    ['?input_modalities=text,%20image&output_modalities=text', ['t/vision']],
    ['?output_modalities=embeddings', ['t/embed']],
    ['?output_modalities=video,text', []],
    ['?type=chat&supported_parameters=max_tokens&input_modalities=text', ['t/vision', 't/text', 't/old', 't/soon']],
    ['?unrelated=1', LISTED],
  ];
  it.each(filters)('filters %p: list and count agree', async (query, expected) => {
    expect(await ids(query)).toEqual(expected);
    const count = await get(`/v1/models/count${query}`);
    expect(count.status).toBe(200);
    expect(count.json).toEqual({ data: { count: expected.length } });
  });

  const badFilters: [string, string][] = [
    ['?type=chatbot', 'type'],
    ['?type=chat,embedding', 'type'],
    ['?type=chat&type=embedding', 'type'],
    ['?supported_parameters=tools,,max_tokens', 'supported_parameters'],
    ['?supported_parameters=Tools', 'supported_parameters'],
    ['?input_modalities=smell', 'input_modalities'],
    ['?output_modalities=text,vide', 'output_modalities'],
  ];
  it.each(badFilters)('refuses %p with 400 naming the parameter', async (query, param) => {
    for (const path of ['/v1/models', '/v1/models/count']) {
      const r = await get(`${path}${query}`);
      expect(r.status).toBe(400);
      expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param });
    }
  });

  it('a key with allowed_models lists, counts and reads only those (and never a retired one in the list)', async () => {
    const key = keys.restricted;
    expect(await ids('', key)).toEqual(['t/text', 't/embed']);
    expect((await get('/v1/models/count?type=chat', key)).json).toEqual({ data: { count: 1 } });
    expect((await get('/v1/models/t/text', key)).status).toBe(200);
    expect((await get('/v1/models/t/gone', key)).status).toBe(200);
    expect((await get('/v1/models/t/vision', key)).status).toBe(404);
  });

  it('an unknown model and one the key may not use get the same 404', async () => {
    const unknown = await get('/v1/models/t/nope', keys.restricted);
    const forbidden = await get('/v1/models/t/vision', keys.restricted);
    for (const [r, id] of [
      [unknown, 't/nope'],
      [forbidden, 't/vision'],
    ] as const) {
      expect(r.status).toBe(404);
      expect(r.json).toEqual({
        error: {
          message: `The model '${id}' does not exist or this key may not use it. GET /v1/models lists the models you can use.`,
          type: 'not_found_error',
          code: 'model_not_found',
          param: 'model',
        },
      });
    }
    // Not in the catalog (a key's list cannot name it: issue 41 item 11): unknown all the same.
    expect((await get('/v1/models/not/in-catalog', keys.restricted)).status).toBe(404);
    // A suffix is not part of an id.
    expect((await get('/v1/models/t/vision:nitro')).status).toBe(404);
  });

  it('takes the id encoded or not, and keeps /count for the count', async () => {
    expect((await get('/v1/models/t%2Fvision')).json.id).toBe('t/vision');
    expect((await get('/v1/models/count')).json).toEqual({ data: { count: LISTED.length } });
    const empty = await get('/v1/models/');
    expect([empty.status, empty.json.error?.code]).toEqual([404, 'model_not_found']);
  });

  it('any key scope may read the models; no key may not', async () => {
    for (const key of [keys.read_only, keys.management]) {
      expect(await ids('', key)).toEqual(LISTED);
      expect((await get('/v1/models/count', key)).status).toBe(200);
      expect((await get('/v1/models/t/text', key)).status).toBe(200);
    }
    const anonymous = await call('GET', '/v1/models');
    expect(anonymous.status).toBe(401);
    expect(anonymous.json.error.type).toBe('authentication_error');
  });

  // Last: moves the shared clock.
  it('follows the clock: an announcement shows up, a sunset takes the model off the list', async () => {
    clock.set('2026-11-20T00:00:00Z');
    expect((await get('/v1/models/t/soon')).json).toMatchObject({ deprecated: true, sunset: '2026-12-20T00:00:00.000Z', replacement: 't/vision' });
    expect(await ids()).toEqual(LISTED);
    clock.set('2026-12-01T00:00:00Z');
    expect(await ids()).toEqual(LISTED.filter((id) => id !== 't/old'));
    expect((await get('/v1/models/count?type=chat')).json).toEqual({ data: { count: 3 } });
    expect((await get('/v1/models/t/old')).json).toMatchObject({ deprecated: true, replacement: 't/text' });
  });
});
