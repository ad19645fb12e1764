import { SseParser } from '../sse';
import { countChatPromptTokens, countTextTokens } from '../tokens';
import type { ChatChunk, ChatCompletion, EmbeddingsResponse } from '../wire';
import { startSimulator, type Simulator } from './server';

let sim: Simulator;
beforeAll(async () => {
  sim = await startSimulator();
});
afterAll(() => sim.close());

const HEADERS = { authorization: 'Bearer test-key', 'content-type': 'application/json' };

async function post(path: string, body: unknown, headers: Record<string, string> = HEADERS) {
  const response = await fetch(sim.url + path, { method: 'POST', headers, body: JSON.stringify(body) });
  // Loosely typed on purpose: the tests assert the wire shape themselves.
  const json: any = await response.json();
  return { status: response.status, contentType: response.headers.get('content-type'), body: json };
}

function chatBody(text: string, extra: object = {}) {
  return { model: 'sim/echo', messages: [{ role: 'user', content: text }], ...extra };
}

async function chat(text: string, extra: object = {}): Promise<ChatCompletion> {
  const { status, body } = await post('/chat/completions', chatBody(text, extra));
  expect(status).toBe(200);
  return body as ChatCompletion;
}

/** The raw SSE data of a streamed chat, and whatever error ended the read. */
async function streamChat(text: string, extra: object = {}) {
  const response = await fetch(`${sim.url}/chat/completions`, {
    method: 'POST',
    headers: HEADERS,
    body: JSON.stringify(chatBody(text, { stream: true, ...extra })),
  });
  const parser = new SseParser();
  const data: string[] = [];
  const decoder = new TextDecoder();
  let error: unknown;
  try {
    for await (const bytes of response.body!) data.push(...parser.push(decoder.decode(bytes, { stream: true })).map((e) => e.data));
  } catch (e) {
    error = e;
  }
  const chunks = data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d) as ChatChunk);
  return { response, data, chunks, error };
}

const contentOf = (chunks: ChatChunk[]) => chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');

describe('chat completions', () => {
  it('echoes the last user message with OpenAI usage accounting', async () => {
    const messages = [
      { role: 'system', content: 'You are a test.' },
      { role: 'user', content: 'Hello there' },
    ];
    const { body } = await post('/chat/completions', { model: 'any/upstream-id', messages });
    expect(body).toMatchObject({
      id: expect.stringMatching(/^chatcmpl-sim-\d+$/),
      object: 'chat.completion',
      model: 'any/upstream-id',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Echo: Hello there' }, finish_reason: 'stop' }],
    });
    const promptTokens = countChatPromptTokens(messages);
    const completionTokens = countTextTokens('Echo: Hello there');
    expect(body.usage).toEqual({
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
      prompt_tokens_details: { cached_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0 },
    });
  });

  it('reads text parts of array content', async () => {
    const content = [
      { type: 'text', text: 'look' },
      { type: 'image_url', image_url: { url: 'https://example.com/x.png' } },
      { type: 'text', text: 'here' },
    ];
    const { body } = await post('/chat/completions', { model: 'sim/echo', messages: [{ role: 'user', content }] });
    expect(body.choices[0].message.content).toBe('Echo: look\nhere');
  });

  it('answers the same request with the same content and usage, under a new id', async () => {
    const [a, b] = [await chat('same'), await chat('same')];
    expect(b.choices).toEqual(a.choices);
    expect(b.usage).toEqual(a.usage);
    expect(b.id).not.toBe(a.id);
  });

  it('truncates to max_completion_tokens (preferred) or max_tokens with finish_reason length', async () => {
    const long = 'one two three four five six seven eight';
    const byMaxTokens = await chat(long, { max_tokens: 3 });
    expect(byMaxTokens.usage!.completion_tokens).toBe(3);
    expect(countTextTokens(byMaxTokens.choices[0].message.content!)).toBe(3);
    expect(byMaxTokens.choices[0].finish_reason).toBe('length');
    const both = await chat(long, { max_tokens: 3, max_completion_tokens: 5 });
    expect(both.usage!.completion_tokens).toBe(5);
    expect((await chat('hi', { max_tokens: 100 })).choices[0].finish_reason).toBe('stop');
  });

  it('counts every request it receives', async () => {
    const before = sim.requests;
    await chat('count me');
    await fetch(`${sim.url}/nowhere`);
    expect(sim.requests).toBe(before + 2);
  });
});

