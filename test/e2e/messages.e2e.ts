import Anthropic from '@anthropic-ai/sdk';
import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { accountWithKey, creditsOf, expectBilled, generationOf, rawStream, rejectionOf } from '../support/interfaces';

const ENDPOINT = '/v1/messages';

/**
 * Issue 7, spec 4.3 and 4.4: the Messages interface of the other vendor, for every chat model,
 * through the chat pipeline, driven by the official @anthropic-ai/sdk.
 */
describe('POST /v1/messages with the official @anthropic-ai/sdk', () => {
  let gw: StartedGateway;
  let call: Call;
  let client: Anthropic;
  let key: string;

  beforeAll(async () => {
    gw = await startGateway();
    call = api(gw.url);
    key = gw.keys.api_key;
    // The SDK adds /v1/messages itself.
    client = new Anthropic({ baseURL: gw.url.replace(/\/v1$/, ''), apiKey: key, maxRetries: 0 });
  }, 60_000);
  afterAll(() => stopGateway(gw));

  const received = () => gw.runtime.simulator!.received as Array<Record<string, any>>;
  const errorOf = (promise: Promise<unknown>) => rejectionOf(promise, Anthropic.APIError);

  it('answers a plain message, with the generation id, and bills exactly its usage.cost', async () => {
    const before = await creditsOf(call, key);
    const { data: message, response } = await client.messages
      .create({ model: 'sim/echo', max_tokens: 64, system: 'Be brief.', messages: [{ role: 'user', content: 'Hello, messages' }] })
      .withResponse();

    expect(message).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: 'sim/echo',
      stop_reason: 'end_turn',
      stop_sequence: null,
      content: [{ type: 'text', text: 'Echo: Hello, messages' }],
    });
    expect(message.id).toMatch(/^gen-/);
    expect(response.headers.get('x-svc-generation-id')).toBe(message.id);
    const usage = message.usage as Anthropic.Usage & { cost: number };
    expect(usage.input_tokens).toBeGreaterThan(0);
    expect(usage.output_tokens).toBeGreaterThan(0);
    await expectBilled(call, key, message.id, usage.cost, ENDPOINT, before);
    const generation = await generationOf(call, key, message.id);
    expect(generation).toMatchObject({ tokens_prompt: usage.input_tokens, tokens_completion: usage.output_tokens });
    // The system prompt went upstream as a system message, before the user's.
    expect(received().at(-1)!.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hello, messages' },
    ]);
  });

  it('works for a model served by the Anthropic-native adapter too', async () => {
    const message = await client.messages.create({ model: 'sim/claude-echo', max_tokens: 64, messages: [{ role: 'user', content: 'Hello, claude' }] });
    expect(message).toMatchObject({ model: 'sim/claude-echo', stop_reason: 'end_turn', content: [{ type: 'text', text: 'Echo: Hello, claude' }] });
    expect((message.usage as unknown as { cost: number }).cost).toBe((await generationOf(call, key, message.id)).total_cost);
  });

  it('streams every event in order; the final message equals the non-streamed one, billed its cost', async () => {
    const params = { model: 'sim/echo', max_tokens: 64, messages: [{ role: 'user' as const, content: 'Stream this, please' }] };
    const plain = await client.messages.create(params);

    const before = await creditsOf(call, key);
    const stream = client.messages.stream(params);
    const types: string[] = [];
    let deltaUsage: (Anthropic.MessageDeltaUsage & { cost: number }) | undefined;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'message_delta') deltaUsage = event.usage as Anthropic.MessageDeltaUsage & { cost: number };
    }
    const final = await stream.finalMessage();
    expect(types).toEqual([
      'message_start',
      'content_block_start',
      ...types.slice(2, -3).map(() => 'content_block_delta'),
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(final.id).toMatch(/^gen-/);
    expect(final.id).not.toBe(plain.id);
    // The SDK's own additions to a streamed message (parsed_output, stop_details) aside.
    const {
      id: _id,
      usage: finalUsage,
      parsed_output: _parsed,
      stop_details: _details,
      ...finalShape
    } = final as Anthropic.Message & { parsed_output?: unknown };
    const { id: _plainId, usage: plainUsage, ...plainShape } = plain;
    expect(finalShape).toEqual(plainShape);
    expect({ input: finalUsage.input_tokens, output: finalUsage.output_tokens }).toEqual({ input: plainUsage.input_tokens, output: plainUsage.output_tokens });
    expect(deltaUsage!.cost).toBe((plainUsage as unknown as { cost: number }).cost);
    await expectBilled(call, key, final.id, deltaUsage!.cost, ENDPOINT, before);
  });

  it('sends the ping event and the generation id header on the raw stream', async () => {
    const { headers, frames } = await rawStream(
      gw.url,
      '/messages',
      key,
      { model: 'sim/echo', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'Raw' }] },
      {
        'anthropic-version': '2023-06-01',
      },
    );
    expect(frames.map((f) => f.event)).toEqual([
      'message_start',
      'ping',
      'content_block_start',
      ...frames.slice(3, -3).map(() => 'content_block_delta'),
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    for (const frame of frames) expect(frame.data.type).toBe(frame.event);
    const id = headers.get('x-svc-generation-id');
    expect(frames[0].data.message.id).toBe(id);
    const text = frames
      .filter((f) => f.event === 'content_block_delta')
      .map((f) => f.data.delta.text)
      .join('');
    expect(text).toBe('Echo: Raw');
    expect(frames.at(-2)!.data).toMatchObject({ delta: { stop_reason: 'end_turn' }, usage: { output_tokens: expect.any(Number) } });
    expect(frames.at(-2)!.data.usage.cost).toBe((await generationOf(call, key, id!)).total_cost);
  });

  it('calls a tool, then takes its result in the next turn', async () => {
    const tools: Anthropic.Tool[] = [
      {
        name: 'get_weather',
        description: 'The weather in a city',
        input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
    ];
    const before = await creditsOf(call, key);
    const first = await client.messages.create({
      model: 'sim/echo',
      max_tokens: 256,
      tools,
      messages: [{ role: 'user', content: 'Weather in Paris?\n#sim {"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}' }],
    });
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')!;
    expect(use).toMatchObject({ type: 'tool_use', name: 'get_weather', input: { city: 'Paris' }, id: expect.any(String) });
    await expectBilled(call, key, first.id, (first.usage as unknown as { cost: number }).cost, ENDPOINT, before);
    expect(received().at(-1)!.tools).toEqual([
      { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: tools[0].input_schema } },
    ]);

    const second = await client.messages.create({
      model: 'sim/echo',
      max_tokens: 256,
      tools,
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Sunny, 21 C' }] },
      ],
    });
    expect(second.stop_reason).toBe('end_turn');
    expect(second.content).toEqual([{ type: 'text', text: 'Echo: Weather in Paris?' }]);
    // Upstream, the tool call and its result as chat messages.
    expect(received().at(-1)!.messages).toEqual([
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [{ id: use.id, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: use.id, content: 'Sunny, 21 C' },
    ]);
  });

  it('streams a tool call as a tool_use block the SDK assembles', async () => {
    const stream = client.messages.stream({
      model: 'sim/echo',
      max_tokens: 256,
      tools: [{ name: 'lookup', input_schema: { type: 'object', properties: { q: { type: 'string' } } } }],
      messages: [{ role: 'user', content: 'Look it up\n#sim {"tool_call": {"name": "lookup", "arguments": {"q": "gateways"}}}' }],
    });
    const final = await stream.finalMessage();
    expect(final.stop_reason).toBe('tool_use');
    expect(final.content).toEqual([{ type: 'tool_use', id: expect.any(String), name: 'lookup', input: { q: 'gateways' } }]);
  });

  it('returns a thinking block when thinking is enabled and the model reasons', async () => {
    const before = await creditsOf(call, key);
    const message = await client.messages.create({
      model: 'sim/echo',
      max_tokens: 2048,
      thinking: { type: 'enabled', budget_tokens: 1024 },
      messages: [{ role: 'user', content: 'Think first\n#sim {"reasoning_tokens": 10}' }],
    });
    expect(message.content.map((b) => b.type)).toEqual(['thinking', 'text']);
    const thinking = message.content[0] as Anthropic.ThinkingBlock;
    expect(thinking.thinking.length).toBeGreaterThan(0);
    expect(message.content[1]).toEqual({ type: 'text', text: 'Echo: Think first' });
    await expectBilled(call, key, message.id, (message.usage as unknown as { cost: number }).cost, ENDPOINT, before);

    // Through the Anthropic-native adapter, the budget reaches the upstream as it was sent.
    const native = await client.messages.create({
      model: 'sim/claude-echo',
      max_tokens: 2048,
      thinking: { type: 'enabled', budget_tokens: 1024 },
      messages: [{ role: 'user', content: 'Think first\n#sim {"reasoning_tokens": 10}' }],
    });
    expect(received().at(-1)).toMatchObject({ max_tokens: 2048, thinking: { type: 'enabled', budget_tokens: 1024 } });
    expect(native.content.map((b) => b.type)).toEqual(['thinking', 'text']);

    const streamed = await client.messages
      .stream({
        model: 'sim/echo',
        max_tokens: 2048,
        thinking: { type: 'enabled', budget_tokens: 1024 },
        messages: [{ role: 'user', content: 'Think first\n#sim {"reasoning_tokens": 10}' }],
      })
      .finalMessage();
    expect(streamed.content).toEqual(message.content);
  });

  it('answers a repeated request from the response cache, with zero usage and nothing billed', async () => {
    const body = { model: 'sim/echo', max_tokens: 32, messages: [{ role: 'user', content: 'Cache me' }] };
    const headers = { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'x-svc-cache': 'true' };
    const first = await call('POST', '/messages', { body, headers });
    expect(first.status).toBe(200);
    expect(first.headers.get('x-svc-cache-status')).toBe('MISS');
    const before = await creditsOf(call, key);
    const hit = await call('POST', '/messages', { body, headers });
    expect(hit.headers.get('x-svc-cache-status')).toBe('HIT');
    expect(hit.headers.get('x-svc-cache-source-id')).toBe(first.json.id);
    expect(hit.json).toEqual({
      ...first.json,
      id: hit.headers.get('x-svc-generation-id'),
      usage: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, cost: 0 },
    });
    expect(await creditsOf(call, key)).toEqual(before);
  });

  describe('count_tokens', () => {
    it('counts the prompt as the gateway bills it, without billing anything', async () => {
      const params = { model: 'sim/echo', system: 'You count.', messages: [{ role: 'user' as const, content: 'How many tokens is this sentence?' }] };
      const before = await creditsOf(call, key);
      const counted = await client.messages.countTokens(params);
      expect(counted.input_tokens).toBeGreaterThan(0);
      expect(await creditsOf(call, key)).toEqual(before);

      const message = await client.messages.create({ ...params, max_tokens: 32 });
      expect((await generationOf(call, key, message.id)).tokens_prompt).toBe(counted.input_tokens);
      expect(message.usage.input_tokens).toBe(counted.input_tokens);
    });

    it('answers 404 in the vendor shape for a model the key cannot use', async () => {
      const err = await errorOf(client.messages.countTokens({ model: 'sim/nope', messages: [{ role: 'user', content: 'hi' }] }));
      expect(err).toBeInstanceOf(Anthropic.NotFoundError);
      expect(err.error).toMatchObject({ type: 'error', error: { type: 'not_found_error', message: expect.stringContaining('sim/nope') } });
    });

    it('answers 400 in the vendor shape for a malformed request', async () => {
      const r = await call('POST', '/messages/count_tokens', { key, body: { model: 'sim/echo', messages: 'hi' } });
      expect(r.status).toBe(400);
      expect(r.json).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringContaining('messages'), param: 'messages' } });
    });
  });

  describe('errors in the vendor shape, nothing billed', () => {
    it('401 for an unknown key (authentication_error)', async () => {
      const stranger = new Anthropic({ baseURL: gw.url.replace(/\/v1$/, ''), apiKey: `svc_test_${'x'.repeat(40)}`, maxRetries: 0 });
      const err = await errorOf(stranger.messages.create({ model: 'sim/echo', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }));
      expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
      expect(err.status).toBe(401);
      expect(err.error).toMatchObject({ type: 'error', error: { type: 'authentication_error', message: expect.any(String) } });
      // No key at all: the guard's answer, in the same shape.
      const missing = await call('POST', '/messages', { body: { model: 'sim/echo', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] } });
      expect(missing.status).toBe(401);
      expect(missing.json).toMatchObject({ type: 'error', error: { type: 'authentication_error', code: 'missing_api_key' } });
    });

    it('402 billing_error for an account without credits', async () => {
      const { key: broke } = await accountWithKey(gw, 0);
      const poor = new Anthropic({ baseURL: gw.url.replace(/\/v1$/, ''), apiKey: broke, maxRetries: 0 });
      const before = await creditsOf(call, broke);
      const err = await errorOf(poor.messages.create({ model: 'sim/echo', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }));
      expect(err.status).toBe(402);
      expect(err.error).toMatchObject({ type: 'error', error: { type: 'billing_error', message: expect.stringContaining('balance') } });
      expect(await creditsOf(call, broke)).toEqual(before);
    });

    it('429 rate_limit_error when the key is over its requests per minute', async () => {
      const { key: limited } = await accountWithKey(gw, 1, { rpm_limit: 1 });
      const slow = new Anthropic({ baseURL: gw.url.replace(/\/v1$/, ''), apiKey: limited, maxRetries: 0 });
      await slow.messages.create({ model: 'sim/echo', max_tokens: 16, messages: [{ role: 'user', content: 'one' }] });
      const err = await errorOf(slow.messages.create({ model: 'sim/echo', max_tokens: 16, messages: [{ role: 'user', content: 'two' }] }));
      expect(err).toBeInstanceOf(Anthropic.RateLimitError);
      expect(err.error).toMatchObject({ type: 'error', error: { type: 'rate_limit_error', code: 'requests_limit_exceeded' } });
      expect(Number(err.headers?.get('retry-after'))).toBeGreaterThanOrEqual(1);
    });

    it.each<[string, unknown, string, RegExp]>([
      ['a missing model', { max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }, 'model', /model/],
      ['a missing max_tokens', { model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }] }, 'max_tokens', /max_tokens/],
      ['a bad role', { model: 'sim/echo', max_tokens: 16, messages: [{ role: 'wizard', content: 'hi' }] }, 'messages[0].role', /role/],
      [
        'a thinking budget not below max_tokens',
        { model: 'sim/echo', max_tokens: 1024, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'hi' }] },
        'thinking.budget_tokens',
        /less than max_tokens/,
      ],
      [
        'a web_search server tool with a max_uses of 0',
        {
          model: 'sim/echo',
          max_tokens: 16,
          tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 0 }],
          messages: [{ role: 'user', content: 'hi' }],
        },
        'tools[0].max_uses',
        /max_uses/,
      ],
    ])('400 invalid_request_error naming the field for %s', async (_, body, param, message) => {
      const before = await creditsOf(call, key);
      const err = await errorOf(client.messages.create(body as Anthropic.MessageCreateParamsNonStreaming));
      expect(err).toBeInstanceOf(Anthropic.BadRequestError);
      expect(err.error).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringMatching(message), param } });
      expect(await creditsOf(call, key)).toEqual(before);
    });

    it.each<[string, string]>([
      ['an array', '[1, 2]'],
      ['a string', '"hello"'],
      ['null', 'null'],
    ])('400 for a body that is %s, not a JSON object', async (_, body) => {
      const before = await creditsOf(call, key);
      const r = await call('POST', '/messages', { key, body, headers: { 'content-type': 'application/json' } });
      expect(r.status).toBe(400);
      expect(r.json).toEqual({
        type: 'error',
        error: { type: 'invalid_request_error', code: 'invalid_body', message: expect.stringContaining('JSON object') },
      });
      expect(await creditsOf(call, key)).toEqual(before);
    });

    it('400 for a tool the model cannot use (the chat rules apply)', async () => {
      const err = await errorOf(
        client.messages.create({
          model: 'sim/small-8k',
          max_tokens: 16,
          tools: [{ name: 'f', input_schema: { type: 'object' } }],
          messages: [{ role: 'user', content: 'hi' }],
        }),
      );
      expect(err.status).toBe(400);
      expect(err.error).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', code: 'unsupported_parameter', param: 'tools' } });
    });

    it('an upstream failure is the vendor shape too, and not billed', async () => {
      const before = await creditsOf(call, key);
      const err = await errorOf(
        client.messages.create({ model: 'sim/echo', max_tokens: 16, messages: [{ role: 'user', content: 'Fail\n#sim {"fail": 503}' }] }),
      );
      expect(err.status).toBe(503);
      expect(err.error).toMatchObject({ type: 'error', error: { type: 'overloaded_error' } });
      expect(await creditsOf(call, key)).toEqual(before);
    });

    it('other routes keep the OpenAI shape', async () => {
      const r = await call('POST', '/chat/completions', { body: { model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }] } });
      expect(r.status).toBe(401);
      expect(r.json.error).toMatchObject({ type: 'authentication_error' });
      expect(r.json.type).toBeUndefined();
    });
  });
});
