import OpenAI from 'openai';
import { usdToNano } from '@svc/platform';
import { compressMessages, countChatPromptTokens } from '@svc/providers';
import { startWithClient, stopGateway, type StartedGateway, type Call } from '../support/gateway';

// Nano-USD per token, from the built-in catalog: sim/small-8k $0.10 / $0.40 per M.
const SMALL = { input: 100n, output: 400n };

type Params = OpenAI.ChatCompletionCreateParamsNonStreaming & { plugins?: unknown[]; transforms?: string[] };
type Message = OpenAI.ChatCompletionMessageParam;

const user = (content: string): Message[] => [{ role: 'user', content }];
const image = (url: string) => ({ type: 'image_url' as const, image_url: { url } });
const withImages = (...urls: string[]): Message[] => [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, ...urls.map(image)] }];
/** A tiny but real PNG (1x1), as a client would inline it. */
const PNG = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=';

/** A conversation of about 10K tokens: too long for sim/small-8k's 8,192. */
function longConversation(): Message[] {
  const filler = (tag: string) => `${tag}: ${'the quick brown fox jumps over the lazy dog '.repeat(55)}`;
  const turns: Message[] = [{ role: 'system', content: 'You are a patient assistant.' }];
  for (let i = 0; i < 10; i++) {
    turns.push({ role: 'user', content: filler(`question ${i}`) }, { role: 'assistant', content: filler(`answer ${i}`) });
  }
  turns.push({ role: 'user', content: 'So, what did we conclude?' });
  return turns;
}

