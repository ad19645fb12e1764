import { aspectRatioOfSize, CatalogError, loadCatalog, parseCatalog } from './catalog';

const usd = (n: number) => BigInt(Math.round(n * 1e9));

describe('catalog', () => {
  it('the built-in catalog has the simulated models with non-zero prices, cached input included', () => {
    const catalog = loadCatalog();
    for (const id of ['sim/echo', 'sim/small-8k', 'sim/embed']) {
      const m = catalog.get(id);
      expect(m).toBeDefined();
      expect(m!.prices.inputPerM).toBeGreaterThan(0n);
      expect(m!.prices.cachedInputPerM).toBeGreaterThan(0n);
      expect(m!.prices.cachedInputPerM).toBeLessThan(m!.prices.inputPerM);
      expect(m!.deprecation).toBeNull();
    }
    expect(catalog.get('sim/echo')!.prices.outputPerM).toBe(8_000_000_000n);
    expect(catalog.usesSimulator()).toBe(true);
  });

  it('the built-in sim/echo has tools, vision and 128K, sim/small-8k 8K without them, sim/embed embeds', () => {
    const catalog = loadCatalog();
    const echo = catalog.get('sim/echo')!;
    expect(echo).toMatchObject({ type: 'chat', contextLength: 128000, inputModalities: ['text', 'image'] });
    expect(echo.supportedParameters).toEqual(expect.arrayContaining(['tools', 'response_format', 'reasoning']));
    const small = catalog.get('sim/small-8k')!;
    expect(small).toMatchObject({ type: 'chat', contextLength: 8192, inputModalities: ['text'] });
    expect(small.supportedParameters).not.toContain('tools');
    expect(small.providers.every((r) => !r.tools)).toBe(true);
    expect(catalog.get('sim/embed')).toMatchObject({ type: 'embedding', outputModalities: ['embeddings'] });
  });

  it('the built-in sim/echo has two simulator providers in order, the second dearer', () => {
    const echo = loadCatalog().get('sim/echo')!;
    expect(echo.providers.map((r) => [r.provider.name, r.provider.baseUrl, r.upstreamModel])).toEqual([
      ['sim', 'simulator', 'sim/echo'],
      ['sim-backup', 'simulator', 'sim/echo'],
    ]);
    // The first provider bills the model's prices, which the chat billing tests rely on.
    expect(echo.providers[0].prices).toEqual(echo.prices);
    expect(echo.providers[1].prices).toMatchObject({ inputPerM: usd(2.5), outputPerM: usd(10), cachedInputPerM: usd(0.625) });
    expect(echo.providers.map((r) => [r.quantization, r.tools, r.dataCollection, r.zdr])).toEqual([
      ['bf16', true, 'deny', true],
      ['fp8', true, 'allow', false],
    ]);
  });

  it('issue 23: the built-in sim/echo routes record their provider cost (70% of their prices); other models, such as sim/claude-echo and sim/tavily, leave it unknown', () => {
    const catalog = loadCatalog();
    const echo = catalog.get('sim/echo')!;
    expect(echo.providers.map((r) => r.cost && [r.cost.inputPerM, r.cost.outputPerM, r.cost.cachedInputPerM])).toEqual([
      [usd(1.4), usd(5.6), usd(0.35)],
      [usd(1.75), usd(7), usd(0.4375)],
    ]);
    expect(catalog.get('sim/searxng')!.providers[0].cost?.perQuery).toBe(usd(0.0014));
    expect(catalog.get('sim/claude-echo')!.providers[0].cost).toBeNull();
    expect(catalog.get('sim/tavily')!.providers[0].cost).toBeNull();
  });

  it("issue 23: a route's cost reads like its pricing, and stays apart from what it bills", () => {
    const doc = withModels(
      model({
        providers: [
          {
            provider: 'up',
            upstream_model: 'm',
            pricing: { input: '2', output: '8' },
            cost: { input: '1.4', output: '5.6', cached_input: '0.35', per_query: '0.001' },
          },
        ],
      }),
    );
    const route = parse(doc).get('x/m')!.providers[0];
    expect(route.prices).toMatchObject({ inputPerM: usd(2), outputPerM: usd(8), cachedInputPerM: usd(2) });
    expect(route.cost).toEqual({
      inputPerM: usd(1.4),
      outputPerM: usd(5.6),
      cachedInputPerM: usd(0.35),
      perQuery: usd(0.001),
      perSecond: null,
      perImage: null,
      perMillionCharacters: null,
      perSearchUnit: null,
      audioInputPerM: null,
      cachedAudioInputPerM: null,
      audioOutputPerM: null,
    });
    // A per-unit cost needs no token prices, as pricing does not.
    const image = parse(
      withModels(
        model({
          type: 'image',
          output_modalities: ['image'],
          pricing: { per_image: '0.04' },
          providers: [{ provider: 'up', upstream_model: 'i', cost: { per_image: '0.03' } }],
        }),
      ),
    );
    expect(image.get('x/m')!.providers[0].cost).toMatchObject({ perImage: usd(0.03), inputPerM: 0n, outputPerM: 0n });
  });

  it('the built-in sim/claude-echo is served through the anthropic adapter of the simulator', () => {
    const claude = loadCatalog().get('sim/claude-echo')!;
    expect(claude).toMatchObject({ type: 'chat', inputModalities: ['text', 'image'] });
    expect(claude.supportedParameters).toEqual(expect.arrayContaining(['tools', 'tool_choice', 'reasoning']));
    expect(claude.prices.cachedInputPerM).toBeGreaterThan(0n);
    expect(claude.providers.map((r) => [r.provider.name, r.provider.adapter, r.provider.baseUrl, r.tools])).toEqual([
      ['sim-anthropic', 'anthropic', 'simulator', true],
    ]);
  });

  const base = {
    providers: { up: { adapter: 'openai', base_url: 'https://api.example.com/v1', api_key_env: 'UP_KEY' } },
    models: [{ id: 'x/m', type: 'chat', context_length: 1000, pricing: { input: 1, output: '2.5' }, providers: [{ provider: 'up', upstream_model: 'm' }] }],
  };
  const model = (fields: Record<string, unknown>) => ({ ...base.models[0], ...fields });
  const withModels = (...models: Record<string, unknown>[]) => ({ ...base, models });
  const parse = (doc: unknown) => parseCatalog(doc, 'test', { UP_KEY: 'k' });

  it('reads keys from the environment and fills in the defaults', () => {
    const m = parseCatalog(base, 'test', { UP_KEY: 'sk-1' }).get('x/m')!;
    expect(m.providers[0].provider.apiKey).toBe('sk-1');
    expect(m.providers[0].provider.dialect).toBe('openai');
    expect(
      parseCatalog({ ...base, providers: { up: { ...base.providers.up, dialect: 'router' } } }, 'test', { UP_KEY: 'k' }).get('x/m')!.providers[0].provider
        .dialect,
    ).toBe('router');
    expect(m).toEqual({
      id: 'x/m',
      name: 'x/m',
      type: 'chat',
      created: 0,
      ownedBy: 'x',
      contextLength: 1000,
      inputModalities: ['text'],
      outputModalities: ['text'],
      supportedParameters: [],
      prices: {
        inputPerM: usd(1),
        outputPerM: usd(2.5),
        cachedInputPerM: usd(1),
        perQuery: null,
        perSecond: null,
        perImage: null,
        perMillionCharacters: null,
        perSearchUnit: null,
        audioInputPerM: null,
        cachedAudioInputPerM: null,
        audioOutputPerM: null,
      },
      deprecation: null,
      uptime: null,
      voices: [],
      batchDiscountPercent: 50,
      video: null,
      providers: [
        {
          provider: m.providers[0].provider,
          upstreamModel: 'm',
          prices: m.prices,
          cost: null,
          quantization: 'unknown',
          tools: false,
          dataCollection: 'allow',
          zdr: false,
        },
      ],
    });
  });

  it("gives batch lines the catalog's discount (spec 1 rule 6), 50% unless it says otherwise, and a model's own where it has one", () => {
    const two = { ...withModels(model({}), model({ id: 'x/own', batch_discount_percent: 0 })) };
    expect(parse(two).models.map((m) => m.batchDiscountPercent)).toEqual([50, 0]);
    expect(parse({ ...two, batch_discount_percent: 25 }).models.map((m) => m.batchDiscountPercent)).toEqual([25, 0]);
  });

  it('reads every field of a model and of its providers', () => {
    const doc = {
      providers: { ...base.providers, other: { adapter: 'openai', base_url: 'simulator', api_key: 'sk-2' } },
      models: [
        {
          id: 'acme/vision-1',
          name: 'Acme Vision',
          type: 'chat',
          created: '2026-03-01T12:00:00+02:00',
          owned_by: 'acme-labs',
          context_length: 32768,
          input_modalities: ['text', 'image', 'file'],
          output_modalities: ['text'],
          supported_parameters: ['tools', 'max_tokens'],
          pricing: { input: '0.15', output: '0.6', cached_input: '0.075', per_image: '0.001' },
          uptime: 0.997,
          deprecation: { sunset: '2027-01-01T00:00:00Z', replacement: 'acme/vision-2', announced: '2026-12-01' },
          providers: [
            { provider: 'up', upstream_model: 'vision-1', quantization: 'fp8', tools: false, data_collection: 'deny', zdr: true },
            { provider: 'other', upstream_model: 'v1', pricing: { input: '0.2', output: '0.8' } },
          ],
        },
        { ...base.models[0], id: 'acme/vision-2', supported_parameters: ['tools'] },
      ],
    };
    const m = parse(doc).get('acme/vision-1')!;
    expect(m).toMatchObject({
      name: 'Acme Vision',
      created: Date.parse('2026-03-01T10:00:00Z') / 1000,
      ownedBy: 'acme-labs',
      contextLength: 32768,
      inputModalities: ['text', 'image', 'file'],
      supportedParameters: ['tools', 'max_tokens'],
      prices: {
        inputPerM: usd(0.15),
        outputPerM: usd(0.6),
        cachedInputPerM: usd(0.075),
        perQuery: null,
        perSecond: null,
        perImage: usd(0.001),
        perMillionCharacters: null,
        perSearchUnit: null,
        audioInputPerM: null,
        cachedAudioInputPerM: null,
        audioOutputPerM: null,
      },
      uptime: 0.997,
      deprecation: { sunset: new Date('2027-01-01T00:00:00Z'), replacement: 'acme/vision-2', announced: new Date('2026-12-01T00:00:00Z') },
    });
    expect(m.providers[0]).toMatchObject({ upstreamModel: 'vision-1', prices: m.prices, quantization: 'fp8', tools: false, dataCollection: 'deny', zdr: true });
    // A provider's own prices are complete: cached input defaults to its own input price.
    expect(m.providers[1]).toMatchObject({ upstreamModel: 'v1', tools: true, quantization: 'unknown', dataCollection: 'allow', zdr: false });
    expect(m.providers[1].prices).toEqual({
      inputPerM: usd(0.2),
      outputPerM: usd(0.8),
      cachedInputPerM: usd(0.2),
      perQuery: null,
      perSecond: null,
      perImage: null,
      perMillionCharacters: null,
      perSearchUnit: null,
      audioInputPerM: null,
      cachedAudioInputPerM: null,
      audioOutputPerM: null,
    });
    expect(m.providers[1].provider).toMatchObject({ name: 'other', baseUrl: 'simulator', apiKey: 'sk-2' });
  });

  it('lets a model priced per query, second or image leave out its token prices', () => {
    const catalog = parse({
      providers: {
        ...base.providers,
        co: { adapter: 'cohere', base_url: 'https://api.cohere.com', api_key_env: 'UP_KEY' },
        tv: { adapter: 'tavily', base_url: 'https://api.tavily.com', api_key_env: 'UP_KEY' },
      },
      models: [
        model({ id: 'web/search', type: 'search', pricing: { per_query: '0.005' }, providers: [{ provider: 'tv', upstream_model: 'tavily' }] }),
        model({ id: 'vid/clip', type: 'video', output_modalities: ['video'], pricing: { per_second: '0.1' }, video: { durations: [4] } }),
        model({ id: 'tts/voice', type: 'audio', output_modalities: ['audio'], pricing: { per_million_characters: '15.00' } }),
        model({ id: 'rr/rank', type: 'rerank', pricing: { per_search_unit: '0.002' }, providers: [{ provider: 'co', upstream_model: 'rerank-v3.5' }] }),
      ],
    });
    expect(catalog.get('web/search')!.prices).toEqual({
      inputPerM: 0n,
      outputPerM: 0n,
      cachedInputPerM: 0n,
      perQuery: usd(0.005),
      perSecond: null,
      perImage: null,
      perMillionCharacters: null,
      perSearchUnit: null,
      audioInputPerM: null,
      cachedAudioInputPerM: null,
      audioOutputPerM: null,
    });
    expect(catalog.get('vid/clip')!.prices.perSecond).toBe(usd(0.1));
    expect(catalog.get('tts/voice')!.prices).toMatchObject({ inputPerM: 0n, perMillionCharacters: usd(15) });
    expect(catalog.get('rr/rank')!.prices).toMatchObject({ outputPerM: 0n, perSearchUnit: usd(0.002) });
  });

  it('spec 4.16: audio token prices per million, cached audio defaulting to the audio input price and never above it', () => {
    const audio = (pricing: Record<string, unknown>) => parse(withModels(model({ pricing: { input: '4', output: '16', ...pricing } })));
    expect(audio({ audio_input: '32', audio_output: '64' }).models[0].prices).toMatchObject({
      inputPerM: usd(4),
      audioInputPerM: usd(32),
      cachedAudioInputPerM: usd(32),
      audioOutputPerM: usd(64),
    });
    expect(audio({ audio_input: '32', cached_audio_input: '0.40' }).models[0].prices).toMatchObject({ cachedAudioInputPerM: usd(0.4), audioOutputPerM: null });
    expect(() => audio({ audio_input: '32', cached_audio_input: '40' })).toThrow('models[0].pricing.cached_audio_input: must not exceed the audio_input price');
    expect(() => audio({ cached_audio_input: '0.40' })).toThrow('models[0].pricing.cached_audio_input: needs audio_input');
    expect(() => audio({ audio_output: 'lots' })).toThrow('models[0].pricing.audio_output: expected a USD price per million audio tokens');
    const realtime = (pricing: Record<string, unknown>) =>
      parse(withModels(model({ type: 'realtime', input_modalities: ['text', 'audio'], pricing: { input: '4', output: '16', ...pricing } })));
    expect(realtime({ audio_input: '32', audio_output: '64' }).models[0].type).toBe('realtime');
    expect(() => realtime({ audio_output: '64' })).toThrow('models[0].pricing.audio_input: required for realtime models');
    expect(() => realtime({ audio_input: '32' })).toThrow('models[0].pricing.audio_output: required for realtime models');
  });

  it('the built-in sim/video is a per-second video model on the sim provider (spec 4.15)', () => {
    const video = loadCatalog().get('sim/video')!;
    expect(video).toMatchObject({ name: 'Simulated video', type: 'video', inputModalities: ['text', 'image'], outputModalities: ['video'] });
    expect(video.prices.perSecond).toBe(usd(0.1));
    expect(video.video).toEqual({ durations: [4, 8, 12], aspectRatios: ['16:9', '9:16'], resolutions: ['720p', '1080p'], sizes: [], imageToVideo: true });
    expect(video.providers.map((r) => [r.provider.name, r.upstreamModel])).toEqual([['sim', 'sim-video']]);
  });

  const videoModel = (video: unknown, fields: Record<string, unknown> = {}) =>
    model({
      id: 'v/clip',
      type: 'video',
      input_modalities: ['text', 'image'],
      output_modalities: ['video'],
      pricing: { per_second: '0.05' },
      video,
      ...fields,
    });

  it("reads a video model's capabilities, durations ascending, and defaults the rest", () => {
    const full = parse(
      withModels(
        videoModel({ durations: [12, 4, 8], aspect_ratios: ['16:9', '9:16'], resolutions: ['720p'], sizes: ['1280x720', '1024x1792'], image_to_video: false }),
      ),
    ).get('v/clip')!;
    expect(full.video).toEqual({
      durations: [4, 8, 12],
      aspectRatios: ['16:9', '9:16'],
      resolutions: ['720p'],
      sizes: ['1280x720', '1024x1792'],
      imageToVideo: false,
    });
    expect(full.prices.perSecond).toBe(usd(0.05));
    // image_to_video follows input_modalities unless stated.
    expect(parse(withModels(videoModel({ durations: [5] }))).get('v/clip')!.video).toEqual({
      durations: [5],
      aspectRatios: [],
      resolutions: [],
      sizes: [],
      imageToVideo: true,
    });
    expect(parse(withModels(videoModel({ durations: [5] }, { input_modalities: ['text'] }))).get('v/clip')!.video!.imageToVideo).toBe(false);
  });

  it('maps a size to the listed aspect ratio nearest it, within 2%', () => {
    expect(aspectRatioOfSize('1280x720', ['16:9', '9:16'])).toBe('16:9');
    expect(aspectRatioOfSize('720x1280', ['16:9', '9:16'])).toBe('9:16');
    // OpenAI's 1024x1792 is 4:7, 1.6% from 9:16.
    expect(aspectRatioOfSize('1024x1792', ['16:9', '9:16'])).toBe('9:16');
    expect(aspectRatioOfSize('1000x1000', ['16:9', '9:16'])).toBeNull();
    expect(aspectRatioOfSize('1920x1080', [])).toBe('16:9');
    expect(aspectRatioOfSize('1280*720', ['16:9'])).toBeNull();
    expect(aspectRatioOfSize('0x720', [])).toBeNull();
  });

  it('reads a deprecation without announcement or replacement, and a time zone offset', () => {
    const d = parse(withModels(model({ deprecation: { sunset: '2026-12-01T01:00:00+01:00', replacement: null } }))).get('x/m')!.deprecation;
    expect(d).toEqual({ sunset: new Date('2026-12-01T00:00:00Z'), replacement: null, announced: null });
  });

  const mistakes: [unknown, string][] = [
    [{ ...base, extra: 1 }, 'top level.extra: unknown field'],
    [{ ...base, providers: { up: { ...base.providers.up, base_ur: 'x' } } }, 'providers.up.base_ur: unknown field'],
    [{ ...base, providers: { up: { ...base.providers.up, adapter: 'grpc' } } }, 'providers.up.adapter: expected one of openai, anthropic, cohere, jina'],
    [
      { providers: { up: { ...base.providers.up, adapter: 'anthropic' } }, models: [model({ type: 'embedding' })] },
      'models[0].providers[0].provider: up uses the anthropic adapter, which declares no embedding operation (it serves: chat)',
    ],
    // ARCHITECTURE section 10: a provider that lacks the model type's operation is refused at load.
    [
      { providers: { up: { ...base.providers.up, adapter: 'cohere' } }, models: [model({ type: 'chat' })] },
      'models[0].providers[0].provider: up uses the cohere adapter, which declares no chat operation (it serves: rerank)',
    ],
    [
      withModels(model({ type: 'rerank', pricing: { per_search_unit: '0.002' } })),
      'models[0].providers[0].provider: up uses the openai adapter, which declares no rerank operation (it serves: chat, embed, image, speech, transcription, translation, moderation, video, realtime)',
    ],
    [{ ...base, providers: { up: { ...base.providers.up, adapter: 'jina', dialect: 'router' } } }, 'providers.up.dialect: applies to the openai adapter only'],
    [withModels(model({ pricing: { input: 'cheap', output: 1 } })), 'models[0].pricing.input: expected a USD price per million tokens'],
    [withModels(model({ pricing: { input: 1 } })), 'models[0].pricing.output: required'],
    [withModels(model({ pricing: { input: 1, output: 1, per_query: '-1' } })), 'models[0].pricing.per_query: expected a USD price per query'],
    [withModels(model({ pricing: { input: 1, output: 1, per_second: 'x' } })), 'models[0].pricing.per_second'],
    [withModels(model({ pricing: { input: 1, output: 1, per_image: 'x' } })), 'models[0].pricing.per_image'],
    [
      withModels(model({ pricing: { input: 1, output: 1, per_search_unit: '-0.1' } })),
      'models[0].pricing.per_search_unit: expected a USD price per search unit',
    ],
    [withModels(model({ pricing: { input: 1, output: 1, cached_input: 2 } })), 'models[0].pricing.cached_input: must not exceed the input price'],
    [withModels(model({ pricing: { input: 1, output: 1, cahced_input: 0.5 } })), 'models[0].pricing.cahced_input: unknown field'],
    [withModels(model({ providers: [{ provider: 'nope', upstream_model: 'm' }] })), 'models[0].providers[0].provider: unknown provider nope'],
    [withModels(base.models[0], base.models[0]), 'models[1].id: duplicate id x/m (also models[0])'],
    [withModels(model({ context_length: 0 })), 'models[0].context_length'],
    [withModels(model({ batch_discount_percent: 101 })), 'models[0].batch_discount_percent: expected a whole percentage from 0 to 100'],
    [{ ...base, batch_discount_percent: 12.5 }, 'batch_discount_percent: expected a whole percentage'],
    [withModels(model({ deprecaton: {} })), 'models[0].deprecaton: unknown field'],
    [withModels(videoModel(undefined)), 'models[0].video: required for video models: at least video.durations'],
    [withModels(videoModel({ aspect_ratios: ['16:9'] })), 'models[0].video.durations: required'],
    [withModels(videoModel({ durations: [] })), 'models[0].video.durations: expected at least one clip length'],
    [withModels(videoModel({ durations: [4, 0] })), 'models[0].video.durations[1]: expected a positive whole number of seconds'],
    [withModels(videoModel({ durations: [4.5] })), 'models[0].video.durations[0]: expected a positive whole number'],
    [withModels(videoModel({ durations: ['4'] })), 'models[0].video.durations[0]: expected a positive whole number'],
    [withModels(videoModel({ durations: [4, 4] })), 'models[0].video.durations: lists an entry twice'],
    [
      withModels(videoModel({ durations: [4], fps: 24 })),
      'models[0].video.fps: unknown field (known: durations, aspect_ratios, resolutions, sizes, image_to_video)',
    ],
    [
      withModels(videoModel({ durations: [4], aspect_ratios: ['16/9'] })),
      'models[0].video.aspect_ratios[0]: expected an aspect ratio such as "16:9", got "16/9"',
    ],
    [withModels(videoModel({ durations: [4], aspect_ratios: '16:9' })), 'models[0].video.aspect_ratios: expected a list'],
    [withModels(videoModel({ durations: [4], resolutions: ['720 p'] })), 'models[0].video.resolutions[0]: expected a resolution label'],
    [withModels(videoModel({ durations: [4], sizes: ['1280X720'] })), 'models[0].video.sizes[0]: expected a size WxH such as "1280x720"'],
    [
      withModels(videoModel({ durations: [4], aspect_ratios: ['16:9'], sizes: ['1280x720', '720x720'] })),
      'models[0].video.sizes[1]: 720x720 has none of the aspect ratios 16:9',
    ],
    [withModels(videoModel({ durations: [4], image_to_video: 'yes' })), 'models[0].video.image_to_video: expected true or false'],
    [
      withModels(videoModel({ durations: [4], image_to_video: true }, { input_modalities: ['text'] })),
      'models[0].video.image_to_video: the model does not list image in input_modalities',
    ],
    [withModels(videoModel('4s')), 'models[0].video: expected a mapping'],
    [withModels(model({ video: { durations: [4] } })), 'models[0].video: only video models have video capabilities'],
    [withModels(videoModel({ durations: [4] }, { pricing: { per_image: '0.1' } })), 'models[0].pricing.per_second: required for video models'],
    [
      withModels(videoModel({ durations: [4] }, { providers: [{ provider: 'up', upstream_model: 'v', pricing: { per_image: '0.1' } }] })),
      'models[0].providers[0].pricing.per_second: required for video models',
    ],
    [withModels(model({ id: 'x/m:free' })), 'models[0].id: "x/m:free": use letters'],
    [withModels(model({ id: 'x//m' })), 'models[0].id: "x//m"'],
    [withModels(model({ id: 'count' })), 'models[0].id: "count" is reserved'],
    [withModels(model({ type: 'chatbot' })), 'models[0].type: expected one of chat, embedding'],
    [withModels(model({ created: 'yesterday' })), 'models[0].created: expected an ISO 8601 date-time'],
    [withModels(model({ owned_by: '' })), 'models[0].owned_by'],
    [withModels(model({ input_modalities: ['text', 'smell'] })), 'models[0].input_modalities[1]: expected one of text, image'],
    [withModels(model({ output_modalities: 'text' })), 'models[0].output_modalities: expected a list'],
    [withModels(model({ supported_parameters: ['Max Tokens'] })), 'models[0].supported_parameters[0]: expected a request parameter name'],
    [withModels(model({ supported_parameters: ['seed', 'seed'] })), 'models[0].supported_parameters: lists an entry twice'],
    [withModels(model({ uptime: 1.5 })), 'models[0].uptime: expected a fraction from 0 to 1'],
    [withModels(model({ uptime: '99%' })), 'models[0].uptime'],
    [withModels(model({ providers: [] })), 'models[0].providers: expected a list of at least one provider'],
    [withModels(model({ providers: [{ provider: 'up' }] })), 'models[0].providers[0].upstream_model'],
    [withModels(model({ providers: [{ provider: 'up', upstream_model: 'm', pricing: { input: 1 } }] })), 'models[0].providers[0].pricing.output: required'],
    [withModels(model({ providers: [{ provider: 'up', upstream_model: 'm', cost: { input: 1 } }] })), 'models[0].providers[0].cost.output: required'],
    [
      withModels(model({ providers: [{ provider: 'up', upstream_model: 'm', cost: { input: '0.7', output: 'cheap' } }] })),
      'models[0].providers[0].cost.output: expected a USD price per million tokens',
    ],
    [
      withModels(model({ providers: [{ provider: 'up', upstream_model: 'm', cost: { input: 1, output: 1, cahced_input: 0.5 } }] })),
      'models[0].providers[0].cost.cahced_input: unknown field',
    ],
    [
      withModels(model({ providers: [{ provider: 'up', upstream_model: 'm', cost: { input: 1, output: 1, cached_input: 2 } }] })),
      'models[0].providers[0].cost.cached_input: must not exceed the input price',
    ],
    [withModels(model({ providers: [{ provider: 'up', upstream_model: 'm', cost: '0.7' }] })), 'models[0].providers[0].cost: expected a mapping'],
    [
      withModels(videoModel({ durations: [4] }, { providers: [{ provider: 'up', upstream_model: 'v', cost: { per_image: '0.1' } }] })),
      'models[0].providers[0].cost.per_second: required for video models',
    ],
    [withModels(model({ cost: { input: 1, output: 1 } })), 'models[0].cost: unknown field'],
    [
      withModels(model({ providers: [{ provider: 'up', upstream_model: 'm', quantization: 'q4' }] })),
      'models[0].providers[0].quantization: expected one of int4',
    ],
    [withModels(model({ providers: [{ provider: 'up', upstream_model: 'm', tools: true }] })), 'models[0].providers[0].tools: the model does not list tools'],
    [
      withModels(model({ providers: [{ provider: 'up', upstream_model: 'm', data_collection: 'maybe' }] })),
      'models[0].providers[0].data_collection: expected one of allow, deny',
    ],
    [withModels(model({ providers: [{ provider: 'up', upstream_model: 'm', zdr: 'yes' }] })), 'models[0].providers[0].zdr: expected true or false'],
    [
      withModels(
        model({
          providers: [
            { provider: 'up', upstream_model: 'a' },
            { provider: 'up', upstream_model: 'b' },
          ],
        }),
      ),
      'models[0].providers: lists a provider twice',
    ],
    [{ ...base, providers: { up: { ...base.providers.up, dialect: 'vllm' } } }, 'providers.up.dialect: expected one of openai, router'],
    [
      { ...base, providers: { up: { ...base.providers.up, adapter: 'anthropic', dialect: 'router' } } },
      'providers.up.dialect: applies to the openai adapter only',
    ],
    [withModels(model({ deprecation: { replacement: null } })), 'models[0].deprecation.sunset: expected an ISO 8601'],
    [
      withModels(model({ deprecation: { sunset: '2026-12-01T00:00:00', replacement: null } })),
      'models[0].deprecation.sunset: expected an ISO 8601 date-time with a time zone such as 2026-12-01T00:00:00Z, got "2026-12-01T00:00:00"',
    ],
    [
      withModels(model({ deprecation: { sunset: '2026-02-30T00:00:00Z', replacement: null } })),
      'models[0].deprecation.sunset: expected an ISO 8601 date-time with a time zone such as 2026-12-01T00:00:00Z, got "2026-02-30T00:00:00Z"',
    ],
    [withModels(model({ deprecation: { sunset: '2026-12-01' } })), 'models[0].deprecation.replacement: required'],
    [
      withModels(model({ deprecation: { sunset: '2026-12-01', replacement: null, announced: '2026-12-02' } })),
      'models[0].deprecation.announced: must not be after the sunset',
    ],
    [withModels(model({ deprecation: { sunset: '2026-12-01', replacement: 'x/gone' } })), 'models[0].deprecation.replacement: unknown model x/gone'],
    [
      withModels(model({ deprecation: { sunset: '2026-12-01', replacement: 'x/e' } }), model({ id: 'x/e', type: 'embedding' })),
      'models[0].deprecation.replacement: x/e is of type embedding, x/m of type chat',
    ],
    [
      withModels(
        model({ id: 'x/a', deprecation: { sunset: '2026-12-01', replacement: 'x/b' } }),
        model({ id: 'x/b', deprecation: { sunset: '2027-12-01', replacement: 'x/a' } }),
      ),
      'models[0].deprecation.replacement: replacements loop: x/a -> x/b -> x/a',
    ],
  ];
  it.each(mistakes.map(([doc, message]) => [message, doc]))('names the place of a mistake: %s', (message, doc) => {
    expect(() => parse(doc)).toThrow(CatalogError);
    expect(() => parse(doc)).toThrow(`test: ${message}`);
  });

  it('refuses a provider whose key variable is unset', () => {
    expect(() => parseCatalog(base, 'test', {})).toThrow('UP_KEY is not set');
  });
});
