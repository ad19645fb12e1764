/** The simulator's Anthropic Messages endpoint: wire format, headers and `#sim` directives. */
import { SseParser, type SseEvent } from '../sse';
import { countChatPromptTokens, countTextTokens } from '../tokens';
import { startSimulator, type Simulator } from './server';

let sim: Simulator;
beforeAll(async () => {
  sim = await startSimulator();
});
afterAll(() => sim.close());

const HEADERS = { 'x-api-key': 'test-key', 'anthropic-version': '2023-06-01', 'content-type': 'application/json' };

const body = (text: string, extra: object = {}) => ({
  model: 'sim/claude-echo',
  max_tokens: 256,
  messages: [{ role: 'user', content: text }],
  ...extra,
});

async function post(payload: unknown, headers: Record<string, string> = HEADERS) {
  const response = await fetch(`${sim.url}/messages`, { method: 'POST', headers, body: JSON.stringify(payload) });
  const json: any = await response.json();
  return { status: response.status, body: json };
}

/** Every event of a streamed request, and whatever error ended the read. */
async function stream(text: string, extra: object = {}) {
  const response = await fetch(`${sim.url}/messages`, { method: 'POST', headers: HEADERS, body: JSON.stringify(body(text, { stream: true, ...extra })) });
  const parser = new SseParser();
  const events: SseEvent[] = [];
  const decoder = new TextDecoder();
  let error: unknown;
  try {
    for await (const bytes of response.body!) events.push(...parser.push(decoder.decode(bytes, { stream: true })));
  } catch (e) {
    error = e;
  }
  const data = events.map((e) => JSON.parse(e.data));
  return { response, names: events.map((e) => e.event), data, error };
}

const deltas = (data: any[], type: string, field: string) =>
  data
    .filter((d) => d.type === 'content_block_delta' && d.delta.type === type)
    .map((d) => d.delta[field])
    .join('');

describe('POST /v1/messages', () => {
  it('answers a message with the chat echo, and usage as chat completions count it', async () => {
    const { status, body: message } = await post(body('Hello there', { system: [{ type: 'text', text: 'Be brief.' }] }));
    expect(status).toBe(200);
    const prompt = countChatPromptTokens([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hello there' },
    ]);
    expect(message).toEqual({
      id: 'msg_sim_1',
      type: 'message',
      role: 'assistant',
      model: 'sim/claude-echo',
      content: [{ type: 'text', text: 'Echo: Hello there' }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: prompt, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: countTextTokens('Echo: Hello there') },
    });
  });

  it('counts a tool round trip as the same conversation in the OpenAI format', async () => {
    const messages = [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Weather?' },
          { type: 'image', source: { type: 'url', url: 'https://x/y.png' } },
        ],
      },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'call_1', name: 'weather', input: { city: 'Paris' } }] },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'call_1', content: [{ type: 'text', text: 'sunny' }] },
          { type: 'text', text: 'Thanks' },
        ],
      },
    ];
    const { body: message } = await post({ model: 'm', max_tokens: 100, messages });
    const openai = [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Weather?' },
          { type: 'image_url', image_url: { url: 'https://x/y.png' } },
        ],
      },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
      { role: 'user', content: 'Thanks' },
    ];
    expect(message.usage.input_tokens).toBe(countChatPromptTokens(openai));
    expect(message.content).toEqual([{ type: 'text', text: 'Echo: Thanks' }]);
  });

  it('renders reasoning as a thinking block, cached tokens as cache reads, a tool call as tool_use', async () => {
    const { body: message } = await post(
      body('Plan\n#sim {"reasoning_tokens": 5, "cached_tokens": 4, "tool_call": {"name": "lookup", "arguments": {"q": "x"}}}'),
    );
    expect(message.content).toEqual([
      { type: 'thinking', thinking: 'think think think think think', signature: 'sim-signature' },
      { type: 'tool_use', id: expect.stringMatching(/^toolu_sim_\d+$/), name: 'lookup', input: { q: 'x' } },
    ]);
    expect(message.stop_reason).toBe('tool_use');
    const prompt = countChatPromptTokens([
      { role: 'user', content: 'Plan\n#sim {"reasoning_tokens": 5, "cached_tokens": 4, "tool_call": {"name": "lookup", "arguments": {"q": "x"}}}' },
    ]);
    expect(message.usage).toEqual({
      input_tokens: prompt - 4,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 4,
      output_tokens: 5 + countTextTokens('lookup') + countTextTokens('{"q":"x"}'),
    });
  });

  it('stops at max_tokens with stop_reason max_tokens, and an empty answer has no text block', async () => {
    const capped = (await post(body('#sim {"completion_tokens": 10}', { max_tokens: 3 }))).body;
    expect(capped).toMatchObject({ content: [{ type: 'text', text: 'token token token' }], stop_reason: 'max_tokens', usage: { output_tokens: 3 } });
    const empty = (await post(body('#sim {"completion_tokens": 0}'))).body;
    expect(empty).toMatchObject({ content: [], stop_reason: 'end_turn', usage: { output_tokens: 0 } });
  });

  it('wants x-api-key (401) and anthropic-version (400), and answers in the Anthropic error format', async () => {
    const { 'x-api-key': _key, ...noKey } = HEADERS;
    expect(await post(body('hi'), { ...noKey, authorization: 'Bearer not-enough' })).toEqual({
      status: 401,
      body: { type: 'error', error: { type: 'authentication_error', message: 'x-api-key header is required' } },
    });
    const { 'anthropic-version': _v, ...noVersion } = HEADERS;
    expect(await post(body('hi'), noVersion)).toMatchObject({ status: 400, body: { type: 'error', error: { type: 'invalid_request_error' } } });
    const { max_tokens: _m, ...noMax } = body('hi');
    expect(await post(noMax)).toMatchObject({ status: 400, body: { error: { message: expect.stringContaining('max_tokens') } } });
  });

  it.each([
    [529, 'overloaded_error'],
    [503, 'api_error'],
    [429, 'rate_limit_error'],
  ])('#sim fail %i answers %s', async (status, type) => {
    expect(await post(body(`#sim {"fail": ${status}}`))).toEqual({
      status,
      body: { type: 'error', error: { type, message: `simulated failure (#sim fail ${status})` } },
    });
  });

  it('refuses a bad directive with a 400 in the Anthropic format', async () => {
    expect(await post(body('#sim {"nope": 1}'))).toMatchObject({ status: 400, body: { type: 'error', error: { type: 'invalid_request_error' } } });
  });
});

