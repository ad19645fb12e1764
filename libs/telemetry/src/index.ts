/**
 * Issue 22, traces: OpenTelemetry spans of a request, its hold, its upstream calls and its
 * charge, exported over OTLP when configured; and the W3C trace context its provider requests
 * carry. The SDK is loaded only by a process that traces.
 */
export { upstreamTraceHeaders, withUpstreamTraceHeaders, type TraceHeaders } from './propagation';
export { TRACING } from './tokens';
export { ATTR, errorType, Tracing, type RequestTrace, type TracingOptions } from './tracing';
export type { Attributes, Span } from '@opentelemetry/api';
