/**
 * The event store port (ARCHITECTURE section 3). Every adapter (postgres, pglite,
 * eventstoredb) implements it and passes the same contract suite in ./testing/contract.ts.
 */

/** Revisions count from 0, as in EventStoreDB: the first event of a stream is revision 0n. */
export type ExpectedRevision = 'any' | 'no_stream' | 'stream_exists' | bigint;

/**
 * Opaque, comparable global position. Every adapter encodes its position as two unsigned
 * 64-bit numbers zero-padded to 20 digits, `"<major>/<minor>"`, so that plain string
 * comparison orders positions (see ./position.ts). The empty string is "before everything".
 */
export type Position = string;

export interface EventMetadata {
  correlationId?: string;
  causationId?: string;
  actor?: string;
  ip?: string;
  /** ISO date-time the command was decided at (from the injected clock, never the store's). */
  at?: string;
  [key: string]: unknown;
}

export interface NewEvent<Type extends string = string, Data = unknown> {
  /** uuid; re-appending the same ids at the same place is an idempotent no-op. */
  id: string;
  type: Type;
  data: Data;
  metadata?: EventMetadata;
}

export interface RecordedEvent<Type extends string = string, Data = unknown> {
  id: string;
  type: Type;
  data: Data;
  metadata: EventMetadata;
  stream: string;
  revision: bigint;
  position: Position;
}

/**
 * Turns an event as it was recorded into the shape its readers expect today. The log is never
 * rewritten, so an event type whose data grew stays old in the log; the store reads every event
 * through the upcaster it was given (read stream, read all, subscriptions, the read of an
 * exclusive append), so no reader has to remember to. It must be pure and leave events it does
 * not know as they are.
 */
export type Upcaster = (event: RecordedEvent) => RecordedEvent;

/** Reads events as recorded. */
export const asRecorded: Upcaster = (event) => event;

/** One upcaster applying each of `upcasters` in turn (each context contributes its own). */
export function upcastWith(...upcasters: Upcaster[]): Upcaster {
  return (event) => upcasters.reduce((e, upcast) => upcast(e), event);
}

export interface AppendResult {
  /** Revision of the last event now in the stream (so the next expected revision). */
  nextRevision: bigint;
  /** Position of the last appended event. */
  position: Position;
}

export interface ReadStreamOptions {
  fromRevision?: bigint;
  direction?: 'forwards' | 'backwards';
  maxCount?: number;
}

export interface ReadAllOptions {
  /** Exclusive: events strictly after this position. */
  after?: Position;
  maxCount?: number;
}

export interface SubscribeOptions {
  after?: Position;
  filter?: { streamPrefixes?: string[]; eventTypes?: string[] };
}

export interface Subscription {
  /** Resolves once no handler call is running and none will start. */
  stop(): Promise<void>;
}

/** Why a watcher of appends is called (EventStore.watchAppends). */
export type AppendHint = 'appended' | 'catch-up';