describe('#sim directives', () => {
  it('are removed from the echo, and several lines merge', async () => {
    const body = await chat('Hi\n#sim {"cached_tokens": 1}\n#sim {"reasoning_tokens": 1}');
    expect(body.choices[0].message.content).toBe('Echo: Hi');
    expect(body.usage!.prompt_tokens_details!.cached_tokens).toBe(1);
    expect(body.usage!.completion_tokens_details!.reasoning_tokens).toBe(1);
  });

  it('steer only from the last user message', async () => {
    const { status, body } = await post('/chat/completions', {
      model: 'sim/echo',
      messages: [
        { role: 'user', content: '#sim {"fail": 500}' },
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: 'second' },
      ],
    });
    expect(status).toBe(200);
    expect(body.choices[0].message.content).toBe('Echo: second');
  });

  it('fail: answers that status with an OpenAI error body', async () => {
    const unavailable = await post('/chat/completions', chatBody('#sim {"fail": 503}'));
    expect(unavailable.status).toBe(503);
    expect(unavailable.body).toEqual({
      error: { message: expect.any(String), type: 'api_error', code: 'sim_failure', param: null },
    });
    const limited = await post('/chat/completions', chatBody('#sim {"fail": 429}'));
    expect([limited.status, limited.body.error.type]).toEqual([429, 'rate_limit_error']);
  });

  it('fail: a streamed request gets the JSON error before any event', async () => {
    const { status, contentType, body } = await post('/chat/completions', chatBody('#sim {"fail": 502}', { stream: true }));
    expect([status, contentType]).toEqual([502, 'application/json']);
    expect(body.error.code).toBe('sim_failure');
  });

  it('fail_models: fails only the listed upstream models; fail wins over it', async () => {
    const text = '#sim {"fail_models": {"sim/echo": 503, "sim/other": 429}}';
    const echo = await post('/chat/completions', chatBody(text));
    expect([echo.status, echo.body.error.code]).toEqual([503, 'sim_failure']);
    expect(echo.body.error.message).toContain('fail_models sim/echo');
    const other = await post('/chat/completions', { ...chatBody(text), model: 'sim/other' });
    expect(other.status).toBe(429);
    const small = await post('/chat/completions', { ...chatBody(`hi\n${text}`), model: 'sim/small-8k' });
    expect([small.status, small.body.choices[0].message.content]).toEqual([200, 'Echo: hi']);
    const both = await post('/chat/completions', { ...chatBody(`#sim {"fail": 502, "fail_models": {"sim/echo": 503}}`), model: 'sim/small-8k' });
    expect(both.status).toBe(502);
  });

  it('fail_models: a streamed request of a listed model gets the JSON error before any event', async () => {
    const { status, contentType } = await post('/chat/completions', chatBody('#sim {"fail_models": {"sim/echo": 500}}', { stream: true }));
    expect([status, contentType]).toEqual([500, 'application/json']);
  });

  it.each([
    ['#sim {"fail": 503', 'invalid JSON'],
    ['#sim {"fial": 503}', 'unknown directive "fial"'],
    ['#sim {"fail": 200}', 'invalid value for "fail"'],
    ['#sim {"fail_models": {"sim/echo": 200}}', 'invalid value for "fail_models"'],
    ['#sim {"fail_models": [503]}', 'invalid value for "fail_models"'],
    ['#sim {"completion_tokens": -1}', 'invalid value for "completion_tokens"'],
    ['#sim [1]', 'expected a JSON object'],
  ])('reject %s with a 400', async (text, message) => {
    const { status, body } = await post('/chat/completions', chatBody(text));
    expect(status).toBe(400);
    expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_sim_directive' });
    expect(body.error.message).toContain(message);
  });

  it('completion_tokens: content of exactly N tokens, 0 meaning empty', async () => {
    const twelve = await chat('#sim {"completion_tokens": 12}');
    expect(countTextTokens(twelve.choices[0].message.content!)).toBe(12);
    expect(twelve.usage!.completion_tokens).toBe(12);
    const none = await chat('#sim {"completion_tokens": 0}');
    expect(none.choices[0].message.content).toBe('');
    expect(none.usage!.completion_tokens).toBe(0);
  });

  it('delay_ms: waits before answering', async () => {
    const started = Date.now();
    await chat('#sim {"delay_ms": 150}');
    expect(Date.now() - started).toBeGreaterThanOrEqual(145);
  });

  it('cut_after_chunks: a non-streamed request loses its connection without an answer', async () => {
    await expect(
      fetch(`${sim.url}/chat/completions`, {
        method: 'POST',
        headers: HEADERS,
        body: JSON.stringify(chatBody('#sim {"cut_after_chunks": 0}')),
      }),
    ).rejects.toThrow('fetch failed');
  });

  it('reasoning_tokens: reasoning text counted inside completion_tokens', async () => {
    const body = await chat('think first\n#sim {"reasoning_tokens": 10}');
    const { content, reasoning } = body.choices[0].message;
    expect(countTextTokens(reasoning!)).toBe(10);
    expect(body.usage!.completion_tokens).toBe(10 + countTextTokens(content!));
    expect(body.usage!.completion_tokens_details!.reasoning_tokens).toBe(10);
  });

  it('reasoning_tokens: the token cap covers reasoning first, then content', async () => {
    const body = await chat('capped\n#sim {"reasoning_tokens": 10}', { max_tokens: 4 });
    expect(body.choices[0].message).toMatchObject({ content: '', reasoning: 'think think think think' });
    expect(body.usage!.completion_tokens).toBe(4);
    expect(body.choices[0].finish_reason).toBe('length');
  });

  it('cached_tokens: reported, but never above prompt_tokens', async () => {
    expect((await chat('#sim {"cached_tokens": 8}')).usage!.prompt_tokens_details!.cached_tokens).toBe(8);
    const all = await chat('#sim {"cached_tokens": 100000}');
    expect(all.usage!.prompt_tokens_details!.cached_tokens).toBe(all.usage!.prompt_tokens);
  });

  it('tool_call: one tool call, content null, finish_reason tool_calls', async () => {
    const body = await chat('#sim {"tool_call": {"name": "get_weather", "arguments": {"city": "Oslo"}}}');
    const choice = body.choices[0];
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls).toEqual([
      { id: expect.stringMatching(/^call_sim_\d+$/), type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
    ]);
    expect(body.usage!.completion_tokens).toBe(countTextTokens('get_weather') + countTextTokens('{"city":"Oslo"}'));
  });

  it('malformed_json: content is JSON cut short', async () => {
    const content = (await chat('data please\n#sim {"malformed_json": true}')).choices[0].message.content!;
    expect(content).toBe('{"answer": "data please", "items": [1, 2,');
    expect(() => JSON.parse(content)).toThrow();
  });
});

