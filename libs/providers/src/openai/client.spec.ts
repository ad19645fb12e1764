import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { anthropic } from '../anthropic';
import { normalizeUsage } from '../provider';
import { ProviderError } from '../provider-error';
import { startSimulator, type Simulator } from '../simulator';
import { countTextTokens } from '../tokens';
import { STREAM_END_GRACE_MS } from '../transport';
import type { ChatChunk } from '../wire';
import type { OpenAiCompatibleOptions } from './connection';
import { openai } from './index';

let sim: Simulator;
beforeAll(async () => {
  sim = await startSimulator();
});
afterAll(() => sim.close());

const provider = (options: Partial<OpenAiCompatibleOptions> = {}) => openai.client({ baseUrl: sim.url, apiKey: 'sk-test', ...options });

const chatBody = (text: string, extra: object = {}) => ({
  model: 'sim/echo',
  messages: [{ role: 'user', content: text }],
  ...extra,
});

/** Every chunk the stream yields, and the error that ended it if any. */
async function drain(stream: AsyncIterable<ChatChunk>) {
  const chunks: ChatChunk[] = [];
  let error: unknown;
  try {
    for await (const chunk of stream) chunks.push(chunk);
  } catch (e) {
    error = e;
  }
  return { chunks, error };
}

async function failure(promise: Promise<unknown>): Promise<ProviderError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ProviderError);
  return error as ProviderError;
}

