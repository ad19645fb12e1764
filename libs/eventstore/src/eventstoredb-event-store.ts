import {
  BACKWARDS,
  END,
  EventStoreDBClient,
  FORWARDS,
  START as FROM_START,
  MaxAppendSizeExceededError,
  StreamNotFoundError,
  WrongExpectedVersionError as EsdbWrongExpectedVersionError,
  eventTypeFilter,
  excludeSystemEvents,
  jsonEvent,
  streamNameFilter,
  type AllStreamSubscription,
  type AppendResult as EsdbAppendResult,
  type EventData,
  type Filter,
  type JSONType,
  type Position as EsdbPosition,
  type RecordedEvent as EsdbRecordedEvent,
} from '@eventstore/db-client';
import { appendBytes, assertAppendSize, checkExpected, eventFilter } from './common';
import {
  AppendTooLargeError,
  asRecorded,
  DEFAULT_MAX_APPEND_BYTES,
  WrongExpectedVersionError,
  type AppendHint,
  type AppendResult,
  type EventMetadata,
  type EventStore,
  type ExpectedRevision,
  type NewEvent,
  type Position,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type SubscribeOptions,
  type Upcaster,
  type Subscription,
} from './port';
import { START, decodePosition, encodePosition } from './position';

export interface EventStoreDbEventStoreOptions {
  /** Refused client-side, counted as every adapter counts (see common.ts appendBytes). */
  maxAppendBytes?: number;
  /** What every read hands out for an event as recorded (see Upcaster). Default: the event as recorded. */
  upcast?: Upcaster;
}

/** Events per `$all` read request. */
const READ_PAGE = 500;
/** Delay before a failed live watch is re-opened. */
const WATCH_RETRY_MS = 1000;
/** What servers before 22.6 put in the position of an event read from a stream: none. */
const NO_POSITION = 2n ** 64n - 1n;

/**
 * The port on EventStoreDB (`@eventstore/db-client` 6.x, gRPC), mapped 1:1: expected
 * revisions are the client's, idempotent retries are the server's (it recognises event ids
 * at the expected place), and a position is `$all`'s (commit, prepare) pair.
 *
 * System events (type starting with `$`: stream metadata, links, statistics) are not part of
 * the domain and are skipped by global reads and subscriptions.
 */
export class EventStoreDbEventStore implements EventStore {
  readonly name = 'eventstoredb' as const;
  private readonly client: EventStoreDBClient;
  private readonly maxAppendBytes: number;
  private readonly listeners = new Set<{ listener: (hint: AppendHint) => void }>();
  private readonly subscriptions = new Set<Subscription>();
  private live?: AllStreamSubscription;
  private liveRetry?: NodeJS.Timeout;
  private closed = false;
  private readonly upcast: Upcaster;

  /** `connectionString`: `esdb://host:2113?tls=false` and the like (EVENTSTORE_URL). */
  constructor(connectionString: string, options: EventStoreDbEventStoreOptions = {}) {
    this.client = EventStoreDBClient.connectionString(connectionString);
    this.maxAppendBytes = options.maxAppendBytes ?? DEFAULT_MAX_APPEND_BYTES;
    this.upcast = options.upcast ?? asRecorded;
  }

  /** Nothing to create: streams exist once written to. */
  async init(): Promise<void> {}

  async append(stream: string, events: NewEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    assertAppendSize(stream, events, this.maxAppendBytes);
    // As in SqlEventStore: an empty append checks the expectation and returns the current
    // state. Here the check is a read, not atomic with anything; it cannot write anyway.
    if (events.length === 0) {
      const [last] = await this.readStream(stream, { direction: 'backwards', maxCount: 1 });
      checkExpected(stream, expected, last ? last.revision : -1n);
      return { nextRevision: last ? last.revision : -1n, position: last ? last.position : START };
    }

    let result: EsdbAppendResult;
    try {
      result = await this.client.appendToStream(stream, events.map(toEventData), { expectedRevision: expected });
    } catch (err) {
      if (err instanceof EsdbWrongExpectedVersionError) {
        const actual = err.actualVersion === 'no_stream' ? -1n : err.actualVersion;
        throw new WrongExpectedVersionError(stream, expected, actual);
      }
      if (err instanceof MaxAppendSizeExceededError) {
        throw new AppendTooLargeError(stream, appendBytes(events), err.maxAppendSize);
      }
      throw err;
    }
    // Only when the connection string says throwOnAppendFailure=false.
    if (!result.success) throw new WrongExpectedVersionError(stream, expected, result.nextExpectedRevision);

    const position = await this.positionOfRevision(stream, result);
    this.signalAppend();
    return { nextRevision: result.nextExpectedRevision, position };
  }