describe('streamed chat completions', () => {
  it('sends a role chunk, content chunks, a finish chunk, a usage chunk and [DONE]', async () => {
    const text = 'stream these words please';
    const { response, data, chunks } = await streamChat(text, { stream_options: { include_usage: true } });
    const plain = await chat(text);

    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(data.at(-1)).toBe('[DONE]');
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    const finish = chunks.at(-2)!;
    expect(finish.choices).toEqual([{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }]);
    const usage = chunks.at(-1)!;
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toEqual(plain.usage);

    const content = chunks.slice(1, -2);
    expect(content.length).toBeGreaterThan(1);
    expect(contentOf(content)).toBe(plain.choices[0].message.content);
    for (const chunk of chunks) {
      expect(chunk).toMatchObject({ id: chunks[0].id, object: 'chat.completion.chunk', model: 'sim/echo' });
    }
    for (const chunk of chunks.slice(0, -1)) expect(chunk.usage).toBeNull();
  });

  it('sends no usage without stream_options.include_usage', async () => {
    const { data, chunks } = await streamChat('no usage');
    expect(data.at(-1)).toBe('[DONE]');
    expect(chunks.at(-1)!.choices[0].finish_reason).toBe('stop');
    expect(chunks.every((c) => !('usage' in c))).toBe(true);
  });

  it('streams reasoning as delta.reasoning before the content', async () => {
    const { chunks } = await streamChat('hm\n#sim {"reasoning_tokens": 3}');
    const reasoning = chunks.map((c) => c.choices[0]?.delta.reasoning ?? '').join('');
    expect(reasoning).toBe('think think think');
    expect(chunks[1].choices[0].delta).toEqual({ reasoning: 'think ' });
    expect(contentOf(chunks)).toBe('Echo: hm');
  });

  it('streams a tool call as a header delta then argument pieces', async () => {
    const args = { city: 'Oslo', days: [1, 2, 3], unit: 'celsius' };
    const { chunks } = await streamChat(`#sim ${JSON.stringify({ tool_call: { name: 'forecast', arguments: args } })}`);
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: null });
    const calls = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    expect(calls[0]).toEqual({ index: 0, id: expect.stringMatching(/^call_sim_/), type: 'function', function: { name: 'forecast', arguments: '' } });
    expect(calls.length).toBeGreaterThan(2);
    expect(calls.map((c) => c.function?.arguments).join('')).toBe(JSON.stringify(args));
    expect(chunks.at(-1)!.choices[0].finish_reason).toBe('tool_calls');
  });

  it('chunk_delay_ms: waits between chunks', async () => {
    const started = Date.now();
    const { chunks } = await streamChat('a b c\n#sim {"chunk_delay_ms": 40}');
    expect(chunks).toHaveLength(6); // role, "Echo: ", "a ", "b ", "c", finish
    expect(Date.now() - started).toBeGreaterThanOrEqual(5 * 40 - 5);
  });

  it('cut_after_chunks: destroys the connection after the role chunk and N output chunks', async () => {
    const { data, chunks, error } = await streamChat('one two three four\n#sim {"cut_after_chunks": 2}');
    expect(error).toMatchObject({ message: 'terminated' });
    expect(data).not.toContain('[DONE]');
    expect(chunks.map((c) => c.choices[0].delta)).toEqual([{ role: 'assistant', content: '' }, { content: 'Echo: ' }, { content: 'one ' }]);
  });

  it('cut_after_chunks: cuts before the finish chunk when the reply is shorter', async () => {
    const { data, chunks, error } = await streamChat('hi\n#sim {"cut_after_chunks": 50}');
    expect(error).toMatchObject({ message: 'terminated' });
    expect(data).not.toContain('[DONE]');
    expect(chunks.every((c) => c.choices[0].finish_reason === null)).toBe(true);
    expect(contentOf(chunks)).toBe('Echo: hi');
  });
});

