import { AsyncLocalStorage } from 'node:async_hooks';

/** The W3C trace context headers a provider request carries. */
export interface TraceHeaders {
  traceparent: string;
  tracestate?: string;
}

/**
 * The trace context of the upstream call being made, for the transport to send. Module-level
 * rather than on a tracing object because the transport is a set of functions every adapter
 * calls: each async context has its own value, so two gateways in one process never see each
 * other's, and nothing is stored where no trace context was given.
 */
const upstream = new AsyncLocalStorage<TraceHeaders>();

/** The headers a provider request made now should carry, if any. */
export function upstreamTraceHeaders(): TraceHeaders | undefined {
  return upstream.getStore();
}

/** Runs `fn` (and whatever it starts) with `headers` sent on its provider requests. */
export function withUpstreamTraceHeaders<R>(headers: TraceHeaders, fn: () => R): R {
  return upstream.run(headers, fn);
}