describe('chat against the simulator', () => {
  it('returns the parsed response, normalized usage and the latency', async () => {
    const result = await provider().chat(chatBody('hi\n#sim {"cached_tokens": 8, "reasoning_tokens": 5, "delay_ms": 30}'));
    expect(result.response.choices[0].message.content).toBe('Echo: hi');
    const usage = result.response.usage!;
    expect(result.usage).toEqual({
      promptTokens: usage.prompt_tokens,
      completionTokens: usage.completion_tokens,
      cachedTokens: 8,
      reasoningTokens: 5,
    });
    expect(result.latencyMs).toBeGreaterThanOrEqual(25);
  });

  it.each([
    [503, true],
    [502, true],
    [429, true],
    [400, false],
    [404, false],
  ])('maps an upstream %i to an http ProviderError (retryable: %s)', async (status, retryable) => {
    const error = await failure(provider().chat(chatBody(`#sim {"fail": ${status}}`)));
    expect(error).toMatchObject({ kind: 'http', status, retryable, message: `simulated failure (#sim fail ${status})` });
    expect(error.upstreamBody).toMatchObject({ error: { code: 'sim_failure' } });
  });

  it('times out with a retryable 504 when the upstream is slower than timeoutMs', async () => {
    const started = Date.now();
    const error = await failure(provider({ timeoutMs: 100 }).chat(chatBody('#sim {"delay_ms": 2000}')));
    expect(error).toMatchObject({ kind: 'timeout', status: 504, retryable: true });
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('maps a dropped connection to a retryable network 502', async () => {
    const error = await failure(provider().chat(chatBody('#sim {"cut_after_chunks": 0}')));
    expect(error).toMatchObject({ kind: 'network', status: 502, retryable: true });
  });

  it('maps a refused connection to a network 502', async () => {
    const closed = await startSimulator();
    await closed.close();
    const error = await failure(provider({ baseUrl: closed.url }).chat(chatBody('hi')));
    expect(error).toMatchObject({ kind: 'network', status: 502, message: expect.stringContaining('ECONNREFUSED') });
  });

  it("rethrows the caller's own abort reason rather than a ProviderError", async () => {
    const controller = new AbortController();
    const call = provider().chat(chatBody('#sim {"delay_ms": 2000}'), controller.signal);
    const reason = new Error('client gone');
    setTimeout(() => controller.abort(reason), 20);
    await expect(call).rejects.toBe(reason);
  });
});

describe('chat_stream against the simulator', () => {
  it('yields every chunk and always the usage chunk, even when the caller did not ask for usage', async () => {
    const { chunks, error } = await drain(provider().chat_stream(chatBody('stream me\n#sim {"reasoning_tokens": 2}')));
    expect(error).toBeUndefined();
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Echo: stream me');
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(normalizeUsage(last.usage)).toMatchObject({ reasoningTokens: 2, completionTokens: 2 + countTextTokens('Echo: stream me') });
  });

  it('throws a network ProviderError after yielding the chunks of a cut stream', async () => {
    const { chunks, error } = await drain(provider().chat_stream(chatBody('a b c d e\n#sim {"cut_after_chunks": 3}')));
    expect(chunks).toHaveLength(4);
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({ kind: 'network', status: 502, retryable: true });
  });

  it('throws the upstream error on the first read, before any chunk', async () => {
    const { chunks, error } = await drain(provider().chat_stream(chatBody('#sim {"fail": 503}')));
    expect(chunks).toEqual([]);
    expect(error).toMatchObject({ kind: 'http', status: 503, retryable: true });
  });

  it('times out when the stream goes silent longer than timeoutMs', async () => {
    const { chunks, error } = await drain(provider({ timeoutMs: 500 }).chat_stream(chatBody('slow\n#sim {"chunk_delay_ms": 1500}')));
    expect(chunks).toHaveLength(1);
    expect(error).toMatchObject({ kind: 'timeout', status: 504 });
  });

  it('does not count a slow consumer against the timeout', async () => {
    // The timeout leaves a loaded machine room to answer and read; each pause exceeds it.
    const stream = provider({ timeoutMs: 500 }).chat_stream(chatBody('one two three'));
    const chunks: ChatChunk[] = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
      if (chunks.length <= 2) await sleep(600);
    }
    expect(chunks.at(-1)!.usage).toBeTruthy();
  });
});

describe('embeddings against the simulator', () => {
  it('returns the vectors and the prompt tokens', async () => {
    const result = await provider().embed({ model: 'sim/embed', input: ['a', 'b'], dimensions: 4 });
    expect(result.response.data.map((d) => (d.embedding as number[]).length)).toEqual([4, 4]);
    expect(result.usage).toEqual({ promptTokens: 2, completionTokens: 0, cachedTokens: 0, reasoningTokens: 0 });
  });
});

describe('against a scripted upstream', () => {
  let upstream: Server;
  let baseUrl: string;
  let respond: (res: ServerResponse) => void | Promise<void>;
  const received: Array<{ url?: string; headers: IncomingHttpHeaders; body: Record<string, unknown> }> = [];
  let connections = 0;

  beforeAll(async () => {
    upstream = createServer(async (req, res) => {
      let text = '';
      for await (const part of req) text += part;
      received.push({ url: req.url, headers: req.headers, body: JSON.parse(text) });
      await respond(res);
    });
    upstream.on('connection', () => connections++);
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1/`;
  });
  afterAll(async () => {
    upstream.closeAllConnections();
    await new Promise((resolve) => upstream.close(resolve));
  });
  beforeEach(() => {
    received.length = 0;
  });

  const scripted = (options: Partial<OpenAiCompatibleOptions> = {}) => provider({ baseUrl, ...options });
  const json =
    (status: number, body: string, type = 'application/json') =>
    (res: ServerResponse) => {
      res.writeHead(status, { 'content-type': type });
      res.end(body);
    };
  const chunk = (content: string) =>
    JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: null }] });
  const sse =
    (pieces: Array<string | Buffer>, pauseMs = 0) =>
    async (res: ServerResponse) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const piece of pieces) {
        res.write(piece);
        if (pauseMs) await sleep(pauseMs);
      }
      res.end();
    };
  const completionJson = JSON.stringify({ id: 'x', object: 'chat.completion', created: 1, model: 'm', choices: [] });

  it('forwards only the configured request fields, with the key and extra headers', async () => {
    respond = json(200, completionJson);
    const body = chatBody('hi', { temperature: 0.2, top_k: 5, models: ['fallback'], plugins: [], stream: true, stream_options: {} });
    await scripted({ headers: { 'x-title': 'svc' } }).chat(body);
    await scripted({ dialect: 'router' }).chat(body);
    expect(received[0].body).toEqual({ model: 'sim/echo', messages: body.messages, temperature: 0.2 });
    expect(received[0].headers).toMatchObject({
      authorization: 'Bearer sk-test',
      'x-title': 'svc',
      accept: 'application/json',
      'user-agent': 'svc-gateway/0.1',
    });
    expect(received[1].body).toEqual({ model: 'sim/echo', messages: body.messages, temperature: 0.2, top_k: 5 });
  });

  it('gives OpenAI reasoning as reasoning_effort, and a router the reasoning fields as they are', async () => {
    respond = json(200, completionJson);
    const reasoning = { effort: 'high', max_tokens: 100 };
    const body = chatBody('hi', { reasoning, include_reasoning: true });
    await scripted().chat(body);
    await scripted().chat({ ...body, reasoning_effort: 'low' });
    await scripted({ dialect: 'router' }).chat(body);
    expect(received[0].body).toEqual({ model: 'sim/echo', messages: body.messages, reasoning_effort: 'high' });
    expect(received[1].body).toEqual({ model: 'sim/echo', messages: body.messages, reasoning_effort: 'low' });
    expect(received[2].body).toEqual({ model: 'sim/echo', messages: body.messages, reasoning, include_reasoning: true });
  });

  it('asks for a stream with usage, keeping the other stream options', async () => {
    respond = sse(['data: [DONE]\n\n']);
    await drain(scripted().chat_stream(chatBody('hi', { stream_options: { include_obfuscation: false } })));
    expect(received[0].body).toMatchObject({ stream: true, stream_options: { include_obfuscation: false, include_usage: true } });
    expect(received[0].headers.accept).toBe('text/event-stream');
  });

  it('parses events split across TCP packets, with comments and CRLF line ends', async () => {
    const wire = `: ping\r\n\r\ndata: ${chunk('héllo ')}\r\n\r\ndata: ${chunk('wörld 🙂')}\r\n\r\ndata: [DONE]\r\n\r\n`;
    const bytes = Buffer.from(wire);
    const packets: Buffer[] = [];
    for (let i = 0; i < bytes.length; i += 7) packets.push(bytes.subarray(i, i + 7)); // splits the multi-byte characters too
    respond = sse(packets, 1);
    const { chunks, error } = await drain(scripted().chat_stream(chatBody('hi')));
    expect(error).toBeUndefined();
    expect(chunks.map((c) => c.choices[0].delta.content)).toEqual(['héllo ', 'wörld 🙂']);
  });

  it('closes the upstream request when the consumer stops early', async () => {
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
    respond = (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${chunk('first')}\n\n`);
      res.on('close', upstreamClosed); // the upstream never ends this stream by itself
    };
    for await (const received of scripted().chat_stream(chatBody('hi'))) {
      expect(received.choices[0].delta.content).toBe('first');
      break;
    }
    await closed;
  });

  it('keeps reusing one connection after error statuses: their bodies are read to the end', async () => {
    const answers = [json(200, completionJson), json(503, '{"error":{"message":"busy"}}'), json(502, 'Bad Gateway', 'text/plain'), json(200, completionJson)];
    respond = (res) => answers.shift()!(res);
    const before = connections;
    for (let i = 0; i < 4; i++)
      await scripted()
        .chat(chatBody('hi'))
        .catch(() => undefined);
    expect(received).toHaveLength(4);
    expect(connections - before).toBeLessThanOrEqual(1); // 0 when an earlier test left one idle
  });

  // Issue 14.8: a followed redirect carried the provider key (x-api-key survives undici's
  // cross-origin stripping) and the prompt to whatever origin the Location named.
  it.each([
    ['the OpenAI-compatible adapter', (url: string) => openai.client({ baseUrl: url, apiKey: 'sk-test' }), { authorization: 'Bearer sk-test' }],
    ['the Anthropic adapter', (url: string) => anthropic.client({ baseUrl: url, apiKey: 'sk-ant-test' }), { 'x-api-key': 'sk-ant-test' }],
  ])('%s never follows a redirect, streamed or not: the key and the prompt stay with the provider', async (_name, adapter, key) => {
    const elsewhere: { headers: Record<string, unknown>; body: string }[] = [];
    const trap = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        elsewhere.push({ headers: req.headers, body });
        res.writeHead(200, { 'content-type': 'application/json' }).end(completionJson);
      });
    });
    await new Promise<void>((resolve) => trap.listen(0, '127.0.0.1', resolve));
    try {
      const location = `http://127.0.0.1:${(trap.address() as AddressInfo).port}/v1/chat/completions`;
      for (const status of [301, 302, 303, 307, 308]) {
        respond = (res) => {
          res.writeHead(status, { location });
          res.end();
        };
        // A provider failure like a 502: retryable, so a fallback may answer; nothing to bill.
        const error = await failure(adapter(baseUrl).chat(chatBody('the prompt')));
        expect(error).toMatchObject({ kind: 'invalid_response', status: 502, retryable: true });
        const streamed = await drain(adapter(baseUrl).chat_stream(chatBody('the prompt')));
        expect(streamed.chunks).toEqual([]);
        expect(streamed.error).toMatchObject({ kind: 'invalid_response', status: 502, retryable: true });
      }
      // The provider itself was asked, with the key, once per call; the other origin never.
      expect(received).toHaveLength(10);
      for (const r of received) expect(r.headers).toMatchObject(key);
      expect(elsewhere).toEqual([]);
    } finally {
      await new Promise((resolve) => trap.close(resolve));
    }
  });

  it('reads a stream to its end after [DONE], so the connection is kept for the next request', async () => {
    // The end comes a moment after [DONE], in a packet of its own: a reader that left at [DONE]
    // would destroy the body before it, and the socket with it.
    respond = sse([`data: ${chunk('one')}\n\n`, 'data: [DONE]\n\n', ''], 30);
    const before = connections;
    for (let i = 0; i < 3; i++) {
      const { chunks, error } = await drain(scripted().chat_stream(chatBody('hi')));
      expect(error).toBeUndefined();
      expect(chunks.map((c) => c.choices[0]?.delta.content)).toEqual(['one']);
    }
    expect(connections - before).toBeLessThanOrEqual(1); // 0 when an earlier test left one idle
  });

  it('ends cleanly when the body stays open after [DONE]: it is cut after a short grace, and nothing is reported', async () => {
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
    respond = (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${chunk('all')}\n\ndata: [DONE]\n\n`);
      res.on('close', upstreamClosed); // never ended by the upstream
    };
    const started = performance.now();
    const { chunks, error } = await drain(scripted({ timeoutMs: 60_000 }).chat_stream(chatBody('hi')));
    expect(error).toBeUndefined();
    expect(chunks.map((c) => c.choices[0]?.delta.content)).toEqual(['all']);
    expect(performance.now() - started).toBeLessThan(STREAM_END_GRACE_MS + 2000);
    await closed;
  });

  it('treats a stream that ends cleanly without [DONE] as cut short', async () => {
    respond = sse([`data: ${chunk('partial')}\n\n`]);
    const { chunks, error } = await drain(scripted().chat_stream(chatBody('hi')));
    expect(chunks).toHaveLength(1);
    expect(error).toMatchObject({ kind: 'network', status: 502, message: 'upstream stream ended before [DONE]' });
  });

  it('turns an error event inside the stream into an http ProviderError after the earlier chunks', async () => {
    respond = sse([`data: ${chunk('a')}\n\n`, 'data: {"error":{"code":429,"message":"Rate limited upstream"}}\n\n']);
    const { chunks, error } = await drain(scripted().chat_stream(chatBody('hi')));
    expect(chunks).toHaveLength(1);
    expect(error).toMatchObject({ kind: 'http', status: 429, retryable: true, message: 'Rate limited upstream' });
  });

  it('reports a stream event that is not JSON as an invalid response', async () => {
    respond = sse(['data: {not json\n\n']);
    const { error } = await drain(scripted().chat_stream(chatBody('hi')));
    expect(error).toMatchObject({ kind: 'invalid_response', status: 502, retryable: true });
  });

  it.each([
    ['a body that is not JSON', '<html>oops</html>'],
    ['JSON without choices', '{"ok":true}'],
  ])('reports %s with a success status as an invalid response', async (_, body) => {
    respond = json(200, body);
    const error = await failure(scripted().chat(chatBody('hi')));
    expect(error).toMatchObject({ kind: 'invalid_response', status: 502 });
  });

  it('keeps a non-JSON error body as text', async () => {
    respond = json(502, '<html>Bad Gateway</html>', 'text/html');
    const error = await failure(scripted().chat(chatBody('hi')));
    expect(error).toMatchObject({ kind: 'http', status: 502, upstreamBody: '<html>Bad Gateway</html>', message: 'upstream answered HTTP 502' });
  });
});

describe('normalizeUsage', () => {
  it('reads zero for absent or malformed members', () => {
    expect(normalizeUsage(undefined)).toEqual({ promptTokens: 0, completionTokens: 0, cachedTokens: 0, reasoningTokens: 0 });
    expect(normalizeUsage({ prompt_tokens: 5, completion_tokens: 'x', prompt_tokens_details: null })).toEqual({
      promptTokens: 5,
      completionTokens: 0,
      cachedTokens: 0,
      reasoningTokens: 0,
    });
  });
});
