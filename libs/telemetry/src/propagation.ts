import { AsyncLocalStorage } from 'node:async_hooks';
import type { IncomingHttpHeaders } from 'node:http';

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

// Version 00 has exactly these four fields; a later version may append more after a dash.
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * A caller's `traceparent` (and `tracestate`) as they came, when the traceparent is valid W3C
 * trace context: what a gateway without tracing of its own passes upstream, so that the
 * caller's trace still joins the provider's. An invalid one is not passed on (W3C: a vendor
 * must not propagate a traceparent it cannot parse).
 */
export function incomingTraceHeaders(headers: IncomingHttpHeaders): TraceHeaders | undefined {
  const traceparent = headers.traceparent;
  if (typeof traceparent !== 'string') return undefined;
  const value = traceparent.trim();
  const parts = TRACEPARENT.exec(value);
  if (!parts) return undefined;
  const [, version, traceId, parentId, , rest] = parts;
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  if (/^0+$/.test(traceId) || /^0+$/.test(parentId)) return undefined;
  // Repeated tracestate headers are one list (W3C), joined as HTTP joins them.
  const state = headers.tracestate;
  const tracestate = Array.isArray(state) ? state.join(',') : state;
  return tracestate === undefined || tracestate === '' ? { traceparent: value } : { traceparent: value, tracestate };
}
