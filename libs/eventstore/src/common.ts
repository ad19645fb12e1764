/**
 * Rules every adapter applies the same way, so that the contract suite holds for all of them.
 */
import { inspectJson, isConnectionFailure } from '@svc/platform';
import {
  AppendTooLargeError,
  UnstorableEventError,
  WrongExpectedVersionError,
  type ExpectedRevision,
  type NewEvent,
  type RecordedEvent,
  type SubscribeOptions,
} from './port';

/**
 * The size an append counts against the limit: the UTF-8 bytes of each event's type, JSON
 * data and JSON metadata (absent metadata counts as `{}`). Ids and framing are not counted,
 * so the figure is the same whatever the adapter's wire or storage format.
 */
export function appendBytes(events: readonly NewEvent[]): number {
  return serialized(events).bytes;
}

/** An event with its data and metadata as JSON text. */
export interface SerializedEvent {
  id: string;
  type: string;
  data: string;
  metadata: string;
}

function serialized(events: readonly NewEvent[]): { events: SerializedEvent[]; bytes: number } {
  let bytes = 0;
  const out: SerializedEvent[] = [];
  for (const e of events) {
    const data = JSON.stringify(e.data ?? null);
    const metadata = JSON.stringify(e.metadata ?? {});
    bytes += Buffer.byteLength(e.type, 'utf8') + Buffer.byteLength(data, 'utf8') + Buffer.byteLength(metadata, 'utf8');
    out.push({ id: e.id, type: e.type, data, metadata });
  }
  return { events: out, bytes };
}

/**
 * JSON.stringify writes a NUL and an unpaired surrogate, the strings a store cannot keep, as
 * these escapes: a text without one holds neither. (A text with one may not: an escaped
 * backslash before "u0000" reads the same here.)
 */
const MAY_HOLD_UNSTORABLE = /\\u(?:0000|d[89a-f])/i;

/**
 * The append's events serialised once, after the rules every adapter applies: the size limit
 * (see appendBytes) and no string a store cannot keep. The SQL store sends this very text.
 */
export function checkedForAppend(stream: string, events: readonly NewEvent[], limit: number): SerializedEvent[] {
  const { events: out, bytes } = serialized(events);
  if (bytes > limit) throw new AppendTooLargeError(stream, bytes, limit);
  for (let i = 0; i < events.length; i++) {
    // The edge refuses such strings already; this keeps every other writer to the same rule.
    // Only a text that may hold one is walked, to name the field.
    if (!MAY_HOLD_UNSTORABLE.test(out[i].data) && !MAY_HOLD_UNSTORABLE.test(out[i].metadata)) continue;
    const event = events[i];
    const bad = inspectJson({ data: event.data ?? null, metadata: event.metadata ?? {} }, Number.POSITIVE_INFINITY);
    if (bad) throw new UnstorableEventError(stream, event.type, bad.param ?? '');
  }
  return out;
}

export function assertAppendSize(stream: string, events: readonly NewEvent[], limit: number): void {
  checkedForAppend(stream, events, limit);
}

/** Throws unless `expected` holds for a stream whose last revision is `current` (-1n: missing). */
export function checkExpected(stream: string, expected: ExpectedRevision, current: bigint): void {
  const ok =
    expected === 'any' ||
    (expected === 'no_stream' && current === -1n) ||
    (expected === 'stream_exists' && current >= 0n) ||
    (typeof expected === 'bigint' && expected === current);
  if (!ok) throw new WrongExpectedVersionError(stream, expected, current);
}

/**
 * Subscription filter: an event passes when its stream starts with one of `streamPrefixes`
 * AND its type is one of `eventTypes`. An absent or empty list does not restrict.
 */
export function eventFilter(filter: SubscribeOptions['filter']): (event: RecordedEvent) => boolean {
  const prefixes = filter?.streamPrefixes?.length ? filter.streamPrefixes : undefined;
  const types = filter?.eventTypes?.length ? new Set(filter.eventTypes) : undefined;
  return (event) => (!prefixes || prefixes.some((p) => event.stream.startsWith(p))) && (!types || types.has(event.type));
}

/**
 * The store, not the events, is at fault: a lost or refused connection, a server shutting down,
 * out of resources, a statement or lock timeout (PostgreSQL), or EventStoreDB's gRPC equivalents.
 * Deciding the commands one by one would only repeat the failure, each attempt as slow as the
 * first; whoever must not lose its command (a charge) retries it later, as a whole.
 */
export function storeUnavailable(err: unknown): boolean {
  if (isConnectionFailure(err)) return true;
  const { code, type } = (err ?? {}) as { code?: unknown; type?: unknown };
  if (typeof code === 'string' && (code === '57014' || code === '55P03' || code.startsWith('53'))) return true;
  return typeof type === 'string' && ESDB_UNAVAILABLE.has(type);
}
const ESDB_UNAVAILABLE = new Set(['unavailable', 'deadline-exceeded', 'timeout', 'not-leader', 'cancelled']);
