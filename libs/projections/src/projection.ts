import type { RecordedEvent } from '@svc/eventstore';
import type { SqlExecutor } from '@svc/platform';

/**
 * A read model: the tables it owns, the event types it reads and how it applies them. It must
 * be a deterministic function of the events (times come from event metadata, never from a
 * clock), and its rows must not depend on how the log is cut into batches, so a rebuild from
 * position 0 yields exactly the rows of the live projection.
 */
export interface Projection {
  readonly name: string;
  /** Idempotent DDL statements creating the tables. */
  readonly schema: readonly string[];
  /** Tables emptied by a rebuild. */
  readonly tables: readonly string[];
  /** The event types it reads; the runner hands it no others. */
  readonly eventTypes: ReadonlySet<string>;
  /**
   * Applies events of `eventTypes`, in log order, inside the runner's transaction (which also
   * moves the checkpoint). `any`: each projection narrows the events to the types it reads.
   */
  apply(events: readonly RecordedEvent<any, any>[], tx: SqlExecutor): Promise<void>;
}

type Handler = (event: RecordedEvent<any, any>, tx: SqlExecutor) => Promise<void>;

/** A projection written as one handler per event type, run one event after the other. */
export function perEvent(definition: Omit<Projection, 'eventTypes' | 'apply'> & { handlers: Readonly<Record<string, Handler>> }): Projection {
  const { handlers, ...rest } = definition;
  return {
    ...rest,
    eventTypes: new Set(Object.keys(handlers)),
    apply: async (events, tx) => {
      for (const event of events) await handlers[event.type](event, tx);
    },
  };
}

/** The decided-at time of an event, recorded by the aggregate store from the injected clock. */
export function eventTime(event: RecordedEvent): string {
  const at = event.metadata.at;
  if (typeof at !== 'string') throw new Error(`event ${event.id} (${event.type}) has no metadata.at`);
  return at;
}

/** The UTC day (`YYYY-MM-DD`) of an ISO instant: what `(t AT TIME ZONE 'UTC')::date` gives. */
export function utcDay(at: string): string {
  // What toISOString wrote (every instant the aggregate store records) is in UTC already: its
  // first ten characters are the day. Parsing it into a Date and back was a twentieth of a rebuild.
  return TO_ISO_STRING.test(at) ? at.slice(0, 10) : new Date(at).toISOString().slice(0, 10);
}

const TO_ISO_STRING = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * Rows as one JSON parameter (an array of arrays), read back as a table of the given column
 * types, so a batch's rows go to PostgreSQL in one statement:
 * `INSERT INTO t (a, b) SELECT * FROM ${table} AS d`. One JSON text, written by V8's native
 * JSON.stringify: node-postgres writes an array parameter element by element in JavaScript,
 * which was a fifth of the CPU of a rebuild of the generations.
 */
export function asTable(types: readonly string[], rows: readonly (readonly unknown[])[]): { table: string; params: [string] } {
  // `->>` gives a nested object or array as its JSON text, which a jsonb column reads back.
  const columns = types.map((type, i) => `(r->>${i})::${type} AS c${i + 1}`).join(', ');
  return { table: `(SELECT ${columns} FROM jsonb_array_elements($1::jsonb) AS r)`, params: [JSON.stringify(rows)] };
}