describe('chat request rules and plugins (issue 5: request rules, plugins; spec 4.2 rules 1, 4, 5, 7-9)', () => {
  let gw: StartedGateway;
  let client: OpenAI;
  let call: Call;

  beforeAll(async () => void ({ gw, client, call } = await startWithClient()), 60_000);
  afterAll(() => stopGateway(gw));

  afterEach(() => jest.restoreAllMocks());

  const credits = async () => (await call('GET', '/credits', { key: gw.keys.api_key })).json.data as { balance: number; held: number; open_holds: number };
  const chat = (body: Params) => client.chat.completions.create(body as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse();
  const post = (body: object) => call('POST', '/chat/completions', { key: gw.keys.api_key, body });
  const failure = (promise: Promise<unknown>) =>
    promise.then(
      () => null,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
  /** Every body the gateway hands to a provider adapter while `run` runs. */
  async function upstreamBodies<T>(run: () => Promise<T>): Promise<[T, Record<string, unknown>[]]> {
    const bodies: Record<string, unknown>[] = [];
    for (const provider of gw.runtime.providers.values()) {
      // Only the providers that serve chat have the call; the others are never handed a chat body.
      const original = provider.chat;
      if (!original) continue;
      jest.spyOn(provider as { chat: typeof original }, 'chat').mockImplementation((body, signal) => {
        bodies.push(body as Record<string, unknown>);
        return original(body, signal);
      });
    }
    return [await run(), bodies];
  }

  /** A refused request: the status and error, nothing sent upstream, nothing held or billed. */
  async function expectRefused(body: object, status: number, error: Record<string, unknown>) {
    const before = await credits();
    const [r, bodies] = await upstreamBodies(() => post(body));
    expect(r.status).toBe(status);
    expect(r.json.error).toMatchObject(error);
    expect(bodies).toHaveLength(0);
    expect(await credits()).toEqual(before);
  }

  describe('rule 1: unknown parameters', () => {
    it('are ignored, listed in x-svc-ignored-params, and not sent upstream; known ones are', async () => {
      const [r, bodies] = await upstreamBodies(() =>
        post({ model: 'sim/echo', messages: user('hi'), temperature: 0.2, foo: 1, metadata: { a: 'b' }, plugins: [], transforms: [] }),
      );
      expect(r.status).toBe(200);
      expect(r.json.choices[0].message.content).toBe('Echo: hi');
      expect(r.headers.get('x-svc-ignored-params')).toBe('foo,metadata');
      expect(bodies).toHaveLength(1);
      expect(bodies[0]).toMatchObject({ temperature: 0.2 });
      // `metadata` is an OpenAI parameter the adapter would pass on; the plugin fields are the gateway's own.
      for (const field of ['foo', 'metadata', 'plugins', 'transforms']) expect(bodies[0]).not.toHaveProperty(field);
    });

    it('leave the header out when there are none', async () => {
      const { response } = await chat({ model: 'sim/echo', messages: user('hi') });
      expect(response.headers.get('x-svc-ignored-params')).toBeNull();
    });
  });

  describe('rule 4: capabilities of the model', () => {
    const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }];

    it('refuses tools to a model without tool calling (SDK)', async () => {
      const before = await credits();
      const error = await failure(chat({ model: 'sim/small-8k', messages: user('hi'), tools }));
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error!.error).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_parameter', param: 'tools' });
      expect(error!.message).toMatch(/sim\/small-8k/);
      expect(await credits()).toEqual(before);
    });

    it('refuses tool_choice alone, and tools to a fallback model without them', async () => {
      await expectRefused({ model: 'sim/small-8k', messages: user('hi'), tool_choice: 'auto' }, 400, { code: 'unsupported_parameter', param: 'tool_choice' });
      await expectRefused({ model: 'sim/echo', models: ['sim/small-8k'], messages: user('hi'), tools }, 400, { code: 'unsupported_parameter', param: 'tools' });
    });

    it('sends tools to a model with tool calling', async () => {
      const { data } = await chat({ model: 'sim/echo', messages: user('hi'), tools });
      expect(data.choices[0].message.content).toBe('Echo: hi');
    });

    it('refuses an image to a model without vision, naming the part', async () => {
      await expectRefused({ model: 'sim/small-8k', messages: withImages('https://example.com/cat.png') }, 400, {
        type: 'invalid_request_error',
        code: 'unsupported_parameter',
        param: 'messages[0].content[1]',
      });
    });

    it('sends https and data URL images to a model with vision (SDK)', async () => {
      const { data } = await chat({ model: 'sim/echo', messages: withImages('https://example.com/cat.png', PNG) });
      expect(data.choices[0].message.content).toBe('Echo: What is this?');
    });

    it("lets the model's own 404 through unchanged", async () => {
      await expectRefused({ model: 'sim/nope', messages: withImages('http://example.com/x.png') }, 404, { type: 'not_found_error' });
    });
  });

  describe('rule 5: image parts', () => {
    it('accepts 20 images and refuses 21, naming the 21st', async () => {
      const twenty = Array.from({ length: 20 }, (_, i) => `https://example.com/${i}.png`);
      expect((await post({ model: 'sim/echo', messages: withImages(...twenty) })).status).toBe(200);
      await expectRefused({ model: 'sim/echo', messages: withImages(...twenty, 'https://example.com/20.png') }, 400, {
        type: 'invalid_request_error',
        param: 'messages[0].content[21]',
        message: expect.stringMatching(/at most 20 images/i),
      });
    });

    it.each([
      ['an http URL', 'http://example.com/cat.png', /https/],
      ['a data URL that is not an image', 'data:text/plain;base64,aGk=', /https/],
      ['a data URL that is not base64', 'data:image/png;base64,not base64!', /base64/],
      ['no URL at all', '', /https/],
    ])('refuses %s, naming the part', async (_what, url, message) => {
      await expectRefused({ model: 'sim/echo', messages: withImages(url) }, 400, { param: 'messages[0].content[1]', message: expect.stringMatching(message) });
    });
  });

  describe('rule 8: response healing', () => {
    const broken = user('data please\n#sim {"malformed_json": true}');

    it('repairs the malformed JSON of a json_object request (SDK)', async () => {
      const { data } = await chat({ model: 'sim/echo', messages: broken, response_format: { type: 'json_object' }, plugins: [{ id: 'response-healing' }] });
      expect(JSON.parse(data.choices[0].message.content!)).toEqual({ answer: 'data please', items: [1, 2] });
    });

    it('repairs on json_schema too', async () => {
      const response_format = { type: 'json_schema' as const, json_schema: { name: 'answer', schema: { type: 'object' } } };
      const { data } = await chat({ model: 'sim/echo', messages: broken, response_format, plugins: [{ id: 'response-healing' }] });
      expect(JSON.parse(data.choices[0].message.content!)).toMatchObject({ answer: 'data please' });
    });

    it.each([
      ['response_format is absent', { plugins: [{ id: 'response-healing' }] }],
      ['the plugin is not asked for', { response_format: { type: 'json_object' } }],
      ['the plugin is disabled', { response_format: { type: 'json_object' }, plugins: [{ id: 'response-healing', enabled: false }] }],
    ])('leaves the content as the model wrote it when %s', async (_what, extra) => {
      const { data } = await chat({ model: 'sim/echo', messages: broken, ...(extra as Partial<Params>) });
      expect(data.choices[0].message.content).toBe('{"answer": "data please", "items": [1, 2,');
    });
  });

  describe('rule 9: context compression', () => {
    const messages = longConversation();
    const maxTokens = 100;

    it('is needed: the conversation does not fit sim/small-8k', () => {
      expect(countChatPromptTokens(messages) + maxTokens).toBeGreaterThan(8192);
    });

    it('is on by default for sim/small-8k: drops middle messages, says how many, bills the compressed prompt (SDK)', async () => {
      const before = await credits();
      const expected = compressMessages(messages, 8192 - maxTokens);
      expect(expected.dropped).toBeGreaterThan(0);

      const { data, response } = await chat({ model: 'sim/small-8k', messages, max_tokens: maxTokens });
      expect(response.headers.get('x-svc-compressed-messages')).toBe(String(expected.dropped));
      expect(data.choices[0].message.content).toBe('Echo: So, what did we conclude?');
      const usage = data.usage!;
      expect(usage.prompt_tokens).toBe(expected.promptTokens);
      expect(usage.prompt_tokens).toBeLessThan(countChatPromptTokens(messages));
      const cost = BigInt(usage.prompt_tokens) * SMALL.input + BigInt(usage.completion_tokens) * SMALL.output;
      expect(usdToNano(before.balance) - usdToNano((await credits()).balance)).toBe(cost);
    });

    it('keeps the system prompt and the latest user turn', async () => {
      const [, bodies] = await upstreamBodies(() => chat({ model: 'sim/small-8k', messages, max_tokens: maxTokens }));
      const sent = bodies[0].messages as Message[];
      expect(sent[0]).toEqual(messages[0]);
      expect(sent[sent.length - 1]).toEqual(messages[messages.length - 1]);
      expect(sent.length).toBeLessThan(messages.length);
    });

    it('sets the header on a streamed answer too', async () => {
      const response = await fetch(`${gw.url}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${gw.keys.api_key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim/small-8k', messages, max_tokens: maxTokens, stream: true }),
      });
      expect(response.status).toBe(200);
      expect(response.headers.get('x-svc-compressed-messages')).toBe(String(compressMessages(messages, 8192 - maxTokens).dropped));
      expect(await response.text()).toMatch(/data: \[DONE\]/);
    });

    it.each([
      ['enabled: false', { plugins: [{ id: 'context-compression', enabled: false }] }],
      ['transforms: []', { transforms: [] }],
    ])('is off with %s: the too-long prompt is refused, unbilled', async (_what, extra) => {
      await expectRefused({ model: 'sim/small-8k', messages, max_tokens: maxTokens, ...extra }, 400, {
        type: 'invalid_request_error',
        param: 'messages',
        message: expect.stringMatching(/exceeds the context window/),
      });
    });

    it('is off by default for a large model, and on with transforms: ["middle-out"]', async () => {
      // sim/echo has 128K of context: a cap that leaves 8K for the prompt makes it too long.
      const body = { model: 'sim/echo', messages, max_tokens: 128_000 - 8192 + maxTokens };
      const [plain, bodies] = await upstreamBodies(() => post(body));
      expect(plain.status).toBe(200);
      expect(plain.headers.get('x-svc-compressed-messages')).toBeNull();
      expect(bodies[0].messages).toEqual(messages);

      const compressed = await post({ ...body, transforms: ['middle-out'] });
      expect(compressed.status).toBe(200);
      expect(compressed.headers.get('x-svc-compressed-messages')).toBe(String(compressMessages(messages, 8192 - maxTokens).dropped));
    });

    it('refuses a prompt that cannot fit even compressed', async () => {
      const huge = user(`one long message ${'lorem ipsum '.repeat(5000)}`);
      await expectRefused({ model: 'sim/small-8k', messages: huge }, 400, {
        param: 'messages',
        message: expect.stringMatching(/even after context compression/),
      });
    });

    it('sends a conversation that fits untouched, without the header', async () => {
      const { response } = await chat({ model: 'sim/small-8k', messages: user('short') });
      expect(response.headers.get('x-svc-compressed-messages')).toBeNull();
    });
  });

  describe('rule 7: the web plugin (its searches: test/e2e/web-search.e2e.ts)', () => {
    it('accepts the web plugin when it is disabled', async () => {
      expect((await post({ model: 'sim/echo', messages: user('hi'), plugins: [{ id: 'web', enabled: false }] })).status).toBe(200);
    });

    it.each([
      [{ plugins: [{ id: 'nope' }] }, 'plugins[0].id'],
      [{ plugins: [{ id: 'response-healing', enabled: 'no' }] }, 'plugins[0].enabled'],
      [{ transforms: ['middle-in'] }, 'transforms[0]'],
      [{ plugins: [{ id: 'web', max_results: 1000 }] }, 'plugins[0].max_results'],
      [{ plugins: [{ id: 'web', on_failure: 'retry' }] }, 'plugins[0].on_failure'],
      [{ plugins: [{ id: 'web', search_domain_filter: ['a.com', '-b.com'] }] }, 'plugins[0].search_domain_filter'],
      [{ plugins: [{ id: 'web', maxResults: 3 }] }, 'plugins[0].maxResults'],
    ])('refuses malformed plugin fields %j', async (extra, param) => {
      await expectRefused({ model: 'sim/echo', messages: user('hi'), ...extra }, 400, { type: 'invalid_request_error', param });
    });
  });

  describe('reasoning and caching hints (spec 2.6, 4.2 reasoning fields and rule 11)', () => {
    /** The body the simulated upstream received for the last request. */
    const lastUpstreamBody = () => gw.runtime.simulator!.received.at(-1) as Record<string, unknown>;

    it('passes prompt_cache_key and cache_control through to the upstream untouched', async () => {
      const messages = [
        { role: 'system', content: [{ type: 'text', text: 'A long, stable prefix.', cache_control: { type: 'ephemeral' } }] },
        { role: 'user', content: 'hi' },
      ];
      expect((await post({ model: 'sim/echo', messages, prompt_cache_key: 'tenant-42' })).status).toBe(200);
      expect(lastUpstreamBody()).toMatchObject({ prompt_cache_key: 'tenant-42', messages });
    });

    it(':thinking and reasoning.effort reach an OpenAI-dialect upstream as reasoning_effort', async () => {
      expect((await post({ model: 'sim/echo:thinking', messages: user('hi') })).status).toBe(200);
      expect(lastUpstreamBody()).toMatchObject({ reasoning_effort: 'medium' });
      expect(lastUpstreamBody()).not.toHaveProperty('reasoning');
      expect((await post({ model: 'sim/echo', messages: user('hi'), reasoning: { effort: 'high' }, reasoning_effort: 'low' })).status).toBe(200);
      expect(lastUpstreamBody()).toMatchObject({ reasoning_effort: 'low' });
    });

    it('returns the reasoning text, and with reasoning.exclude bills it without returning it (SDK)', async () => {
      const ask = user('think first\n#sim {"reasoning_tokens": 12}');
      const { data: shown } = await chat({ model: 'sim/echo', messages: ask });
      const message = shown.choices[0].message as OpenAI.ChatCompletionMessage & { reasoning?: string };
      expect(message.reasoning).toEqual(expect.any(String));
      expect(shown.usage!.completion_tokens_details!.reasoning_tokens).toBe(12);

      const { data: hidden } = await chat({ model: 'sim/echo', messages: ask, reasoning: { exclude: true } } as Params);
      expect(hidden.choices[0].message).not.toHaveProperty('reasoning');
      expect(hidden.choices[0].message.content).toBe(message.content);
      expect(hidden.usage!.completion_tokens_details!.reasoning_tokens).toBe(12);
      expect((hidden.usage as unknown as { cost: number }).cost).toBe((shown.usage as unknown as { cost: number }).cost);
    });

    it('include_reasoning: false hides the reasoning of a stream too', async () => {
      const stream = await client.chat.completions.create({
        model: 'sim/echo',
        messages: user('think first\n#sim {"reasoning_tokens": 12}'),
        stream: true,
        stream_options: { include_usage: true },
        include_reasoning: false,
      } as OpenAI.ChatCompletionCreateParamsStreaming);
      let content = '';
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const chunk of stream) {
        for (const choice of chunk.choices) {
          expect(choice.delta).not.toHaveProperty('reasoning');
          content += choice.delta.content ?? '';
        }
        usage = chunk.usage ?? usage;
      }
      expect(content).toContain('Echo: think first');
      expect(usage!.completion_tokens_details!.reasoning_tokens).toBe(12);
    });
  });
});
