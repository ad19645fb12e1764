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
  let bytes = 0;
  for (const e of events) {
    bytes += Buffer.byteLength(e.type, 'utf8');
    bytes += Buffer.byteLength(JSON.stringify(e.data ?? null), 'utf8');
    bytes += Buffer.byteLength(JSON.stringify(e.metadata ?? {}), 'utf8');
  }
  return bytes;
}

export function assertAppendSize(stream: string, events: readonly NewEvent[], limit: number): void {
  const bytes = appendBytes(events);
  if (bytes > limit) throw new AppendTooLargeError(stream, bytes, limit);
  for (const event of events) {
    // The edge refuses such strings already; this keeps every other writer to the same rule.
    const bad = inspectJson({ data: event.data ?? null, metadata: event.metadata ?? {} }, Number.POSITIVE_INFINITY);
    if (bad) throw new UnstorableEventError(stream, event.type, bad.param ?? '');
  }
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
  return (event) =>
    (!prefixes || prefixes.some((p) => event.stream.startsWith(p))) && (!types || types.has(event.type));
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
