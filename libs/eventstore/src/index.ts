export * from './port';
export { START, comparePositions, decodePosition, encodePosition } from './position';
export { appendBytes } from './common';
export { SqlEventStore, type SqlEventStoreOptions } from './sql-event-store';
export * from './decider';
export * from './aggregate-store';
export * from './tokens';
// The EventStoreDB adapter is not re-exported: its gRPC client is heavy, so only processes
// configured with EVENTSTORE_URL load it, from './eventstoredb-event-store'.
