import {
  BACKWARDS,
  CancelledError,
  DeadlineExceededError,
  END,
  EventStoreDBClient,
  FORWARDS,
  START as FROM_START,
  MaxAppendSizeExceededError,
  NotLeaderError,
  StreamNotFoundError,
  TimeoutError,
  UnavailableError,
  WrongExpectedVersionError as EsdbWrongExpectedVersionError,
  convertToCommandError,
  eventTypeFilter,
  excludeSystemEvents,
  jsonEvent,
  streamNameFilter,
  type AllStreamSubscription,
  type EventData,
  type Filter,
  type JSONType,
  type Position as EsdbPosition,
  type RecordedEvent as EsdbRecordedEvent,
} from '@eventstore/db-client';
import { parseEventStoreUrl, systemClock, type Clock } from '@svc/platform';
import { appendBytes, assertAppendSize, checkExpected, eventFilter } from './common';
import {
  DEFAULT_RETRY_POLICY,
  EventStoreDbUnavailableError,
  retryDecision,
  revisionOfAppended,
  type FailureKind,
  type RetryPolicy,
} from './eventstoredb-retry';
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
  /** How long and how often a call is repeated through a leader change (eventstoredb-retry.ts). */
  retry?: RetryPolicy;
  /** What the retry budget is measured with. */
  clock?: Clock;
  /** The wait between two attempts. */
  sleep?: (ms: number) => Promise<void>;
}

/** Events per `$all` read request. */
const READ_PAGE = 500;
/** Delay before a failed live watch is re-opened. */
const WATCH_RETRY_MS = 1000;
/** What servers before 22.6 put in the position of an event read from a stream: none. */
const NO_POSITION = 2n ** 64n - 1n;
/** How far back from a stream's end a retried append looks for its own events when no revision was expected. */
const RETRY_TAIL = 100;

/**
 * The port on EventStoreDB (`@eventstore/db-client` 6.x, gRPC), mapped 1:1: expected
 * revisions are the client's, and a position is `$all`'s (commit, prepare) pair, the same on
 * every node of a cluster.
 *
 * On a cluster, appends (and the reads that complete them) require the leader: a follower
 * answers NotLeader naming it, and the client reconnects there. Other reads and subscriptions
 * follow the connection, which is the leader unless EVENTSTORE_URL prefers another member
 * (docs/operations.md). A call that fails while the cluster changes leader or the connection
 * is lost is repeated within a bounded time (retrying, eventstoredb-retry.ts); an append is
 * repeated with the same event ids and expected revision, which the server recognises as the
 * same write, and a retried append is checked against the stream's tail so that one the old
 * leader wrote, but whose answer was lost, is reported done rather than written twice.
 *
 * System events (type starting with `$`: stream metadata, links, statistics) are not part of
 * the domain and are skipped by global reads and subscriptions.
 */
export class EventStoreDbEventStore implements EventStore {
  readonly name = 'eventstoredb' as const;
  private client: EventStoreDBClient;
  private readonly connectionString: string;
  /** nodePreference=leader: every call, not only appends, requires the leader (a demoted node answers NotLeader). */
  private readonly readsOnLeader: boolean;
  /** Clients replaced after a failed discovery, kept until the subscriptions opened on them end. */
  private readonly retired = new Set<EventStoreDBClient>();
  /** Subscriptions (and the live watch) open on each client. */
  private readonly streamsOn = new Map<EventStoreDBClient, number>();
  private readonly retryPolicy: RetryPolicy;
  private readonly clock: Clock;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly maxAppendBytes: number;
  private readonly listeners = new Set<{ listener: (hint: AppendHint) => void }>();
  private readonly subscriptions = new Set<Subscription>();
  private live?: AllStreamSubscription;
  private liveClient?: EventStoreDBClient;
  private liveRetry?: NodeJS.Timeout;
  private closed = false;
  private readonly upcast: Upcaster;

