/** The lease of a process that serves requests (GatewayLease | null): null in the worker and the CLI. */
export const GATEWAY_LEASE = Symbol('GATEWAY_LEASE');
