import type { IncomingHttpHeaders } from 'node:http';
import {
  type Attributes,
  type Context,
  type ContextManager,
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapPropagator,
  trace,
  type Tracer,
} from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import { type TraceHeaders, withUpstreamTraceHeaders } from './propagation';

/**
 * The attribute names the gateway's spans carry beside the HTTP ones: ids, names and amounts,
 * never content (a prompt, an answer) or a secret (a key, a provider's key).
 */
export const ATTR = {
  generationId: 'svc.generation_id',
  accountId: 'svc.account_id',
  keyId: 'svc.key_id',
  amountNano: 'svc.amount_nano',
  model: 'svc.model',
  endpoint: 'svc.endpoint',
  provider: 'svc.provider',
  operation: 'svc.operation',
  attempt: 'svc.attempt',
  errorCode: 'svc.error_code',
  aborted: 'svc.client_aborted',
} as const;

export interface TracingOptions {
  /** The resource's `service.name`. */
  serviceName: string;
  exporter: SpanExporter;
  /**
   * Each span exported as it ends (tests, tools), instead of in batches from a queue: batches
   * keep exporting off the request path.
   */
  exportEachSpan?: boolean;
}

/** The SERVER span of one HTTP request, and the context its handler runs in. */
export interface RequestTrace {
  readonly span: Span;
  readonly context: Context;
}

/**
 * One process's tracing (issue 22): its own tracer provider, context manager and W3C
 * propagator, none registered globally, so two gateways in one process (tests) keep apart.
 * A process without OTEL_EXPORTER_OTLP_ENDPOINT has none: its callers test for null, and
 * spend nothing else.
 */
export class Tracing {
  private readonly tracer: Tracer;

  private constructor(
    private readonly provider: { getTracer(name: string): Tracer; forceFlush(): Promise<void>; shutdown(): Promise<void> },
    private readonly contextManager: ContextManager,
    private readonly propagator: TextMapPropagator,
  ) {
    this.tracer = provider.getTracer('svc-gateway');
  }

  /**
   * Tracing that exports to `options.exporter`. The SDK is loaded here, not when the library
   * is: a process that never traces never loads it.
   */
  static create(options: TracingOptions): Tracing {
    const { BasicTracerProvider, BatchSpanProcessor, SimpleSpanProcessor } =
      require('@opentelemetry/sdk-trace-base') as typeof import('@opentelemetry/sdk-trace-base');
    const { resourceFromAttributes } = require('@opentelemetry/resources') as typeof import('@opentelemetry/resources');
    const { W3CTraceContextPropagator } = require('@opentelemetry/core') as typeof import('@opentelemetry/core');
    const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks') as typeof import('@opentelemetry/context-async-hooks');
    const processor = options.exportEachSpan ? new SimpleSpanProcessor(options.exporter) : new BatchSpanProcessor(options.exporter);
    const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': options.serviceName }), spanProcessors: [processor] });
    return new Tracing(provider, new AsyncLocalStorageContextManager().enable(), new W3CTraceContextPropagator());
  }

  /** Tracing exporting over OTLP/HTTP (JSON) to `url`; the exporter adds OTEL_EXPORTER_OTLP_HEADERS itself. */
  static otlp(settings: { url: string; serviceName: string }): Tracing {
    const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http') as typeof import('@opentelemetry/exporter-trace-otlp-http');
    return Tracing.create({ serviceName: settings.serviceName, exporter: new OTLPTraceExporter({ url: settings.url }) });
  }

  /**
   * The SERVER span of a request, named `METHOD /route/template`, child of the caller's
   * `traceparent` when it is valid (else a trace of its own).
   */
  startRequest(name: string, headers: IncomingHttpHeaders, attributes: Attributes): RequestTrace {
    const parent = this.propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
    const span = this.tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
    return { span, context: trace.setSpan(parent, span) };
  }

