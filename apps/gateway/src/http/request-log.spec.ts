import { PassThrough } from 'node:stream';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { GenerationNotes } from '@svc/metrics';
import { processLog, type LogLevel } from '@svc/platform';
import { installRequestLog, isQuietProbe } from './request-log';

/** The catalog as the log needs it: `sim/echo` is a model, anything else is not. */
const catalog = { get: (id: string) => (id === 'sim/echo' ? ({ id } as never) : undefined) };
const caller = { keyId: 'key-1', accountId: 'acct-1' };

function harness(options: { level?: LogLevel; format?: 'json' | 'pretty' } = {}) {
  const out = new PassThrough();
  const chunks: string[] = [];
  out.on('data', (chunk: Buffer) => chunks.push(chunk.toString('utf8')));
  const notes = new GenerationNotes();
  const fastify = Fastify({
    loggerInstance: processLog({ logLevel: options.level ?? 'info', logFormat: options.format ?? 'json' }, out) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
  });
  installRequestLog(fastify, notes, catalog);
  const text = () => chunks.join('');
  // The request lines (a listening server also says where it listens).
  const lines = () =>
    text()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => 'route' in l);
  return { fastify, notes, text, lines };
}

describe('the request log (issue 22)', () => {
  let fastify: FastifyInstance | undefined;
  afterEach(async () => {
    // fetch keeps its connections open for reuse, and an aborted request's too.
    fastify?.server.closeAllConnections();
    await fastify?.close();
    fastify = undefined;
  });

  it('leaves out the liveness probe and a ready readiness probe, and nothing else', () => {
    expect(isQuietProbe('/health/live', 200)).toBe(true);
    expect(isQuietProbe('/health/ready', 200)).toBe(true);
    expect(isQuietProbe('/health/ready', 503)).toBe(false);
    expect(isQuietProbe('/health', 404)).toBe(false);
    expect(isQuietProbe('/v1/health/live', 404)).toBe(false);
  });

  it('writes one JSON line per request but those probes, with the route template and without the query string', async () => {
    const h = harness();
    fastify = h.fastify;
    let ready = true;
    fastify.get('/health/live', async () => ({ status: 'ok' }));
    fastify.get('/health/ready', async (_request, reply) => reply.status(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready' }));
    fastify.get('/v1/keys/:id', async () => ({ data: [] }));
    await fastify.inject({ method: 'GET', url: '/health/live' });
    await fastify.inject({ method: 'GET', url: '/health/ready' });
    await fastify.inject({ method: 'GET', url: '/v1/keys/key-9?token=abc' });
    ready = false;
    await fastify.inject({ method: 'GET', url: '/health/ready' });
    await fastify.inject({ method: 'GET', url: '/nowhere' });
    const lines = h.lines();
    expect(lines.map((l) => [l.method, l.route, l.path, l.status, l.level])).toEqual([
      ['GET', '/v1/keys/{id}', '/v1/keys/key-9', 200, 30],
      ['GET', '/health/ready', '/health/ready', 503, 50],
      ['GET', 'unmatched', '/nowhere', 404, 30],
    ]);
    expect(lines[0]).toMatchObject({ msg: 'GET /v1/keys/key-9 200', reqId: expect.any(String), time: expect.any(Number) });
    expect(lines[0].latency_ms).toEqual(expect.any(Number));
    expect(h.text()).not.toContain('token=abc');
  });

  it('carries the caller, the catalog model, the provider that answered, the time upstream and the charge, and never the body', async () => {
    const h = harness();
    fastify = h.fastify;
    fastify.post('/v1/chat/completions', async (request, reply) => {
      (request as unknown as { caller: typeof caller }).caller = caller;
      // What the metering pipeline reports, a tick after the body was read: a fallback, then an answer.
      await new Promise((resolve) => setImmediate(resolve));
      h.notes.upstreamFailed('gen-abc', 'first', 0.004);
      h.notes.upstreamAnswered('gen-abc', 'second:byok', 0.008);
      h.notes.charged('gen-abc', 42_123n);
      // Another generation's reports (a job's, another request's) are not this request's.
      h.notes.charged('gen-other', 99n);
      void reply.header('x-svc-generation-id', 'gen-abc');
      return { ok: true };
    });
    const body = { model: 'sim/echo', messages: [{ role: 'user', content: 'the secret platypus prompt' }] };
    // Over a real socket, where Fastify reads the body in the request stream's callbacks.
    const url = await fastify.listen({ port: 0, host: '127.0.0.1' });
    const answer = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(answer.status).toBe(200);
    await answer.arrayBuffer();
    for (let i = 0; i < 100 && h.lines().length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    const [line] = h.lines();
    expect(line).toMatchObject({
      route: '/v1/chat/completions',
      status: 200,
      generation_id: 'gen-abc',
      key_id: 'key-1',
      account_id: 'acct-1',
      model: 'sim/echo',
      provider: 'second:byok',
      upstream_ms: 12,
      cost: 0.000042123,
    });
    expect(h.text()).not.toContain('platypus');
  });

  it('a stream settles after its headers: its line, written when it ends, has the charge', async () => {
    const h = harness();
    fastify = h.fastify;
    fastify.post('/v1/chat/completions', (_request, reply) => {
      reply.raw.writeHead(200, { 'content-type': 'text/event-stream', 'x-svc-generation-id': 'gen-stream' });
      reply.raw.write('data: {}\n\n');
      setTimeout(() => {
        h.notes.upstreamAnswered('gen-stream', 'sim', 0.001);
        h.notes.charged('gen-stream', 7n);
        reply.raw.end('data: [DONE]\n\n');
      }, 20);
      reply.hijack();
    });
    await fastify.inject({ method: 'POST', url: '/v1/chat/completions', payload: { model: 'nope/unknown' } });
    // A hijacked reply's end is not Fastify's: onResponse still runs when the socket's response finishes.
    for (let i = 0; i < 100 && h.lines().length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    const [line] = h.lines();
    expect(line).toMatchObject({ generation_id: 'gen-stream', provider: 'sim', cost: 0.000000007 });
    // A model outside the catalog is not written: a caller's string never becomes a field.
    expect(line.model).toBeUndefined();
    expect(h.text()).not.toContain('nope/unknown');
  });

  it('a client that leaves has its line when it leaves: 499 before any head went out, the head it got after, once each', async () => {
    const h = harness();
    fastify = h.fastify;
    const answered: Array<() => void> = [];
    // The model has not answered yet: nothing is sent until the test lets it.
    fastify.post('/v1/chat/completions', (_request, reply) => {
      answered.push(() => void reply.send({ late: true }));
    });
    // A stream whose head and first frame went out, then nothing more for a while.
    fastify.post('/v1/stream', (_request, reply) => {
      reply.raw.setHeader('x-svc-generation-id', 'gen-left');
      reply.raw.writeHead(200, { 'content-type': 'text/event-stream' });
      reply.raw.write('data: {}\n\n');
      reply.hijack();
    });
    fastify.get('/v1/models', async () => ({ data: [] }));
    const url = await fastify.listen({ port: 0, host: '127.0.0.1' });
    const leave = async (path: string, afterHead: boolean) => {
      const client = new AbortController();
      const response = fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}', signal: client.signal });
      if (afterHead) {
        const res = await response;
        const reader = res.body!.getReader();
        await reader.read();
      } else {
        // The request has reached the route once a handler waits on it.
        for (let i = 0; i < 200 && answered.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 5));
        expect(answered).toHaveLength(1);
      }
      client.abort();
      await response.then((res) => res.arrayBuffer()).catch(() => undefined);
    };
    await leave('/v1/chat/completions', false);
    await leave('/v1/stream', true);
    for (let i = 0; i < 200 && h.lines().length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    // The answer comes after the client has gone: nothing more is written for that request.
    answered[0]();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const lines = h.lines();
    expect(lines.map((l) => [l.path, l.status, l.client_closed, l.level])).toEqual([
      ['/v1/chat/completions', 499, true, 30],
      ['/v1/stream', 200, true, 30],
    ]);
    expect(lines[1]).toMatchObject({ generation_id: 'gen-left', msg: 'POST /v1/stream 200' });
    // A request that ends whole says nothing of the kind.
    await fetch(`${url}/v1/models`).then((res) => res.arrayBuffer());
    for (let i = 0; i < 100 && h.lines().length < 3; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(h.lines()[2]).toMatchObject({ path: '/v1/models', status: 200 });
    expect(h.lines()[2].client_closed).toBeUndefined();
  });

  it("takes a generation's notes once; a request naming no generation has no provider or cost", async () => {
    const h = harness();
    fastify = h.fastify;
    h.notes.charged('gen-1', 5n);
    fastify.get('/v1/models', async () => ({ data: [] }));
    fastify.get('/v1/generation', async (_request, reply) => reply.header('x-svc-generation-id', 'gen-1').send({}));
    await fastify.inject({ method: 'GET', url: '/v1/models' });
    await fastify.inject({ method: 'GET', url: '/v1/generation' });
    await fastify.inject({ method: 'GET', url: '/v1/generation' });
    const [models, first, again] = h.lines();
    expect([models.cost, models.provider, models.upstream_ms]).toEqual([undefined, undefined, undefined]);
    expect(first.cost).toBe(0.000000005);
    expect(again.cost).toBeUndefined();
    expect(h.notes.size).toBe(0);
  });

  it('LOG_LEVEL=warn keeps only the server errors', async () => {
    const h = harness({ level: 'warn' });
    fastify = h.fastify;
    fastify.get('/ok', async () => ({}));
    fastify.get('/broken', async (_request, reply) => reply.status(502).send({}));
    await fastify.inject({ method: 'GET', url: '/ok' });
    await fastify.inject({ method: 'GET', url: '/broken' });
    expect(h.lines().map((l) => [l.path, l.status])).toEqual([['/broken', 502]]);
  });

  it('pretty output is one readable line per request', async () => {
    const h = harness({ format: 'pretty' });
    fastify = h.fastify;
    fastify.get('/v1/models', async () => ({ data: [] }));
    await fastify.inject({ method: 'GET', url: '/v1/models' });
    const lines = h.text().split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: GET \/v1\/models 200 \{.*"route":"\/v1\/models".*\}$/);
  });
});

describe('GenerationNotes', () => {
  it('keeps nothing until a request log takes them, and at most its bound, the oldest going first', () => {
    const notes = new GenerationNotes(2);
    notes.charged('gen-0', 1n);
    expect(notes.size).toBe(0);
    notes.enabled = true;
    notes.charged('gen-1', 1n);
    notes.upstreamAnswered('gen-2', 'sim', 0.5);
    notes.charged('gen-3', 3n);
    expect(notes.size).toBe(2);
    expect(notes.take('gen-1')).toBeUndefined();
    expect(notes.take('gen-2')).toEqual({ provider: 'sim', failedProvider: undefined, upstreamSeconds: 0.5, chargedNano: 0n, charged: false });
    expect(notes.take('gen-3')).toMatchObject({ chargedNano: 3n, charged: true });
  });
});
