import { chatChunks, toChatCompletion, toMessagesRequest } from './client';
import { anthropic } from './index';
import { ProviderError } from '../provider-error';
import { startSimulator, type Simulator } from '../simulator';
import type { SseEvent } from '../sse';
import { countChatPromptTokens, countTextTokens } from '../tokens';
import type { ChatChunk } from '../wire';

const user = (content: unknown) => [{ role: 'user', content }];

describe('request translation (OpenAI chat -> Messages)', () => {
  it('moves system and developer messages to system, and turns parts, tool calls and results into blocks', () => {
    const { request } = toMessagesRequest({
      model: 'claude-x',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'developer', content: [{ type: 'text', text: 'Cite.', cache_control: { type: 'ephemeral' } }] },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Compare' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0=' } },
            { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg', detail: 'high' } },
          ],
        },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        { role: 'user', content: 'And tomorrow?' },
      ],
    });
    expect(request).toEqual({
      model: 'claude-x',
      max_tokens: 4096,
      system: [
        { type: 'text', text: 'Be brief.' },
        { type: 'text', text: 'Cite.', cache_control: { type: 'ephemeral' } },
      ],
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Compare' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0=' } },
            { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
          ],
        },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'call_1', name: 'weather', input: { city: 'Paris' } }] },
        // Tool results first in the user turn that follows the tool call, as the API requires.
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'call_1', content: [{ type: 'text', text: 'sunny' }] },
            { type: 'text', text: 'And tomorrow?' },
          ],
        },
      ],
    });
  });

  it('maps the declared fields and drops what the Messages API has no equivalent for', () => {
    const { request } = toMessagesRequest({
      model: 'm',
      messages: user('hi'),
      max_tokens: 100,
      max_completion_tokens: 50,
      temperature: 0.2,
      top_p: 0.9,
      top_k: 40,
      stop: 'END',
      user: 'user-42',
      seed: 7,
      response_format: { type: 'json_object' },
      plugins: [],
      models: ['fallback'],
      tools: [
        { type: 'function', function: { name: 'f', description: 'does f', parameters: { type: 'object', properties: { a: { type: 'string' } } } } },
        { type: 'function', function: { name: 'g' } },
      ],
      tool_choice: 'required',
      parallel_tool_calls: false,
    });
    expect(request).toEqual({
      model: 'm',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
      max_tokens: 50,
      temperature: 0.2,
      top_p: 0.9,
      top_k: 40,
      stop_sequences: ['END'],
      metadata: { user_id: 'user-42' },
      tools: [
        { name: 'f', description: 'does f', input_schema: { type: 'object', properties: { a: { type: 'string' } } } },
        { name: 'g', input_schema: { type: 'object', properties: {} } },
      ],
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
    });
  });

  it.each([
    ['auto', { type: 'auto' }],
    ['none', { type: 'none' }],
    ['required', { type: 'any' }],
    [
      { type: 'function', function: { name: 'f' } },
      { type: 'tool', name: 'f' },
    ],
  ])('maps tool_choice %p', (choice, expected) => {
    expect(toMessagesRequest({ model: 'm', messages: user('x'), tool_choice: choice }).request.tool_choice).toEqual(expected);
  });

  it.each([
    ['reasoning.max_tokens', { reasoning: { max_tokens: 2000 } }, { type: 'enabled', budget_tokens: 2000 }],
    ['effort high, of max_tokens', { reasoning: { effort: 'high' }, max_tokens: 10_000 }, { type: 'enabled', budget_tokens: 8000 }],
    [':thinking (effort medium), default max_tokens', { reasoning: { effort: 'medium' } }, { type: 'enabled', budget_tokens: 2048 }],
    ['reasoning_effort low, raised to the minimum', { reasoning_effort: 'low' }, { type: 'enabled', budget_tokens: 1024 }],
    ['a budget kept below max_tokens', { reasoning: { max_tokens: 5000 }, max_tokens: 3000 }, { type: 'enabled', budget_tokens: 2999 }],
    ['max_tokens too small for the minimum budget', { reasoning: { effort: 'high' }, max_tokens: 1000 }, undefined],
    ['reasoning.enabled false', { reasoning: { enabled: false } }, undefined],
    ['no reasoning asked', {}, undefined],
  ])('thinking: %s', (_name, fields, expected) => {
    expect(toMessagesRequest({ model: 'm', messages: user('x'), ...fields }).request.thinking).toEqual(expected);
  });

  it('refuses what it cannot express with a non-retryable 400', () => {
    const attempt = () => toMessagesRequest({ model: 'm', messages: user([{ type: 'input_audio', input_audio: { data: 'x', format: 'wav' } }]) });
    expect(attempt).toThrow(ProviderError);
    expect(attempt).toThrow(expect.objectContaining({ status: 400, retryable: false }));
  });
});