  /** Ends a request's span with its status: an answer of 500 or more is an error (a 4xx is the caller's). */
  endRequest(request: RequestTrace, status: number, aborted: boolean): void {
    const { span } = request;
    span.setAttribute('http.response.status_code', status);
    if (aborted) span.setAttribute(ATTR.aborted, true);
    if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  }

  /**
   * Runs `done` (and everything it starts) in `context`: a callback, so that a Fastify hook can
   * hand the rest of the request (validation, handler, reply) to it.
   */
  enter<A extends unknown[]>(context: Context, done: (...args: A) => void, ...args: A): void {
    this.contextManager.with(context, done, undefined, ...args);
  }

  /**
   * `fn` inside a span named `name`, child of the current request's (a root outside one): ended
   * when `fn` settles, with an error status and a bounded error type (never its message, which
   * may quote what the caller sent) when it throws.
   */
  async span<T>(name: string, attributes: Attributes, fn: (span: Span) => Promise<T>): Promise<T> {
    const span = this.tracer.startSpan(name, { attributes }, this.contextManager.active());
    try {
      return await fn(span);
    } catch (err) {
      failed(span, err);
      throw err;
    } finally {
      span.end();
    }
  }

  /**
   * `fn` inside a new trace: a root span named `name` (never a child of whatever was active),
   * current for everything `fn` does, so the hold, upstream and charge spans of work outside a
   * request (a batch line's attempt, a video job's step) are one trace under it.
   */
  async root<T>(name: string, attributes: Attributes, fn: () => Promise<T>): Promise<T> {
    const span = this.tracer.startSpan(name, { attributes }, ROOT_CONTEXT);
    try {
      return await this.contextManager.with(trace.setSpan(ROOT_CONTEXT, span), fn);
    } catch (err) {
      failed(span, err);
      throw err;
    } finally {
      span.end();
    }
  }

  /**
   * A CLIENT span around one upstream call: `fn`'s provider requests carry this span as their
   * parent (`traceparent`, `tracestate`), so the provider's trace joins the caller's.
   */
  async upstream<T>(name: string, attributes: Attributes, fn: () => Promise<T>): Promise<T> {
    const active = this.contextManager.active();
    const span = this.tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, active);
    const headers: Partial<TraceHeaders> = {};
    this.propagator.inject(trace.setSpan(active, span), headers, defaultTextMapSetter);
    try {
      return await (headers.traceparent ? withUpstreamTraceHeaders(headers as TraceHeaders, fn) : fn());
    } catch (err) {
      failed(span, err);
      throw err;
    } finally {
      span.end();
    }
  }

  /** Exports every span ended so far. */
  forceFlush(): Promise<void> {
    return this.provider.forceFlush();
  }

  /** Exports what is left and stops: the last thing a process does. */
  async shutdown(): Promise<void> {
    await this.provider.shutdown();
    this.contextManager.disable();
  }
}

/** Marks `span` failed by `err`'s bounded type. */
function failed(span: Span, err: unknown): void {
  const type = errorType(err);
  span.setAttribute('error.type', type);
  const status = (err as { name?: unknown; status?: unknown } | null)?.name === 'ProviderError' ? (err as { status?: unknown }).status : undefined;
  if (typeof status === 'number') span.setAttribute('http.response.status_code', status);
  span.setStatus({ code: SpanStatusCode.ERROR, message: type });
}

/**
 * What kind of failure `err` is, from a small set of values: a provider's HTTP status or failure
 * kind, a domain or API error's code, else the error's class. Never the message.
 */
export function errorType(err: unknown): string {
  if (typeof err !== 'object' || err === null) return 'error';
  const e = err as { name?: unknown; kind?: unknown; status?: unknown; code?: unknown };
  if (e.name === 'ProviderError') {
    if (e.kind === 'http' && typeof e.status === 'number') return `upstream_${e.status}`;
    if (typeof e.kind === 'string') return e.kind;
  }
  if (typeof e.code === 'string' && /^[a-z0-9_.]{1,64}$/i.test(e.code)) return e.code;
  return typeof e.name === 'string' && /^[A-Za-z0-9_]{1,64}$/.test(e.name) ? e.name : 'error';
}
