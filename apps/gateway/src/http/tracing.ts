import type { FastifyInstance, FastifyRequest } from 'fastify';
import { routeLabel } from '@svc/metrics';
import { type RequestTrace, type Tracing } from '@svc/telemetry';
import { methodLabel } from '../metrics/request-metrics';

/**
 * Issue 22: a SERVER span per request, and the request's trace context for everything its
 * handler starts (the metering pipeline's spans, the provider requests' `traceparent`).
 *
 * Fastify reads the body in the request stream's event callbacks, which do not carry the async
 * context of `onRequest`: the span starts there (so it times authentication and body reading
 * too) but the context is entered at `preValidation`, with the callback form of the hook, so
 * that validation, the handler and the reply run inside it.
 *
 * Without tracing, nothing: no hook, and no caller's `traceparent` forwarded. Carrying it to
 * the provider requests would take an async context per request, and on Node 20 the first one
 * turns on promise hooks for the whole process (~13% fewer billed requests per second in the
 * benchmark), which a client's header must not be able to switch on.
 */
export function installTracing(fastify: FastifyInstance, tracing: Tracing | null): void {
  if (tracing === null) return;
  const traces = new WeakMap<FastifyRequest, RequestTrace>();
  // Route templates are few and fixed: each span name is made once.
  const names = new Map<string, string>();
  const nameOf = (method: string, template: string | undefined) => {
    const key = `${method} ${template ?? ''}`;
    let name = names.get(key);
    if (name === undefined) names.set(key, (name = template === undefined ? method : `${method} ${routeLabel(template)}`));
    return name;
  };
  fastify.addHook('onRequest', (request, reply, done) => {
    const method = methodLabel(request.method);
    const template = request.routeOptions.url;
    const trace = tracing.startRequest(nameOf(method, template), request.headers, {
      'http.request.method': method,
      ...(template === undefined ? {} : { 'http.route': routeLabel(template) }),
      // The path only: a query string may carry what a caller would not want kept.
      'url.path': request.url.split('?', 1)[0],
      'url.scheme': request.protocol,
    });
    traces.set(request, trace);
    // 'close' comes after the last byte is written, and also when the client leaves early (a
    // stream cut short, a request abandoned before its answer), where onResponse never runs.
    const raw = reply.raw;
    raw.once('close', () => tracing.endRequest(trace, raw.statusCode, !raw.writableFinished));
    done();
  });
  fastify.addHook('preValidation', (request, _reply, done) => {
    const trace = traces.get(request);
    if (trace === undefined) done();
    else tracing.enter(trace.context, done);
  });
}