describe('embeddings', () => {
  const embed = (body: object) => post('/embeddings', { model: 'sim/embed', ...body });
  const norm = (v: number[]) => Math.hypot(...v);

  it('returns deterministic unit vectors of 8 dimensions with token usage', async () => {
    const { status, body } = await embed({ input: ['alpha', 'beta', 'alpha'] });
    expect(status).toBe(200);
    const data = (body as EmbeddingsResponse).data;
    const [a, b, a2] = data.map((d) => d.embedding as number[]);
    expect(data.map((d) => [d.object, d.index])).toEqual([
      ['embedding', 0],
      ['embedding', 1],
      ['embedding', 2],
    ]);
    expect(a).toHaveLength(8);
    expect(norm(a)).toBeCloseTo(1, 5);
    expect(a2).toEqual(a);
    expect(b).not.toEqual(a);
    const tokens = 2 * countTextTokens('alpha') + countTextTokens('beta');
    expect(body).toMatchObject({ object: 'list', model: 'sim/embed', usage: { prompt_tokens: tokens, total_tokens: tokens } });
  });

  it('honours dimensions, and base64 carries the same float32 values', async () => {
    const floats = (await embed({ input: 'x', dimensions: 20 })).body.data[0].embedding as number[];
    expect(floats).toHaveLength(20);
    const base64 = (await embed({ input: 'x', dimensions: 20, encoding_format: 'base64' })).body.data[0].embedding as string;
    expect(Array.from(new Float32Array(Uint8Array.from(Buffer.from(base64, 'base64')).buffer))).toEqual(floats);
  });

  it('counts token-array inputs by their length', async () => {
    const { body } = await embed({ input: [[1, 2, 3], [4]] });
    expect(body.usage.prompt_tokens).toBe(4);
    expect(body.data).toHaveLength(2);
  });

  it('applies the fail directive of a string input', async () => {
    const { status, body } = await embed({ input: ['fine', 'bad\n#sim {"fail": 500}'] });
    expect(status).toBe(500);
    expect(body.error.code).toBe('sim_failure');
  });

  it('rejects a missing input with param "input"', async () => {
    const { status, body } = await embed({});
    expect(status).toBe(400);
    expect(body.error).toMatchObject({ type: 'invalid_request_error', param: 'input' });
  });
});

