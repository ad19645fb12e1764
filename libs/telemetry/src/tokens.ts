/** This process's OpenTelemetry spans (Tracing | null): null where it does not trace. */
export const TRACING = Symbol('TRACING');
