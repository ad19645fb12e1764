/**
 * ARCHITECTURE 10 and issue 16: a provider is a declaration of the operations it serves, each
 * with a request mapping over that operation's one list of known fields.
 */
import { PARAMETERS, mapParameters } from './operations';
import { type CallName, OPERATION_CALLS, operationOf } from './provider';
import { ADAPTERS, createProvider, operationsOf, PROVIDERS, servesModelType } from './registry';

const options = { baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'k' };
const ALL_CALLS = Object.values(OPERATION_CALLS).flat() as CallName[];

describe('provider declarations', () => {
  it.each(ADAPTERS)('%s: its client has the calls of the operations it declares, and no other', (adapter) => {
    const client = createProvider(adapter, options);
    const declared = new Set<CallName>(operationsOf(adapter).flatMap((o) => OPERATION_CALLS[o]));
    for (const call of ALL_CALLS) expect({ call, served: typeof operationOf(client, call) === 'function' }).toEqual({ call, served: declared.has(call) });
  });

  it.each(ADAPTERS)('%s: every field its configs map is a known field of the operation', (adapter) => {
    for (const [operation, declared] of Object.entries(PROVIDERS[adapter].operations)) {
      const known: readonly string[] = PARAMETERS[operation as keyof typeof PARAMETERS];
      for (const field of Object.keys(declared.parameters)) expect(known).toContain(field);
    }
  });

  it('an operation a provider does not serve is unsupported, not a method that throws', () => {
    expect(operationOf(createProvider('anthropic', options), 'embed')).toBeUndefined();
    expect(operationOf(createProvider('cohere', options), 'chat')).toBeUndefined();
    expect(operationOf(createProvider('cohere', options), 'chat_stream')).toBeUndefined();
    expect(operationOf(createProvider('tavily', options), 'rerank')).toBeUndefined();
    expect(typeof operationOf(createProvider('jina', options), 'rerank')).toBe('function');
  });

  it('declares what each wire format serves', () => {
    expect(operationsOf('openai').sort()).toEqual(['chat', 'embed', 'image', 'moderation', 'realtime', 'speech', 'transcription', 'translation', 'video']);
    expect(operationsOf('anthropic')).toEqual(['chat']);
    expect(operationsOf('cohere')).toEqual(['rerank']);
    expect(operationsOf('jina')).toEqual(['rerank']);
    expect(operationsOf('searxng')).toEqual(['search']);
    expect(operationsOf('tavily')).toEqual(['search']);
    expect(operationsOf('videorouter')).toEqual(['video']);
  });

  it('realtime (spec 4.16): the OpenAI adapter dials its base URL as a WebSocket, /realtime?model=, with its bearer key', () => {
    const at = (baseUrl: string) => PROVIDERS.openai.client({ baseUrl, apiKey: 'sk-up' }).realtime('gpt-realtime');
    expect(at('https://api.openai.com/v1/')).toEqual({
      url: 'wss://api.openai.com/v1/realtime?model=gpt-realtime',
      headers: { authorization: 'Bearer sk-up' },
    });
    expect(at('http://127.0.0.1:4010/v1').url).toBe('ws://127.0.0.1:4010/v1/realtime?model=gpt-realtime');
    expect(PROVIDERS.openai.client(options).realtime('a model/with space').url).toBe('ws://127.0.0.1:9/v1/realtime?model=a+model%2Fwith+space');
    expect(servesModelType('openai', 'realtime')).toBe(true);
    expect(servesModelType('anthropic', 'realtime')).toBe(false);
  });

  it('a model type is served by an adapter declaring one of its operations', () => {
    expect(servesModelType('openai', 'audio')).toBe(true);
    expect(servesModelType('anthropic', 'embedding')).toBe(false);
    expect(servesModelType('cohere', 'rerank')).toBe(true);
    expect(servesModelType('openai', 'rerank')).toBe(false);
    expect(servesModelType('searxng', 'search')).toBe(true);
    expect(servesModelType('tavily', 'search')).toBe(true);
    expect(servesModelType('openai', 'search')).toBe(false);
    expect(servesModelType('tavily', 'chat')).toBe(false);
    expect(servesModelType('openai', 'video')).toBe(true);
    expect(servesModelType('videorouter', 'video')).toBe(true);
    expect(servesModelType('anthropic', 'video')).toBe(false);
    expect(servesModelType('videorouter', 'chat')).toBe(false);
    // A type no operation serves is listed only, wherever it is routed.
    expect(servesModelType('anthropic', 'hologram')).toBe(true);
  });
});

