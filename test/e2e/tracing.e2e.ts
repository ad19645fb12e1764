import OpenAI, { toFile } from 'openai';
import { randomBytes } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { usdToNano } from '@svc/platform';
import { type Simulator, startSimulator } from '@svc/providers';
import { api, chatWorstCase, startGateway, stopGateway, type StartedGateway } from '../support/gateway';
import { until } from '../support/until';

/** A span as the OTLP/HTTP JSON encoding carries it, its attributes flattened. */
interface ExportedSpan {
  service: unknown;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  status: { code?: number; message?: string };
}

// OTLP's enums, as the JSON encoding numbers them.
const KIND = { internal: 1, server: 2, client: 3 };
const STATUS = { unset: 0, error: 2 };

/**
 * An OTLP/HTTP trace receiver, as a collector would be: it decodes the JSON export requests the
 * exporter posts to /v1/traces and keeps every span.
 */
async function startOtlpReceiver() {
  const spans: ExportedSpan[] = [];
  let exports = 0;
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    let body = Buffer.concat(chunks);
    if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
    if (req.method !== 'POST' || req.url !== '/v1/traces' || !String(req.headers['content-type']).startsWith('application/json')) {
      res.writeHead(415).end();
      return;
    }
    exports++;
    for (const resourceSpans of JSON.parse(body.toString('utf8')).resourceSpans ?? []) {
      const service = attributesOf(resourceSpans.resource?.attributes)['service.name'];
      for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
        for (const s of scopeSpans.spans ?? []) {
          spans.push({
            service,
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId || undefined,
            name: s.name,
            kind: s.kind,
            attributes: attributesOf(s.attributes),
            status: s.status ?? {},
          });
        }
      }
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    exports: () => exports,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function attributesOf(list: { key: string; value: Record<string, unknown> }[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, value } of list ?? []) {
    const [kind, v] = Object.entries(value)[0] ?? [];
    // 64-bit integers may come as strings in OTLP JSON.
    out[key] = kind === 'intValue' ? Number(v) : v;
  }
  return out;
}

/**
 * The simulated upstream behind a pass-through that notes the trace headers of every request
 * the gateway sends it (the simulator does not keep headers).
 */