describe('POST /v1/messages, streamed', () => {
  it('sends the event sequence of the Messages API, with the same text and usage', async () => {
    const { names, data, error } = await stream('Hi you\n#sim {"reasoning_tokens": 2, "cached_tokens": 3}');
    expect(error).toBeUndefined();
    expect(names).toEqual([
      'message_start',
      'ping',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(data.map((d) => d.type)).toEqual(names);
    expect(data[0].message).toMatchObject({
      type: 'message',
      role: 'assistant',
      content: [],
      stop_reason: null,
      usage: { cache_read_input_tokens: 3, output_tokens: 0 },
    });
    expect(data[2].content_block).toEqual({ type: 'thinking', thinking: '', signature: '' });
    expect(deltas(data, 'thinking_delta', 'thinking')).toBe('think think');
    expect(deltas(data, 'signature_delta', 'signature')).toBe('sim-signature');
    expect(deltas(data, 'text_delta', 'text')).toBe('Echo: Hi you');
    expect(data.at(-2)).toEqual({
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { output_tokens: 2 + countTextTokens('Echo: Hi you') },
    });
  });

  it('streams a tool call as tool_use with input_json_delta pieces', async () => {
    const { data } = await stream('#sim {"tool_call": {"name": "lookup", "arguments": {"query": "svc gateway"}}}');
    expect(data.find((d) => d.type === 'content_block_start').content_block).toEqual({ type: 'tool_use', id: expect.any(String), name: 'lookup', input: {} });
    expect(deltas(data, 'input_json_delta', 'partial_json')).toBe('{"query":"svc gateway"}');
    expect(data.at(-2).delta.stop_reason).toBe('tool_use');
  });

  it('cut_after_chunks: closes the connection after message_start and N deltas, without message_delta', async () => {
    const { names, data, error } = await stream('one two three four\n#sim {"cut_after_chunks": 2}');
    expect(error).toBeDefined();
    expect(names).toEqual(['message_start', 'ping', 'content_block_start', 'content_block_delta', 'content_block_delta']);
    expect(deltas(data, 'text_delta', 'text')).toBe('Echo: one ');
  });

  it('chunk_delay_ms: spaces the events out', async () => {
    const started = performance.now();
    const { names } = await stream('a\n#sim {"chunk_delay_ms": 20}');
    expect(performance.now() - started).toBeGreaterThanOrEqual(20 * (names.length - 1) - 5);
  });

  it('fails a streamed request before any event', async () => {
    const response = await fetch(`${sim.url}/messages`, {
      method: 'POST',
      headers: HEADERS,
      body: JSON.stringify(body('#sim {"fail": 529}', { stream: true })),
    });
    expect(response.status).toBe(529);
    expect(response.headers.get('content-type')).toContain('application/json');
  });
});