describe('answer translation (Messages -> OpenAI chat)', () => {
  const answer = (extra: object) => ({
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    model: 'claude-x',
    content: [],
    stop_reason: 'end_turn',
    usage: {},
    ...extra,
  });

  it('turns text, thinking and tool_use blocks into content, reasoning and tool_calls', () => {
    const completion = toChatCompletion(
      answer({
        content: [
          { type: 'thinking', thinking: 'Let me look.', signature: 's' },
          { type: 'text', text: 'Checking ' },
          { type: 'text', text: 'now.' },
          { type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Paris' } },
        ],
        stop_reason: 'tool_use',
        usage: { input_tokens: 10, cache_read_input_tokens: 20, cache_creation_input_tokens: 5, output_tokens: 30 },
      }),
    );
    expect(completion).toMatchObject({
      id: 'msg_1',
      object: 'chat.completion',
      model: 'claude-x',
      choices: [
        {
          index: 0,
          finish_reason: 'tool_calls',
          message: {
            role: 'assistant',
            content: 'Checking now.',
            reasoning: 'Let me look.',
            tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }],
          },
        },
      ],
      usage: {
        prompt_tokens: 35,
        completion_tokens: 30,
        total_tokens: 65,
        prompt_tokens_details: { cached_tokens: 20, cache_write_tokens: 5 },
        completion_tokens_details: { reasoning_tokens: countTextTokens('Let me look.') },
      },
    });
  });

  it('gives a pure tool call null content, an empty answer "" and hides excluded reasoning', () => {
    const tool = toChatCompletion(answer({ content: [{ type: 'tool_use', id: 't', name: 'f', input: {} }] }));
    expect(tool.choices[0].message).toMatchObject({ content: null, tool_calls: [{ function: { arguments: '{}' } }] });
    expect(toChatCompletion(answer({})).choices[0].message.content).toBe('');
    const hidden = toChatCompletion(answer({ content: [{ type: 'thinking', thinking: 'secret' }] }), { excludeReasoning: true });
    expect(hidden.choices[0].message.reasoning).toBeUndefined();
  });

  it.each([
    ['end_turn', 'stop'],
    ['stop_sequence', 'stop'],
    ['max_tokens', 'length'],
    ['tool_use', 'tool_calls'],
    ['refusal', 'content_filter'],
  ])('stop_reason %s -> finish_reason %s', (stop, finish) => {
    expect(toChatCompletion(answer({ stop_reason: stop })).choices[0].finish_reason).toBe(finish);
  });
});

