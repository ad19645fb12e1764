import type { RecordedEvent } from '../../eventstore/src/port';
import type { SqlExecutor } from '../../platform/src/sql';

/**
 * A read model: the tables it owns and a handler per event type it cares about. Handlers
 * must be deterministic functions of the events (times come from event metadata, never from
 * a clock), so a rebuild from position 0 yields exactly the rows of the live projection.
 */
export interface Projection {
  readonly name: string;
  /** Idempotent DDL statements creating the tables. */
  readonly schema: readonly string[];
  /** Tables emptied by a rebuild. */
  readonly tables: readonly string[];
  // `any`: each handler narrows the event to the type it is registered under.
  readonly handlers: Readonly<Record<string, (event: RecordedEvent<any, any>, tx: SqlExecutor) => Promise<void>>>;
}

/** The decided-at time of an event, recorded by the aggregate store from the injected clock. */
export function eventTime(event: RecordedEvent): string {
  const at = event.metadata.at;
  if (typeof at !== 'string') throw new Error(`event ${event.id} (${event.type}) has no metadata.at`);
  return at;
}