  /** `connectionString`: EVENTSTORE_URL, one node or a cluster (see parseEventStoreUrl). */
  constructor(connectionString: string, options: EventStoreDbEventStoreOptions = {}) {
    let url: ReturnType<typeof parseEventStoreUrl>;
    try {
      url = parseEventStoreUrl(connectionString);
    } catch (err) {
      throw new Error(`EventStoreDB connection string: ${(err as Error).message}`, { cause: err });
    }
    this.connectionString = url.clientConnectionString;
    this.readsOnLeader = url.nodePreference === 'leader';
    this.client = EventStoreDBClient.connectionString(this.connectionString);
    this.maxAppendBytes = options.maxAppendBytes ?? DEFAULT_MAX_APPEND_BYTES;
    this.upcast = options.upcast ?? asRecorded;
    this.retryPolicy = options.retry ?? DEFAULT_RETRY_POLICY;
    this.clock = options.clock ?? systemClock;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  /**
   * Runs `call` until it succeeds, fails for a reason repetition cannot change, or the retry
   * budget is spent (then: EventStoreDbUnavailableError, an outage to the callers).
   */
  private async retrying<T>(operation: string, call: (client: EventStoreDBClient, attempt: number) => Promise<T>): Promise<T> {
    const started = this.clock.now().getTime();
    for (let attempt = 1; ; attempt++) {
      const client = this.client;
      try {
        return await call(client, attempt);
      } catch (err) {
        const kind = failureKind(err);
        const elapsed = this.clock.now().getTime() - started;
        const decision = retryDecision(kind, attempt, elapsed, this.retryPolicy);
        if (kind === 'other' || this.closed) throw err;
        if (!decision.retry) throw new EventStoreDbUnavailableError(operation, attempt, elapsed, kind, err);
        if (kind === 'discovery') this.renewClient(client);
        if (decision.afterMs > 0) await this.sleep(decision.afterMs);
      }
    }
  }

  /**
   * Once discovery has failed, this client's appends fail at once forever after: it keeps the
   * rejected promise of its first server-features call (dist/Client/index.js, `capabilities`),
   * while its reads discover again. A fresh client discovers again for everything. The old one
   * is disposed when nothing of ours is open on it: disposing cancels its streams, and its
   * subscriptions swallow their own cancellation (an iteration would wait forever).
   */
  private renewClient(failed: EventStoreDBClient): void {
    if (this.client !== failed || this.closed) return;
    this.client = EventStoreDBClient.connectionString(this.connectionString);
    if (this.streamsOn.get(failed)) this.retired.add(failed);
    else void failed.dispose();
  }

  private opened(client: EventStoreDBClient): void {
    this.streamsOn.set(client, (this.streamsOn.get(client) ?? 0) + 1);
  }

  private released(client: EventStoreDBClient): void {
    const open = (this.streamsOn.get(client) ?? 1) - 1;
    if (open > 0) return void this.streamsOn.set(client, open);
    this.streamsOn.delete(client);
    if (this.retired.delete(client)) void client.dispose();
  }

  /** Nothing to create: streams exist once written to. */
  async init(): Promise<void> {}

  async append(stream: string, events: NewEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    assertAppendSize(stream, events, this.maxAppendBytes);
    // As in SqlEventStore: an empty append checks the expectation and returns the current
    // state. Here the check is a read, not atomic with anything; it cannot write anyway.
    if (events.length === 0) {
      const [last] = await this.read(stream, { direction: 'backwards', maxCount: 1 }, true);
      checkExpected(stream, expected, last ? last.revision : -1n);
      return { nextRevision: last ? last.revision : -1n, position: last ? last.position : START };
    }

    // The same EventData (ids included) on every attempt: the server recognises a repeated
    // write of the same ids at the same expected revision as the one it already made ("The
    // EventStoreDB server will assure idempotency for all operations using any value in
    // ExpectedVersion except ANY", @eventstore/db-client dist/types/index.d.ts), but only while
    // they are in its cache of recent event ids. Past it, or for `any`, the tail is what tells.
    const data = events.map(toEventData);
    const ids = data.map((e) => e.id);
    let written: { nextRevision: bigint; position?: EsdbPosition };
    try {
      written = await this.retrying(`append to ${stream}`, async (client, attempt) => {
        if (attempt > 1) {
          const done = await this.alreadyAppended(stream, ids, expected);
          if (done !== null) return { nextRevision: done };
        }
        try {
          const result = await client.appendToStream(stream, data, { expectedRevision: expected, requiresLeader: true });
          // Only when the connection string says throwOnAppendFailure=false.
          if (!result.success) throw new WrongExpectedVersionError(stream, expected, result.nextExpectedRevision);
          return { nextRevision: result.nextExpectedRevision, position: result.position };
        } catch (err) {
          // After a lost answer, a wrong expected version may be our own first write.
          if (attempt > 1 && (err instanceof EsdbWrongExpectedVersionError || err instanceof WrongExpectedVersionError)) {
            const done = await this.alreadyAppended(stream, ids, expected);
            if (done !== null) return { nextRevision: done };
          }
          throw err;
        }
      });
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

    const position = await this.positionOfRevision(stream, written);
    this.signalAppend();
    return { nextRevision: written.nextRevision, position };
  }

  /**
   * The revision of the last of `ids` if they are already in the stream, together and in order,
   * where `expected` would have put them (any place near the end for `any` or `stream_exists`).
   */
  private async alreadyAppended(stream: string, ids: string[], expected: ExpectedRevision): Promise<bigint | null> {
    if (typeof expected === 'bigint' || expected === 'no_stream') {
      const first = expected === 'no_stream' ? 0n : expected + 1n;
      return revisionOfAppended(ids, await this.read(stream, { fromRevision: first, maxCount: ids.length }, true, false));
    }
    const tail = await this.read(stream, { direction: 'backwards', maxCount: ids.length + RETRY_TAIL }, true, false);
    return revisionOfAppended(ids, tail.reverse());
  }

  /**
   * The append result's position is that of the write, which for several events need not be
   * the last event's own `$all` position (and an idempotent retry, or one found in the tail,
   * has none). Reading the last event back gives exactly what readAll will report for it.
   * Servers before 22.6 give no position on stream reads; the write's position is then the
   * best there is.
   */
  private async positionOfRevision(stream: string, written: { nextRevision: bigint; position?: EsdbPosition }): Promise<Position> {
    const [last] = await this.read(stream, { fromRevision: written.nextRevision, maxCount: 1 }, true);
    if (last?.position) return last.position;
    const { position } = written;
    if (position && position.commit >= 0n && position.prepare >= 0n) return encodePosition(position.commit, position.prepare);
    throw new Error(`EventStoreDB reported no position for the append to ${stream}`);
  }

  async readStream(stream: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    return this.read(stream, options, this.readsOnLeader);
  }

  /**
   * `onLeader`: what an append must see (its own write), wherever the connection prefers to
   * read. `retried`: false inside an append's attempt, which the append's own retry repeats.
   */
  private async read(stream: string, options: ReadStreamOptions, onLeader: boolean, retried = true): Promise<RecordedEvent[]> {
    if (options.maxCount === 0) return [];
    const backwards = options.direction === 'backwards';
    const attempt = async (client: EventStoreDBClient) => {
      const reading = client.readStream(stream, {
        direction: backwards ? BACKWARDS : FORWARDS,
        fromRevision: options.fromRevision ?? (backwards ? END : FROM_START),
        requiresLeader: onLeader,
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
    };
    return retried ? this.retrying(`read of ${stream}`, attempt) : attempt(this.client);
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
      const start = from;
      const page = await this.retrying('read of $all', async (client) => {
        const events: EsdbRecordedEvent[] = [];
        const reading = client.readAll({
          fromPosition: start ? toEsdbPosition(start) : FROM_START,
          maxCount: READ_PAGE,
          requiresLeader: this.readsOnLeader,
        });
        for await (const resolved of reading) if (resolved.event) events.push(resolved.event);
        return events;
      });
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
   *
   * When the server drops it (a leader change, a lost connection), it is opened again after
   * the last event received, within the retry budget, counted from the first of a run of
   * failures (a confirmed or delivering subscription ends the run). A handler's failure is
   * never retried here: it stops the subscription and goes to `onError`.
   */
  subscribeToAll(
    options: SubscribeOptions,
    handler: (event: RecordedEvent) => Promise<void> | void,
    onError: (err: unknown) => void = (err) => console.error('event store subscription stopped', err),
  ): Subscription {
    if (this.closed) throw new Error('EventStoreDbEventStore is closed');
    const matches = eventFilter(options.filter);
    const filter = serverFilter(options.filter);
    let from = options.after ?? START;
    let stopped = false;
    let inHandler = false;
    let current: { source: AllStreamSubscription; client: EventStoreDBClient; released?: Promise<void> } | undefined;
    let wake: (() => void) | undefined;

    const open = () => {
      const client = this.client;
      const source = client.subscribeToAll({
        fromPosition: from ? toEsdbPosition(from) : FROM_START,
        filter,
        requiresLeader: this.readsOnLeader,
      });
      this.opened(client);
      return (current = { source, client });
    };
    // Cancels the server call, and destroys the stream so that an iteration waiting for
    // the next event ends (with an error of its own, not reported).
    const release = (opened: NonNullable<typeof current>) =>
      (opened.released ??= (async () => {
        await opened.source.unsubscribe().catch(() => undefined);
        opened.source.destroy();
        this.released(opened.client);
      })());

    const run = async () => {
      let failing: { attempts: number; since: number } | undefined;
      while (!stopped) {
        const opened = open();
        opened.source.once('confirmation', () => (failing = undefined));
        try {
          for await (const resolved of opened.source) {
            failing = undefined;
            if (stopped) return;
            if (!resolved.event) continue;
            const recorded = toRecorded(resolved.event);
            if (recorded.position <= from) continue;
            from = recorded.position;
            if (isSystemEvent(resolved.event)) continue;
            const event = this.upcast(recorded);
            if (!matches(event)) continue;
            inHandler = true;
            await handler(event);
            inHandler = false;
          }
          if (!stopped) throw new Error('EventStoreDB ended the subscription');
          return;
        } catch (err) {
          if (stopped || inHandler) throw err;
          const kind = failureKind(err);
          failing ??= { attempts: 0, since: this.clock.now().getTime() };
          failing.attempts++;
          const elapsed = this.clock.now().getTime() - failing.since;
          const decision = retryDecision(kind, failing.attempts, elapsed, this.retryPolicy);
          if (kind === 'other' || this.closed) throw err;
          if (!decision.retry) throw new EventStoreDbUnavailableError('subscription to $all', failing.attempts, elapsed, kind, err);
          if (kind === 'discovery') this.renewClient(opened.client);
          await release(opened);
          if (decision.afterMs > 0 && !stopped) {
            await new Promise<void>((resolve) => {
              wake = resolve;
              void this.sleep(decision.afterMs).then(resolve);
            });
          }
        }
      }
    };
    const finished = run()
      .catch((err: unknown) => {
        if (inHandler || !stopped) onError(err);
      })
      .finally(async () => {
        stopped = true;
        this.subscriptions.delete(subscription);
        if (current) await release(current);
      });
    const subscription: Subscription = {
      stop: async () => {
        stopped = true;
        wake?.();
        if (current) await release(current);
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
    await Promise.all([this.client, ...this.retired].map((client) => client.dispose()));
    this.retired.clear();
  }

  private openLiveWatch(): void {
    const client = this.client;
    const live = client.subscribeToAll({ fromPosition: END, filter: excludeSystemEvents(), requiresLeader: this.readsOnLeader });
    this.opened(client);
    this.liveClient = client;
    live.on('data', () => this.signalAppend());
    live.on('error', () => {
      if (this.live !== live) return;
      this.live = undefined;
      live.destroy();
      this.released(client);
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
    if (this.liveClient) this.released(this.liveClient);
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

/**
 * What a failure says about repeating the call. The client converts server errors to its
 * classes only on some paths (a failed server-features call reaches us as a raw gRPC error),
 * hence the conversion; a failed discovery is a plain Error (dist/Client/discovery.js).
 */
function failureKind(err: unknown): FailureKind {
  if (err instanceof Error && /^Failed to discover after \d+ attempts/.test(err.message)) return 'discovery';
  let e = err;
  try {
    if (typeof err === 'object' && err !== null) e = convertToCommandError(err as Error);
  } catch {
    // Not one of the client's: it reads fields only its own errors are sure to have.
  }
  if (e instanceof NotLeaderError) return 'not-leader';
  if (e instanceof UnavailableError) return 'unavailable';
  if (e instanceof DeadlineExceededError) return 'deadline';
  if (e instanceof TimeoutError) return 'timeout';
  if (e instanceof CancelledError) return 'cancelled';
  return 'other';
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