describe('stream translation (Messages events -> OpenAI chunks)', () => {
  const ev = (data: object): SseEvent => ({ event: (data as { type: string }).type, data: JSON.stringify(data) });
  async function* source(events: SseEvent[]) {
    yield* events;
  }
  async function collect(events: SseEvent[]) {
    const chunks: ChatChunk[] = [];
    try {
      for await (const chunk of chatChunks(source(events))) chunks.push(chunk);
    } catch (error) {
      return { chunks, error };
    }
    return { chunks, error: undefined };
  }
  const START = [
    ev({
      type: 'message_start',
      message: { id: 'msg_9', model: 'claude-x', content: [], usage: { input_tokens: 12, cache_read_input_tokens: 3, output_tokens: 1 } },
    }),
    ev({ type: 'ping' }),
  ];
  const BLOCKS = [
    ev({ type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '' } }),
    ev({ type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'hmm' } }),
    ev({ type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'sig' } }),
    ev({ type: 'content_block_stop', index: 0 }),
    ev({ type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } }),
    ev({ type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: 'Hello' } }),
    ev({ type: 'content_block_stop', index: 1 }),
    ev({ type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: 'toolu_1', name: 'f', input: {} } }),
    ev({ type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '' } }),
    ev({ type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '{"a":' } }),
    ev({ type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '1}' } }),
    ev({ type: 'content_block_stop', index: 2 }),
  ];
  const END = [
    ev({ type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 25 } }),
    ev({ type: 'message_stop' }),
  ];

  it('yields the role chunk, one chunk per delta, the finish chunk and the usage chunk', async () => {
    const { chunks, error } = await collect([...START, ...BLOCKS, ...END]);
    expect(error).toBeUndefined();
    expect(chunks.every((c) => c.id === 'msg_9' && c.model === 'claude-x' && c.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks.map((c) => c.choices[0]?.delta ?? null)).toEqual([
      { role: 'assistant', content: '' },
      { reasoning: 'hmm' },
      { content: 'Hello' },
      { tool_calls: [{ index: 0, id: 'toolu_1', type: 'function', function: { name: 'f', arguments: '' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '1}' } }] },
      {},
      null,
    ]);
    expect(chunks.at(-2)!.choices[0].finish_reason).toBe('tool_calls');
    expect(chunks.at(-1)).toMatchObject({
      choices: [],
      usage: { prompt_tokens: 15, completion_tokens: 25, total_tokens: 40, prompt_tokens_details: { cached_tokens: 3 } },
    });
  });

  it('a stream that ends without message_stop yields what arrived, then throws a network error', async () => {
    const { chunks, error } = await collect([...START, ...BLOCKS.slice(0, 6)]);
    expect(chunks.map((c) => c.choices[0].delta)).toEqual([{ role: 'assistant', content: '' }, { reasoning: 'hmm' }, { content: 'Hello' }]);
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({ kind: 'network', status: 502, retryable: true });
  });

  it('an error event throws an http error with the status of its type', async () => {
    const overloaded = ev({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
    const { chunks, error } = await collect([...START, overloaded]);
    expect(chunks).toHaveLength(1);
    expect(error).toMatchObject({ kind: 'http', status: 529, retryable: true, message: 'Overloaded' });
    const invalid = ev({ type: 'error', error: { type: 'invalid_request_error', message: 'bad' } });
    expect((await collect([...START, invalid])).error).toMatchObject({ status: 400, retryable: false });
  });
});

describe('the Anthropic provider against the simulated upstream', () => {
  let sim: Simulator;
  let provider: ReturnType<typeof anthropic.client>;
  beforeAll(async () => {
    sim = await startSimulator();
    provider = anthropic.client({ baseUrl: sim.url, apiKey: 'sk-ant-test' });
  });
  afterAll(() => sim.close());

  const request = (text: string, extra: object = {}) => ({ model: 'sim/claude-echo', messages: [{ role: 'user', content: text }], ...extra });

  it('answers in the OpenAI shape with the usage the simulator counts for chat', async () => {
    const text = 'Hello Anthropic\n#sim {"cached_tokens": 4, "reasoning_tokens": 3}';
    const { response, usage, latencyMs } = await provider.chat(request(text));
    expect(response.choices[0]).toMatchObject({ message: { content: 'Echo: Hello Anthropic', reasoning: 'think think think' }, finish_reason: 'stop' });
    const prompt = countChatPromptTokens([{ role: 'user', content: text }]);
    expect(usage).toEqual({ promptTokens: prompt, cachedTokens: 4, completionTokens: 3 + countTextTokens('Echo: Hello Anthropic'), reasoningTokens: 3 });
    expect(latencyMs).toBeGreaterThan(0);
  });

  it('streams the same answer as the non-streamed call, tool calls included', async () => {
    const text = '#sim {"tool_call": {"name": "lookup", "arguments": {"q": "svc gateway", "limit": 3}}, "reasoning_tokens": 2}';
    const whole = await provider.chat(request(text));
    const chunks: ChatChunk[] = [];
    for await (const chunk of provider.chat_stream(request(text))) chunks.push(chunk);
    const args = chunks
      .flatMap((c) => c.choices[0]?.delta.tool_calls ?? [])
      .map((t) => t.function?.arguments ?? '')
      .join('');
    expect(args).toBe(whole.response.choices[0].message.tool_calls![0].function.arguments);
    expect(chunks.map((c) => c.choices[0]?.delta.reasoning ?? '').join('')).toBe('think think');
    expect(chunks.at(-2)!.choices[0].finish_reason).toBe('tool_calls');
    expect(chunks.at(-1)!.usage).toEqual(whole.response.usage);
  });

  it.each([529, 503, 429])('an upstream %i is a retryable http ProviderError', async (status) => {
    await expect(provider.chat(request(`#sim {"fail": ${status}}`))).rejects.toMatchObject({
      kind: 'http',
      status,
      retryable: true,
      message: `simulated failure (#sim fail ${status})`,
    });
  });

  it('a rejected request is a non-retryable 400, streamed or not', async () => {
    await expect(provider.chat(request('#sim {"bogus": 1}'))).rejects.toMatchObject({ status: 400, retryable: false });
    const stream = provider.chat_stream(request('#sim {"bogus": 1}'));
    await expect(stream.next()).rejects.toMatchObject({ status: 400, retryable: false });
  });

  it('a stream cut short throws a network error after the chunks that arrived', async () => {
    const chunks: ChatChunk[] = [];
    const read = async () => {
      for await (const chunk of provider.chat_stream(request('one two three\n#sim {"cut_after_chunks": 2}'))) chunks.push(chunk);
    };
    await expect(read()).rejects.toMatchObject({ kind: 'network', status: 502 });
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Echo: one ');
  });

  it('a wrong key header is a 401 from the upstream', async () => {
    const anonymous = anthropic.client({ baseUrl: sim.url, apiKey: '' });
    await expect(anonymous.chat(request('hi'))).rejects.toMatchObject({ kind: 'http', status: 401, retryable: false });
  });

  it('times out an upstream that does not answer', async () => {
    const slow = anthropic.client({ baseUrl: sim.url, apiKey: 'k', timeoutMs: 50 });
    await expect(slow.chat(request('#sim {"delay_ms": 500}'))).rejects.toMatchObject({ kind: 'timeout', status: 504 });
  });
});