  /**
   * The append result's position is that of the write, which for several events need not
   * be the last event's own `$all` position (and an idempotent retry may report none).
   * Reading the last event back gives exactly what readAll will report for it. Servers
   * before 22.6 give no position on stream reads; the write's position is then the best
   * there is.
   */
  private async positionOfRevision(stream: string, result: EsdbAppendResult): Promise<Position> {
    const [last] = await this.readStream(stream, { fromRevision: result.nextExpectedRevision, maxCount: 1 });
    if (last?.position) return last.position;
    if (result.position && result.position.commit >= 0n && result.position.prepare >= 0n) {
      return encodePosition(result.position.commit, result.position.prepare);
    }
    throw new Error(`EventStoreDB reported no position for the append to ${stream}`);
  }

  async readStream(stream: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    if (options.maxCount === 0) return [];
    const backwards = options.direction === 'backwards';
    const reading = this.client.readStream(stream, {
      direction: backwards ? BACKWARDS : FORWARDS,
      fromRevision: options.fromRevision ?? (backwards ? END : FROM_START),
      ...(options.maxCount === undefined ? {} : { maxCount: options.maxCount }),
    });
    const out: RecordedEvent[] = [];
    try {
      for await (const resolved of reading) if (resolved.event) out.push(this.upcast(toRecorded(resolved.event)));
    } catch (err) {
      if (err instanceof StreamNotFoundError) return [];
      throw err;
    }
    return out;
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const limit = options.maxCount ?? Infinity;
    const out: RecordedEvent[] = [];
    if (limit <= 0) return out;
    for await (const event of this.eventsAfter(options.after ?? START)) {
      out.push(event);
      if (out.length >= limit) break;
    }
    return out;
  }

  /** Reads the log to count: meant for lag and progress, not for hot paths. */
  async countEventsAfter(after?: Position): Promise<number> {
    let count = 0;
    for await (const _ of this.eventsAfter(after ?? START)) count++;
    return count;
  }

  /**
   * Non-system events strictly after `after`, in `$all` order, page by page. A read from a
   * position may include the event at that very position, so each page skips what is not
   * strictly after where the previous one ended.
   */
  private async *eventsAfter(after: Position): AsyncGenerator<RecordedEvent> {
    let from = after;
    for (;;) {
      const page: EsdbRecordedEvent[] = [];
      const reading = this.client.readAll({ fromPosition: from ? toEsdbPosition(from) : FROM_START, maxCount: READ_PAGE });
      for await (const resolved of reading) if (resolved.event) page.push(resolved.event);
      for (const raw of page) {
        const event = this.upcast(toRecorded(raw));
        if (event.position <= from) continue;
        from = event.position;
        if (!isSystemEvent(raw)) yield event;
      }
      if (page.length < READ_PAGE) return;
    }
  }

  /**
   * The server's catch-up subscription: history, then live, filtered server-side on stream
   * prefixes or, failing those, event types (the server filters on one of the two; the
   * other, and system events, are filtered here). Backpressure keeps one handler call at a
   * time: the next event is pulled once the handler's promise settles.
   */
  subscribeToAll(
    options: SubscribeOptions,
    handler: (event: RecordedEvent) => Promise<void> | void,
    onError: (err: unknown) => void = (err) => console.error('event store subscription stopped', err),
  ): Subscription {
    if (this.closed) throw new Error('EventStoreDbEventStore is closed');
    const after = options.after ?? START;
    const matches = eventFilter(options.filter);
    const source = this.client.subscribeToAll({
      fromPosition: after ? toEsdbPosition(after) : FROM_START,
      filter: serverFilter(options.filter),
    });
    let stopped = false;
    let inHandler = false;
    let released: Promise<void> | undefined;
    // Cancels the server call, and destroys the stream so that an iteration waiting for
    // the next event ends (with an error of its own, not reported).
    const release = () =>
      (released ??= (async () => {
        await source.unsubscribe().catch(() => undefined);
        source.destroy();
      })());

    const run = async () => {
      for await (const resolved of source) {
        if (stopped) return;
        if (!resolved.event || isSystemEvent(resolved.event)) continue;
        const event = this.upcast(toRecorded(resolved.event));
        if (event.position <= after || !matches(event)) continue;
        inHandler = true;
        await handler(event);
        inHandler = false;
      }
      if (!stopped) throw new Error('EventStoreDB ended the subscription');
    };
    const finished = run()
      .catch((err: unknown) => {
        if (inHandler || !stopped) onError(err);
      })
      .finally(async () => {
        stopped = true;
        this.subscriptions.delete(subscription);
        await release();
      });
    const subscription: Subscription = {
      stop: async () => {
        stopped = true;
        await release();
        await finished;
      },
    };
    this.subscriptions.add(subscription);
    return subscription;
  }