describe('request mapping', () => {
  const body = {
    model: 'up/m',
    messages: [],
    top_k: 5,
    preset: 'p',
    plugins: [],
    provider: { order: ['a'] },
    reasoning: { effort: 'high' },
    stop: null,
    temperature: undefined,
  };

  it("OpenAI's own API: gateway-only and router fields dropped, reasoning.effort sent as reasoning_effort, null passed on", () => {
    expect(mapParameters(PROVIDERS.openai.operations.chat.parameters, body)).toEqual({ model: 'up/m', messages: [], reasoning_effort: 'high', stop: null });
  });

  it("the caller's own reasoning_effort wins over reasoning.effort", () => {
    expect(mapParameters(PROVIDERS.openai.operations.chat.parameters, { ...body, reasoning_effort: 'low' })).toMatchObject({ reasoning_effort: 'low' });
  });

  it('Anthropic: renamed fields (stop -> stop_sequences, user -> metadata.user_id)', () => {
    expect(mapParameters(PROVIDERS.anthropic.operations.chat.parameters, { model: 'm', stop: 'END', user: 'u1', seed: 3 })).toEqual({
      model: 'm',
      stop_sequences: ['END'],
      metadata: { user_id: 'u1' },
    });
  });

  it('search: SearXNG takes only the query (as q); Tavily splits the domain filter and names the country', () => {
    const body = { model: 'm', query: 'q', max_results: 3, search_domain_filter: ['-a.com', '-B.org'], country: 'FR', max_tokens_per_page: 100 };
    expect(mapParameters(PROVIDERS.searxng.operations.search.parameters, body)).toEqual({ q: 'q' });
    expect(mapParameters(PROVIDERS.tavily.operations.search.parameters, body)).toEqual({
      query: 'q',
      max_results: 3,
      exclude_domains: ['a.com', 'b.org'],
      country: 'france',
    });
  });

  it('video: OpenAI takes seconds as a string, an aspect ratio as its size, the image as input_reference; the router takes duration and derives the ratio from a size', () => {
    const body = { model: 'm', prompt: 'p', seconds: 8, aspect_ratio: '9:16', image_url: 'https://x/a.png', provider: { order: ['a'] } };
    expect(mapParameters(PROVIDERS.openai.operations.video.parameters, body)).toEqual({
      model: 'm',
      prompt: 'p',
      seconds: '8',
      size: '720x1280',
      input_reference: { image_url: 'https://x/a.png' },
    });
    expect(mapParameters(PROVIDERS.openai.operations.video.parameters, { ...body, aspect_ratio: '16:9', resolution: '1024p' })).toMatchObject({
      size: '1792x1024',
    });
    expect(mapParameters(PROVIDERS.openai.operations.video.parameters, { ...body, aspect_ratio: '9:16', resolution: '1080p' })).toMatchObject({
      size: '1024x1792',
    });
    expect(() => mapParameters(PROVIDERS.openai.operations.video.parameters, { ...body, resolution: '480p' })).toThrow(
      expect.objectContaining({ status: 400, message: expect.stringContaining('not 9:16 480p') }),
    );
    expect(mapParameters(PROVIDERS.openai.operations.video.parameters, { ...body, size: '1280x720' })).toMatchObject({ size: '1280x720' });
    expect(() => mapParameters(PROVIDERS.openai.operations.video.parameters, { ...body, aspect_ratio: '1:1' })).toThrow(
      expect.objectContaining({ kind: 'http', status: 400, message: expect.stringContaining('not 1:1 720p') }),
    );
    expect(mapParameters(PROVIDERS.videorouter.operations.video.parameters, body)).toEqual({
      model: 'm',
      prompt: 'p',
      duration: 8,
      aspect_ratio: '9:16',
      image_url: 'https://x/a.png',
    });
    expect(mapParameters(PROVIDERS.videorouter.operations.video.parameters, { model: 'm', prompt: 'p', seconds: 4, size: '1920x1080' })).toEqual({
      model: 'm',
      prompt: 'p',
      duration: 4,
      aspect_ratio: '16:9',
      resolution: '1080p',
    });
    expect(
      mapParameters(PROVIDERS.videorouter.operations.video.parameters, { model: 'm', prompt: 'p', seconds: 4, size: '1920x1080', resolution: '720p' }),
    ).toMatchObject({ aspect_ratio: '16:9', resolution: '720p' });
  });

  it("rerank: return_documents is the gateway's own and is not sent", () => {
    expect(
      mapParameters(PROVIDERS.cohere.operations.rerank.parameters, { model: 'm', query: 'q', documents: ['d'], top_n: 1, return_documents: true }),
    ).toEqual({
      model: 'm',
      query: 'q',
      documents: ['d'],
      top_n: 1,
    });
  });
});