describe('protocol', () => {
  it('lists the fixed simulated models', async () => {
    const response = await fetch(`${sim.url}/models`, { headers: HEADERS });
    const body: any = await response.json();
    expect(body.object).toBe('list');
    expect(body.data.map((m: { id: string }) => m.id)).toEqual(['sim/echo', 'sim/small-8k', 'sim/embed']);
  });

  it.each<Record<string, string>>([{}, { authorization: 'Bearer ' }, { authorization: 'Basic abc' }])(
    'answers 401 without a bearer token (%p)',
    async (auth) => {
      const { status, body } = await post('/chat/completions', chatBody('hi'), { 'content-type': 'application/json', ...auth });
      expect(status).toBe(401);
      expect(body).toEqual({ error: { message: expect.any(String), type: 'authentication_error', code: 'invalid_api_key', param: null } });
    },
  );

  it('answers 404 with an OpenAI error body for an unknown route', async () => {
    const response = await fetch(`${sim.url}/chat/completion`, { method: 'POST', headers: HEADERS, body: '{}' });
    expect(response.status).toBe(404);
    expect(((await response.json()) as any).error).toMatchObject({ type: 'not_found_error', code: 'unknown_url' });
  });

  it('answers 400 to a body that is not JSON or lacks messages', async () => {
    const response = await fetch(`${sim.url}/chat/completions`, { method: 'POST', headers: HEADERS, body: '{"model":' });
    expect(response.status).toBe(400);
    const { status, body } = await post('/chat/completions', { model: 'sim/echo', messages: [] });
    expect([status, body.error.param]).toEqual([400, 'messages']);
  });

  it('close() ends pending delayed requests at once', async () => {
    const other = await startSimulator();
    const pending = fetch(`${other.url}/chat/completions`, {
      method: 'POST',
      headers: HEADERS,
      body: JSON.stringify(chatBody('#sim {"delay_ms": 10000}')),
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const started = Date.now();
    await other.close();
    await expect(pending).rejects.toThrow('fetch failed');
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
