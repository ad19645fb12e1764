import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { DomainError } from '@svc/eventstore';
import { ProviderError } from '@svc/providers';
import { upstreamTraceHeaders } from './propagation';
import { errorType, Tracing } from './tracing';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const TRACEPARENT = `00-${TRACE_ID}-${CALLER_SPAN}-01`;

function tracingWithMemory() {
  const exporter = new InMemorySpanExporter();
  return { tracing: Tracing.create({ serviceName: 'svc-test', exporter, exportEachSpan: true }), spans: () => exporter.getFinishedSpans() };
}

const named = (spans: ReadableSpan[], name: string) => spans.filter((s) => s.name === name);

/** Runs `fn` as a Fastify handler would: after `enter` hands it the request's context by callback. */
function inRequest<T>(tracing: Tracing, context: Parameters<Tracing['enter']>[0], fn: () => Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => tracing.enter(context, () => void fn().then(resolve, reject)));
}

describe('Tracing', () => {
  it('starts a request span as the child of a valid traceparent, and a trace of its own otherwise', async () => {
    const { tracing, spans } = tracingWithMemory();
    const joined = tracing.startRequest('POST /v1/chat/completions', { traceparent: TRACEPARENT }, { 'http.request.method': 'POST' });
    tracing.endRequest(joined, 200, false);
    const fresh = tracing.startRequest('POST /v1/chat/completions', { traceparent: `00-${'0'.repeat(32)}-${CALLER_SPAN}-01` }, {});
    tracing.endRequest(fresh, 503, true);
    await tracing.forceFlush();

    const [first, second] = spans();
    expect(first.kind).toBe(SpanKind.SERVER);
    expect(first.spanContext().traceId).toBe(TRACE_ID);
    expect(first.parentSpanContext?.spanId).toBe(CALLER_SPAN);
    expect(first.attributes['http.response.status_code']).toBe(200);
    expect(first.status.code).toBe(SpanStatusCode.UNSET);
    // An all-zero trace id is invalid: ignored, not joined.
    expect(second.spanContext().traceId).not.toBe('0'.repeat(32));
    expect(second.parentSpanContext).toBeUndefined();
    expect(second.status.code).toBe(SpanStatusCode.ERROR);
    expect(second.attributes['svc.client_aborted']).toBe(true);
  });

  it('makes the spans of work started in the entered context children of the request, across awaits', async () => {
    const { tracing, spans } = tracingWithMemory();
    const request = tracing.startRequest('POST /v1/embeddings', { traceparent: TRACEPARENT }, {});
    await inRequest(tracing, request.context, async () => {
      await new Promise((resolve) => setImmediate(resolve));
      await tracing.span('hold', { 'svc.generation_id': 'gen-1' }, async () => undefined);
      await tracing.upstream('upstream sim', { 'svc.provider': 'sim' }, async () => undefined);
    });
    tracing.endRequest(request, 200, false);
    await tracing.forceFlush();

    const server = named(spans(), 'POST /v1/embeddings')[0];
    const [hold] = named(spans(), 'hold');
    const [upstream] = named(spans(), 'upstream sim');
    expect(hold.parentSpanContext?.spanId).toBe(server.spanContext().spanId);
    expect(hold.spanContext().traceId).toBe(TRACE_ID);
    expect(hold.kind).toBe(SpanKind.INTERNAL);
    expect(hold.attributes['svc.generation_id']).toBe('gen-1');
    expect(upstream.kind).toBe(SpanKind.CLIENT);
    expect(upstream.parentSpanContext?.spanId).toBe(server.spanContext().spanId);
  });

  it('gives the provider requests of an upstream call its own span as their parent, and only inside the call', async () => {
    const { tracing, spans } = tracingWithMemory();
    const request = tracing.startRequest('POST /v1/chat/completions', { traceparent: TRACEPARENT, tracestate: 'vendor=opaque' }, {});
    let sent: ReturnType<typeof upstreamTraceHeaders>;
    await inRequest(tracing, request.context, () =>
      tracing.upstream('upstream sim', {}, async () => {
        await Promise.resolve();
        sent = upstreamTraceHeaders();
      }),
    );
    expect(upstreamTraceHeaders()).toBeUndefined();
    tracing.endRequest(request, 200, false);
    await tracing.forceFlush();

    const [upstream] = named(spans(), 'upstream sim');
    expect(sent).toEqual({ traceparent: `00-${TRACE_ID}-${upstream.spanContext().spanId}-01`, tracestate: 'vendor=opaque' });
  });

  it('marks a failed span with a bounded error type and status, never the error message', async () => {
    const { tracing, spans } = tracingWithMemory();
    const secretish = 'the prompt said: my password is hunter2';
    const failure = new ProviderError({ kind: 'http', status: 503, message: secretish, upstreamBody: { error: { message: secretish } } });
    await expect(tracing.upstream('upstream sim', {}, async () => Promise.reject(failure))).rejects.toBe(failure);
    await expect(tracing.span('hold', {}, async () => Promise.reject(new DomainError('insufficient_credits', secretish)))).rejects.toThrow(secretish);
    await tracing.forceFlush();

    const [upstream, hold] = spans();
    expect(upstream.status).toEqual({ code: SpanStatusCode.ERROR, message: 'upstream_503' });
    expect(upstream.attributes).toEqual({ 'error.type': 'upstream_503', 'http.response.status_code': 503 });
    expect(hold.attributes['error.type']).toBe('insufficient_credits');
    expect(JSON.stringify(spans().map((s) => [s.attributes, s.status, s.events]))).not.toContain('hunter2');
  });

  it("keeps two processes' tracing apart: one's request context is not the other's parent", async () => {
    const a = tracingWithMemory();
    const b = tracingWithMemory();
    const request = a.tracing.startRequest('GET /v1/models', { traceparent: TRACEPARENT }, {});
    await inRequest(a.tracing, request.context, () => b.tracing.span('charge', {}, async () => undefined));
    a.tracing.endRequest(request, 200, false);
    await Promise.all([a.tracing.forceFlush(), b.tracing.forceFlush()]);

    const [charge] = b.spans();
    expect(charge.parentSpanContext).toBeUndefined();
    expect(charge.spanContext().traceId).not.toBe(TRACE_ID);
  });
});

describe('errorType', () => {
  it('is a provider status or failure kind, an error code, or the error class: never a message', () => {
    expect(errorType(new ProviderError({ kind: 'http', status: 429, message: 'slow down' }))).toBe('upstream_429');
    expect(errorType(new ProviderError({ kind: 'timeout', status: 504, message: 'late' }))).toBe('timeout');
    expect(errorType(new DomainError('hold_not_open', 'x'))).toBe('hold_not_open');
    expect(errorType(new TypeError('cannot read x of undefined'))).toBe('TypeError');
    expect(errorType(Object.assign(new Error('x'), { code: 'has spaces in it' }))).toBe('Error');
    expect(errorType('a thrown string')).toBe('error');
  });
});