async function startRecordingUpstream(sim: Simulator) {
  const seen: { path: string; traceparent?: string; tracestate?: string }[] = [];
  const target = new URL(sim.url);
  const server: Server = createServer((req, res) => {
    const one = (h: IncomingHttpHeaders[string]) => (Array.isArray(h) ? h.join(',') : h);
    seen.push({ path: req.url ?? '', traceparent: one(req.headers.traceparent), tracestate: one(req.headers.tracestate) });
    const forwarded = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forwarded.on('error', () => res.destroy());
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    seen,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
/** A caller's trace context: a fresh trace, and the caller's span in it. */
function callerTrace() {
  const traceId = hex(16);
  const spanId = hex(8);
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

// Words no attribute may ever carry: the prompt is content.
const PROMPT = 'Describe the okapi-7c1f secret garden';

describe('traces (issue 22): OpenTelemetry spans over OTLP, and W3C trace context upstream', () => {
  let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
  let sim: Simulator;
  let upstream: Awaited<ReturnType<typeof startRecordingUpstream>>;
  // Two gateways in one process: one tracing, one not; neither may see the other's traces.
  let traced: StartedGateway | undefined;
  let untraced: StartedGateway;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    sim = await startSimulator({ videoJobMs: 1_000 });
    upstream = await startRecordingUpstream(sim);
    [traced, untraced] = await Promise.all([
      startGateway({ SVC_SIMULATOR_URL: upstream.url, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'svc-gateway-e2e' }),
      startGateway({ SVC_SIMULATOR_URL: upstream.url }),
    ]);
  }, 60_000);

  afterAll(async () => {
    await stopGateway(traced);
    await stopGateway(untraced);
    await upstream?.close();
    await sim?.close();
    await receiver?.close();
  });

  const gw = () => traced as StartedGateway;

  async function chat(on: StartedGateway, body: object, headers: Record<string, string> = {}) {
    return api(on.url)('POST', '/chat/completions', { key: on.keys.api_key, body, headers });
  }

  /** The spans of `traceId` once the request's span and `last` (the settlement's) are exported. */
  async function spansOf(traceId: string, last: 'charge' | 'release') {
    return until(`the spans of trace ${traceId}`, async () => {
      await gw().runtime.tracing!.forceFlush();
      const spans = receiver.spans.filter((s) => s.traceId === traceId);
      return spans.some((s) => s.kind === KIND.server) && spans.some((s) => s.name === last) ? spans : undefined;
    });
  }

  const one = (spans: ExportedSpan[], name: string) => {
    const found = spans.filter((s) => s.name === name);
    expect(found).toHaveLength(1);
    return found[0];
  };

  it("records request, hold, upstream and charge in the caller's trace, with the upstream span as the provider request's parent", async () => {
    const caller = callerTrace();
    const messages = [{ role: 'user', content: PROMPT }];
    const r = await chat(gw(), { model: 'sim/echo', messages }, { traceparent: caller.traceparent, tracestate: 'caller=1' });
    expect(r.status).toBe(200);
    const generationId = r.headers.get('x-svc-generation-id');
    const keyId = (await api(gw().url)('GET', '/key', { key: gw().keys.api_key })).json.data;
    const spans = await spansOf(caller.traceId, 'charge');

    const server = one(spans, 'POST /v1/chat/completions');
    expect(server).toMatchObject({ service: 'svc-gateway-e2e', kind: KIND.server, parentSpanId: caller.spanId, status: { code: STATUS.unset } });
    expect(server.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/v1/chat/completions',
      'url.path': '/v1/chat/completions',
      'http.response.status_code': 200,
    });

    const who = { 'svc.generation_id': generationId, 'svc.account_id': gw().keys.account_id, 'svc.key_id': expect.any(String) };
    const hold = one(spans, 'hold');
    expect(hold).toMatchObject({ kind: KIND.internal, parentSpanId: server.spanId });
    expect(hold.attributes).toMatchObject({
      ...who,
      'svc.amount_nano': Number(chatWorstCase(gw().runtime, 'sim/echo', messages, null)),
      'svc.model': 'sim/echo',
      'svc.endpoint': '/v1/chat/completions',
    });

    const call = one(spans, 'upstream sim');
    expect(call).toMatchObject({ kind: KIND.client, parentSpanId: server.spanId, status: { code: STATUS.unset } });
    expect(call.attributes).toMatchObject({
      'svc.generation_id': generationId,
      'svc.provider': 'sim',
      'svc.model': 'sim/echo',
      'svc.operation': 'chat',
      'svc.attempt': 1,
    });

    const charge = one(spans, 'charge');
    expect(charge).toMatchObject({ kind: KIND.internal, parentSpanId: server.spanId });
    expect(charge.attributes).toMatchObject({
      ...who,
      'svc.key_id': hold.attributes['svc.key_id'],
      'svc.amount_nano': Number(usdToNano(r.json.usage.cost)),
      'svc.provider': 'sim',
      'svc.model': 'sim/echo',
    });
    expect(charge.attributes['svc.amount_nano']).toBeGreaterThan(0);
    expect(JSON.stringify(keyId)).toContain(String(hold.attributes['svc.key_id']));

    // What the provider received: the same trace, the upstream span as parent, the caller's tracestate.
    expect(upstream.seen.filter((s) => s.traceparent?.includes(caller.traceId))).toEqual([
      { path: '/v1/chat/completions', traceparent: `00-${caller.traceId}-${call.spanId}-01`, tracestate: 'caller=1' },
    ]);
  });

  it("records a failed upstream call as an error, and the hold's release instead of a charge", async () => {
    const caller = callerTrace();
    const r = await chat(
      gw(),
      { model: 'sim/echo', messages: [{ role: 'user', content: `${PROMPT}\n#sim {"fail": 503}` }] },
      { traceparent: caller.traceparent },
    );
    expect(r.status).toBeGreaterThanOrEqual(500);
    const spans = await spansOf(caller.traceId, 'release');

    const server = one(spans, 'POST /v1/chat/completions');
    expect(server.status.code).toBe(STATUS.error);
    expect(server.attributes['http.response.status_code']).toBe(r.status);
    const call = one(spans, 'upstream sim');
    expect(call.status).toEqual({ code: STATUS.error, message: 'upstream_503' });
    expect(call.attributes).toMatchObject({ 'error.type': 'upstream_503', 'http.response.status_code': 503 });
    const release = one(spans, 'release');
    expect(release).toMatchObject({ parentSpanId: server.spanId });
    expect(release.attributes).toMatchObject({
      'svc.generation_id': r.headers.get('x-svc-generation-id'),
      'svc.account_id': gw().keys.account_id,
      'svc.amount_nano': 0,
      'svc.error_code': 'upstream_503',
    });
    expect(spans.filter((s) => s.name === 'charge')).toEqual([]);
  });

  it('records each try of a fallback as an upstream span of its own, each the parent of its provider request', async () => {
    const caller = callerTrace();
    const content = `${PROMPT}\n#sim {"fail_models": {"sim/echo": 503}}`;
    const r = await chat(gw(), { model: 'sim/echo', models: ['sim/small-8k'], messages: [{ role: 'user', content }] }, { traceparent: caller.traceparent });
    expect(r.status).toBe(200);
    const spans = await spansOf(caller.traceId, 'charge');

    const server = one(spans, 'POST /v1/chat/completions');
    const tries = spans.filter((s) => s.name.startsWith('upstream ')).sort((a, b) => Number(a.attributes['svc.attempt']) - Number(b.attributes['svc.attempt']));
    // sim/echo has two providers in the built-in catalog, both failing; then the fallback model answers.
    expect(tries.map((s) => [s.name, s.parentSpanId, s.attributes['svc.attempt'], s.attributes['svc.model'], s.status.code])).toEqual([
      ['upstream sim', server.spanId, 1, 'sim/echo', STATUS.error],
      ['upstream sim-backup', server.spanId, 2, 'sim/echo', STATUS.error],
      ['upstream sim', server.spanId, 3, 'sim/small-8k', STATUS.unset],
    ]);
    expect(one(spans, 'charge').attributes['svc.model']).toBe('sim/small-8k');
    expect(upstream.seen.filter((s) => s.traceparent?.includes(caller.traceId)).map((s) => s.traceparent)).toEqual(
      tries.map((s) => `00-${caller.traceId}-${s.spanId}-01`),
    );
  });

  it("records a streamed completion's charge, made after the response began, in the request's trace", async () => {
    const caller = callerTrace();
    const response = await fetch(`${gw().url}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw().keys.api_key}`, 'content-type': 'application/json', traceparent: caller.traceparent },
      body: JSON.stringify({ model: 'sim/echo', stream: true, messages: [{ role: 'user', content: PROMPT }] }),
    });
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('[DONE]');
    const spans = await spansOf(caller.traceId, 'charge');

    const server = one(spans, 'POST /v1/chat/completions');
    expect(['hold', 'upstream sim', 'charge'].map((name) => one(spans, name).parentSpanId)).toEqual([server.spanId, server.spanId, server.spanId]);
    expect(one(spans, 'charge').attributes['svc.amount_nano']).toBeGreaterThan(0);
  });

  it('starts a trace of its own for a request without a traceparent, and names unrouted requests by method alone', async () => {
    const before = receiver.spans.length;
    expect((await chat(gw(), { model: 'sim/echo', messages: [{ role: 'user', content: PROMPT }] })).status).toBe(200);
    expect((await api(gw().url)('GET', '/no/such/route', { key: gw().keys.api_key })).status).toBe(404);
    const fresh = await until('the spans of both requests', async () => {
      await gw().runtime.tracing!.forceFlush();
      const spans = receiver.spans.slice(before);
      return spans.some((s) => s.name === 'charge') && spans.some((s) => s.name === 'GET') ? spans : undefined;
    });
    const server = one(fresh, 'POST /v1/chat/completions');
    expect(server.parentSpanId).toBeUndefined();
    expect(one(fresh, 'charge').traceId).toBe(server.traceId);
    const unrouted = one(fresh, 'GET');
    expect(unrouted.attributes['http.route']).toBeUndefined();
    expect(unrouted.attributes['http.response.status_code']).toBe(404);
  });

  it('without OTEL_EXPORTER_OTLP_ENDPOINT: nothing is traced, exported or forwarded', async () => {
    expect(untraced.runtime.tracing).toBeNull();
    const caller = callerTrace();
    // Forwarding the caller's context would take an async context per request, which Node 20
    // pays for on every promise of the process: a gateway that does not trace forwards none.
    const forwarded = upstream.seen.length;
    const r = await chat(
      untraced,
      { model: 'sim/echo', messages: [{ role: 'user', content: PROMPT }] },
      { traceparent: caller.traceparent, tracestate: 'caller=2,other=x' },
    );
    expect(r.status).toBe(200);
    expect(upstream.seen.slice(forwarded)).toEqual([{ path: '/v1/chat/completions', traceparent: undefined, tracestate: undefined }]);

    // Nor does a request without trace context.
    const before = upstream.seen.length;
    expect((await chat(untraced, { model: 'sim/echo', messages: [{ role: 'user', content: PROMPT }] })).status).toBe(200);
    expect(upstream.seen.slice(before)).toEqual([{ path: '/v1/chat/completions', traceparent: undefined, tracestate: undefined }]);

    // The tracing gateway in the same process exports nothing of the other's requests.
    await gw().runtime.tracing!.forceFlush();
    expect(receiver.spans.filter((s) => s.traceId === caller.traceId)).toEqual([]);
  });

  // Issue 41 (23): work outside a request. A batch line's hold, upstream call and charge were
  // three traces of their own; each attempt of a line is now one trace under a root span.
  it('records each batch line attempt as one trace: hold, upstream and charge under its root', async () => {
    const sdk = new OpenAI({ baseURL: gw().url, apiKey: gw().keys.api_key, maxRetries: 0 });
    const lines = ['one', 'two'].map((id) =>
      JSON.stringify({
        custom_id: id,
        method: 'POST',
        url: '/v1/chat/completions',
        body: { model: 'sim/echo', messages: [{ role: 'user', content: PROMPT }], max_tokens: 20 },
      }),
    );
    const input = await sdk.files.create({ file: await toFile(Buffer.from(`${lines.join('\n')}\n`), 'input.jsonl'), purpose: 'batch' });
    const batch = await sdk.batches.create({ input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    await until(`batch ${batch.id} to complete`, async () => ((await sdk.batches.retrieve(batch.id)).status === 'completed' ? true : undefined), 30_000);
    const roots = await until('the spans of both lines', async () => {
      await gw().runtime.tracing!.forceFlush();
      const found = receiver.spans.filter((s) => s.name === 'batch line' && s.attributes['svc.batch_id'] === batch.id);
      const charged = found.filter((root) => receiver.spans.some((s) => s.traceId === root.traceId && s.name === 'charge'));
      return charged.length === 2 ? found : undefined;
    });
    expect(roots.map((r) => r.attributes['svc.batch_line']).sort()).toEqual([1, 2]);
    for (const root of roots) {
      expect(root).toMatchObject({ parentSpanId: undefined, kind: KIND.internal, status: { code: STATUS.unset } });
      expect(root.attributes).toMatchObject({ 'svc.attempt': 1, 'svc.account_id': gw().keys.account_id });
      const inTrace = receiver.spans.filter((s) => s.traceId === root.traceId && s !== root);
      expect(inTrace.map((s) => s.name).sort()).toEqual(['charge', 'hold', 'upstream sim']);
      for (const span of inTrace) expect(span.parentSpanId).toBe(root.spanId);
      // The provider request carried the line's trace too.
      const call = one(inTrace, 'upstream sim');
      expect(upstream.seen.some((u) => u.traceparent === `00-${root.traceId}-${call.spanId}-01`)).toBe(true);
    }
  }, 60_000);

  // Issue 41 (23): a video job's steps had no spans at all.
  it('records each step of a video job as a trace: its provider calls, then its charge', async () => {
    const sdk = new OpenAI({ baseURL: gw().url, apiKey: gw().keys.api_key, maxRetries: 0 });
    const video = (await sdk.videos.create({ model: 'sim/video', prompt: 'a kite', seconds: '4' } as never)) as { id: string };
    await until(`video ${video.id} to complete`, async () => ((await sdk.videos.retrieve(video.id)).status === 'completed' ? true : undefined), 45_000);
    const steps = await until('the steps of the video', async () => {
      await gw().runtime.tracing!.forceFlush();
      const found = receiver.spans.filter((s) => s.name === 'video step' && s.attributes['svc.video_id'] === video.id);
      return found.some((root) => receiver.spans.some((s) => s.traceId === root.traceId && s.name === 'charge')) ? found : undefined;
    });
    const children = (root: ExportedSpan) => receiver.spans.filter((s) => s.traceId === root.traceId && s !== root);
    for (const root of steps) {
      expect(root).toMatchObject({ parentSpanId: undefined, kind: KIND.internal, status: { code: STATUS.unset } });
      for (const span of children(root)) expect(span.parentSpanId).toBe(root.spanId);
    }
    const calls = steps.flatMap(children).filter((s) => s.name === 'upstream sim');
    expect(calls.map((c) => c.attributes['svc.video_call'])).toEqual(expect.arrayContaining(['create', 'poll', 'download_video']));
    for (const c of calls)
      expect(c).toMatchObject({
        kind: KIND.client,
        attributes: expect.objectContaining({ 'svc.operation': 'video', 'svc.provider': 'sim', 'svc.account_id': gw().keys.account_id }),
      });
    const charge = one(steps.flatMap(children), 'charge');
    expect(charge.attributes['svc.amount_nano']).toBeGreaterThan(0);
    // The submission and the provider's own request share the step's trace.
    const create = calls.find((c) => c.attributes['svc.video_call'] === 'create')!;
    expect(upstream.seen.some((u) => u.traceparent === `00-${create.traceId}-${create.spanId}-01`)).toBe(true);
  }, 90_000);

  it("never puts the prompt or a key's secret in a span", async () => {
    expect(receiver.spans.length).toBeGreaterThan(10);
    const everything = JSON.stringify(receiver.spans);
    expect(everything).not.toContain('okapi-7c1f');
    for (const secret of [gw().keys.api_key, gw().keys.live_api_key, gw().keys.management_key, gw().keys.admin_token]) expect(everything).not.toContain(secret);
  });

  it('exports the spans still queued when the process stops', async () => {
    const caller = callerTrace();
    expect((await chat(gw(), { model: 'sim/echo', messages: [{ role: 'user', content: PROMPT }] }, { traceparent: caller.traceparent })).status).toBe(200);
    const gateway = gw();
    traced = undefined;
    await stopGateway(gateway);
    const names = receiver.spans.filter((s) => s.traceId === caller.traceId).map((s) => s.name);
    expect(names.sort()).toEqual(['POST /v1/chat/completions', 'charge', 'hold', 'upstream sim']);
  });
});
