export * from './port';
export { START, comparePositions, decodePosition, encodePosition } from './position';
export { appendBytes, storeUnavailable } from './common';
export { EventStoreDbUnavailableError } from './eventstoredb-retry';
export { SqlEventStore, type SqlEventStoreOptions } from './sql-event-store';
export * from './decider';
export * from './aggregate-store';
export * from './tokens';
import type { EventStore, Upcaster } from './port';

/**
 * The EventStoreDB adapter is not re-exported: its gRPC client is heavy, so it is loaded on the
 * first call, which only processes configured with EVENTSTORE_URL make.
 */
export function openEventStoreDb(url: string, options: { upcast?: Upcaster } = {}): EventStore {
  const { EventStoreDbEventStore } = require('./eventstoredb-event-store') as typeof import('./eventstoredb-event-store');
  return new EventStoreDbEventStore(url, options);
}