  /**
   * In-process signals after this store's appends, plus one live subscription to `$all`
   * (from the end, system events excluded) shared by all watchers, for other processes'.
   */
  watchAppends(listener: (hint: AppendHint) => void): () => void {
    const entry = { listener };
    this.listeners.add(entry);
    if (!this.closed && !this.live) this.openLiveWatch();
    return () => {
      if (this.listeners.delete(entry) && this.listeners.size === 0) void this.closeLiveWatch();
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    this.listeners.clear();
    await this.closeLiveWatch();
    await this.client.dispose();
  }

  private openLiveWatch(): void {
    const live = this.client.subscribeToAll({ fromPosition: END, filter: excludeSystemEvents() });
    live.on('data', () => this.signalAppend());
    live.on('error', () => {
      if (this.live !== live) return;
      this.live = undefined;
      live.destroy();
      // Readers keep polling meanwhile; the watch is only a hint.
      this.liveRetry = setTimeout(() => {
        if (!this.closed && !this.live && this.listeners.size > 0) this.openLiveWatch();
      }, WATCH_RETRY_MS);
      this.liveRetry.unref();
    });
    this.live = live;
  }

  private async closeLiveWatch(): Promise<void> {
    clearTimeout(this.liveRetry);
    const live = this.live;
    this.live = undefined;
    if (!live) return;
    await live.unsubscribe().catch(() => undefined);
    live.destroy();
  }

  /**
   * This process's watchers only: EventStoreDB has no channel beside the log to reach the
   * others, which then read at their own pace (their gathering wait), as before.
   */
  requestCatchUp(): void {
    if (!this.closed) this.signalAppend('catch-up');
  }

  private signalAppend(hint: AppendHint = 'appended'): void {
    for (const { listener } of this.listeners) {
      try {
        listener(hint);
      } catch {
        // A watcher is only told to look again; its failure is not the append's concern.
      }
    }
  }
}

function toEventData(event: NewEvent): EventData {
  return jsonEvent({
    id: event.id,
    type: event.type,
    // The client stringifies `data` whatever it is; its JSONType just leaves out scalars.
    data: (event.data ?? null) as JSONType,
    metadata: event.metadata ?? {},
  });
}

function toRecorded(event: EsdbRecordedEvent): RecordedEvent {
  const { metadata, position } = event;
  return {
    id: event.id,
    type: event.type,
    data: event.data,
    metadata: isPlainObject(metadata) ? (metadata as EventMetadata) : {},
    stream: event.streamId,
    revision: event.revision,
    position: position && position.commit !== NO_POSITION ? encodePosition(position.commit, position.prepare) : START,
  };
}

function toEsdbPosition(position: Position): EsdbPosition {
  const { major, minor } = decodePosition(position);
  return { commit: major, prepare: minor };
}

function isSystemEvent(event: EsdbRecordedEvent): boolean {
  return event.type.startsWith('$');
}

function isPlainObject(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
}

function serverFilter(filter: SubscribeOptions['filter']): Filter {
  if (filter?.streamPrefixes?.length) return streamNameFilter({ prefixes: filter.streamPrefixes });
  if (filter?.eventTypes?.length) {
    const alternatives = filter.eventTypes.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|');
    return eventTypeFilter({ regex: `^(?:${alternatives})$` });
  }
  return excludeSystemEvents();
}
