/**
 * ARCHITECTURE 10 and issue 16: a provider is a declaration of the operations it serves, each
 * with a request mapping over that operation's one list of known fields.
 */
import { PARAMETERS, mapParameters } from './operations';
import { OPERATION_METHODS } from './provider';
import { ADAPTERS, createChatProvider, operationsOf, PROVIDERS, servesModelType } from './registry';

const options = { baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'k' };

describe('provider declarations', () => {
  it.each(ADAPTERS)('%s: its client has a method for every operation it declares, and none for an optional one it does not', (adapter) => {
    const client = createChatProvider(adapter, options) as unknown as Record<string, unknown>;
    const declared = new Set(operationsOf(adapter).map((o) => OPERATION_METHODS[o]));
    for (const method of declared) expect(typeof client[method]).toBe('function');
    for (const method of ['images', 'speech', 'transcribe', 'rerank', 'moderations', 'search']) {
      if (!declared.has(method as never)) expect(client[method]).toBeUndefined();
    }
  });

  it.each(ADAPTERS)('%s: every field its configs map is a known field of the operation', (adapter) => {
    for (const [operation, config] of Object.entries(PROVIDERS[adapter].operations)) {
      const known: readonly string[] = PARAMETERS[operation as keyof typeof PARAMETERS];
      for (const field of Object.keys(config ?? {})) expect(known).toContain(field);
    }
  });

  it('declares what each wire format serves', () => {
    expect(operationsOf('openai').sort()).toEqual(['chat', 'embed', 'image', 'moderation', 'speech', 'transcription', 'translation']);
    expect(operationsOf('anthropic')).toEqual(['chat']);
    expect(operationsOf('cohere')).toEqual(['rerank']);
    expect(operationsOf('jina')).toEqual(['rerank']);
    expect(operationsOf('searxng')).toEqual(['search']);
    expect(operationsOf('tavily')).toEqual(['search']);
  });

  it('a model type is served by an adapter declaring one of its operations; types with no operation yet are listed anywhere', () => {
    expect(servesModelType('openai', 'audio')).toBe(true);
    expect(servesModelType('anthropic', 'embedding')).toBe(false);
    expect(servesModelType('cohere', 'rerank')).toBe(true);
    expect(servesModelType('openai', 'rerank')).toBe(false);
    expect(servesModelType('searxng', 'search')).toBe(true);
    expect(servesModelType('tavily', 'search')).toBe(true);
    expect(servesModelType('openai', 'search')).toBe(false);
    expect(servesModelType('tavily', 'chat')).toBe(false);
    expect(servesModelType('anthropic', 'video')).toBe(true);
  });

  it.each(['cohere', 'searxng', 'tavily'] as const)('%s refuses the ChatProvider methods it does not serve with a 400 naming the operation', async (adapter) => {
    const client = createChatProvider(adapter, options);
    const serves = operationsOf(adapter)[0];
    expect(() => client.chatCompletion({})).toThrow(`a ${serves} provider does not serve chat completions`);
    expect(() => client.embeddings({})).toThrow(expect.objectContaining({ kind: 'http', status: 400, message: `a ${serves} provider does not serve embeddings` }));
    await expect(client.streamChatCompletion({}).next()).rejects.toMatchObject({ status: 400, message: `a ${serves} provider does not serve chat completions` });
  });
});

describe('request mapping', () => {
  const body = { model: 'up/m', messages: [], top_k: 5, preset: 'p', plugins: [], provider: { order: ['a'] }, reasoning: { effort: 'high' }, stop: null, temperature: undefined };

  it("OpenAI's own API: gateway-only and router fields dropped, reasoning.effort sent as reasoning_effort, null passed on", () => {
    expect(mapParameters(PROVIDERS.openai.operations.chat!, body)).toEqual({ model: 'up/m', messages: [], reasoning_effort: 'high', stop: null });
  });

  it("the caller's own reasoning_effort wins over reasoning.effort", () => {
    expect(mapParameters(PROVIDERS.openai.operations.chat!, { ...body, reasoning_effort: 'low' })).toMatchObject({ reasoning_effort: 'low' });
  });

  it('Anthropic: renamed fields (stop -> stop_sequences, user -> metadata.user_id)', () => {
    expect(mapParameters(PROVIDERS.anthropic.operations.chat!, { model: 'm', stop: 'END', user: 'u1', seed: 3 })).toEqual({ model: 'm', stop_sequences: ['END'], metadata: { user_id: 'u1' } });
  });

  it('search: SearXNG takes only the query (as q); Tavily splits the domain filter and names the country', () => {
    const body = { model: 'm', query: 'q', max_results: 3, search_domain_filter: ['-a.com', '-B.org'], country: 'FR', max_tokens_per_page: 100 };
    expect(mapParameters(PROVIDERS.searxng.operations.search!, body)).toEqual({ q: 'q' });
    expect(mapParameters(PROVIDERS.tavily.operations.search!, body)).toEqual({ query: 'q', max_results: 3, exclude_domains: ['a.com', 'b.org'], country: 'france' });
  });

  it('rerank: return_documents is the gateway\'s own and is not sent', () => {
    expect(mapParameters(PROVIDERS.cohere.operations.rerank!, { model: 'm', query: 'q', documents: ['d'], top_n: 1, return_documents: true })).toEqual({ model: 'm', query: 'q', documents: ['d'], top_n: 1 });
  });
});