export interface EventStore {
  readonly name: 'postgres' | 'pglite' | 'eventstoredb';
  /** Creates tables and the like; idempotent. */
  init(): Promise<void>;
  append(stream: string, events: NewEvent[], expected: ExpectedRevision): Promise<AppendResult>;
  /** A stream that does not exist reads as []. */
  readStream(stream: string, options?: ReadStreamOptions): Promise<RecordedEvent[]>;
  /** Global order; never skips an event whose transaction committed late. */
  readAll(options?: ReadAllOptions): Promise<RecordedEvent[]>;
  /**
   * Catch-up then live. The handler is awaited: events are delivered one at a time, in
   * global order. A handler error stops the subscription and is passed to `onError`.
   */
  subscribeToAll(options: SubscribeOptions, handler: (event: RecordedEvent) => Promise<void> | void, onError?: (err: unknown) => void): Subscription;
  /**
   * Calls `listener` soon after events may have been appended by this or another process
   * (`appended`), and when a reader somewhere waits to see what was appended (`catch-up`, see
   * requestCatchUp). A hint for readers to poll again; it never decides what they read.
   * Returns an unsubscribe function.
   */
  watchAppends(listener: (hint: AppendHint) => void): () => void;
  /**
   * Tells the watchers that a reader waits to see what was appended: one that gathers appends
   * before it reads (a projection runner under load) should read now. A hint, as watchAppends'
   * calls are: reaching every process is the adapter's best effort.
   */
  requestCatchUp(): void;
  /** Number of events strictly after `after` (all when omitted); for lag and progress. */
  countEventsAfter(after?: Position): Promise<number>;
  /**
   * Optional (the SQL adapters, whose global reads stop below the oldest transaction still open
   * on the server): the position of the last event committed, which readAll may not return yet;
   * START for an empty log. A reader that must have applied everything committed so far reads
   * until it has passed this.
   */
  lastCommittedPosition?(): Promise<Position>;
  /**
   * Optional (the SQL adapters): reads the stream after revision `after` and appends what
   * `decide` makes of those events, expecting the revision it read, with the stream's lock held
   * from the read to the commit, so no other append of the stream can come between them and
   * the append cannot conflict. A writer that lost an optimistic race takes its turn this way
   * instead of racing again (issue 41 A): waiters on one lock are served in turn, so a hot
   * stream written from several processes starves none of them. `decide` is synchronous and
   * may run only once; an empty answer writes nothing.
   */
  appendExclusive?(stream: string, after: bigint, decide: (newer: RecordedEvent[]) => NewEvent[]): Promise<ExclusiveAppendResult>;
  /**
   * Optional (the SQL adapters): the latest snapshot kept of `stream`'s state, or null. A
   * snapshot is a cache of a fold of the stream's events, never the truth: the events are.
   */
  readSnapshot?(stream: string): Promise<StreamSnapshot | null>;
  /**
   * Keeps `snapshot` as the stream's latest unless one of a later revision, of the same
   * version, is already kept. Best effort: its caller does not wait on it for anything.
   */
  writeSnapshot?(stream: string, snapshot: StreamSnapshot): Promise<void>;
  close(): Promise<void>;
}

/**
 * A stream's state folded up to `revision`, as its decider's snapshot codec wrote it (plain
 * JSON), under the codec's `version`: a reader whose codec has another version ignores it.
 */
export interface StreamSnapshot {
  revision: bigint;
  /** The id of the event at `revision`: a reader checks the log still has it there (a backup restored beside newer snapshots would not). */
  eventId: string;
  version: string;
  state: unknown;
}

export interface ExclusiveAppendResult {
  /** The stream's last revision once the append is done (-1n for a stream with no events). */
  revision: bigint;
  /** null when `decide` answered nothing. */
  appended: AppendResult | null;
}

export class WrongExpectedVersionError extends Error {
  override readonly name = 'WrongExpectedVersionError';
  constructor(
    readonly stream: string,
    readonly expected: ExpectedRevision,
    /** Current last revision, or -1n when the stream does not exist. */
    readonly actual: bigint,
    /**
     * Every event after the expected revision up to `actual`, in order, where the store sent
     * them with the refusal (the SQL adapters, for a short gap): the writer's state caught up
     * without another read.
     */
    readonly newer?: readonly RecordedEvent[],
  ) {
    super(`Wrong expected version on ${stream}: expected ${String(expected)}, actual ${actual}`);
  }
}

/**
 * A stream written so busily from elsewhere that this writer lost every optimistic race it was
 * given time for (stores without appendExclusive). Nothing was written: the command may be
 * retried, and a request gets a 503 with Retry-After rather than an error of its own.
 */
export class StreamContentionError extends Error {
  override readonly name = 'StreamContentionError';
  constructor(
    readonly stream: string,
    readonly attempts: number,
  ) {
    super(`Append to ${stream} lost ${attempts} races with other writers in a row`);
  }
}

/**
 * An event holding a string no store can keep as JSON text (PostgreSQL's jsonb refuses NUL and
 * unpaired surrogates): refused before the append, the same way by every adapter.
 */
export class UnstorableEventError extends Error {
  override readonly name = 'UnstorableEventError';
  constructor(
    readonly stream: string,
    readonly eventType: string,
    /** Where in the event: `data.user`, `metadata.user`. */
    readonly path: string,
  ) {
    super(`Append to ${stream}: ${eventType} ${path} holds a NUL or an unpaired surrogate, which no event may`);
  }
}

export class AppendTooLargeError extends Error {
  override readonly name = 'AppendTooLargeError';
  constructor(
    readonly stream: string,
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(`Append to ${stream} is ${bytes} bytes; the limit is ${limit}`);
  }
}

export const DEFAULT_MAX_APPEND_BYTES = 1024 * 1024;
