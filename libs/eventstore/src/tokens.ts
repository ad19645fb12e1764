/** Nest injection tokens of the event store library. */
export const EVENT_STORE = Symbol('EVENT_STORE');
export const AGGREGATE_STORE = Symbol('AGGREGATE_STORE');
