import { randomUUID } from 'node:crypto';
import type { Clock } from '@svc/platform';
import { storeUnavailable } from './common';
import { DomainError, type Decider, type DomainEvent } from './decider';
import { StreamContentionError, WrongExpectedVersionError, type AppendResult, type EventMetadata, type EventStore, type NewEvent } from './port';

interface Cached<S> {
  state: S;
  /** Last revision folded into `state`; -1n for a stream with no events. */
  revision: bigint;
  /** The revision of the latest snapshot of the stream this process wrote or read; absent: none known. */
  snapshotAt?: bigint;
  /** The count of remembers when the stream last moved to the end of the cache's order (see remember). */
  movedAt?: number;
}

export interface Handled<S, E> {
  /** The events this command decided. */
  events: E[];
  /** The stream's state after the append that carried them. */
  state: S;
  /** null when the decision produced no events. */
  appended: AppendResult | null;
}

/** Counters for benchmarks and tests: how much batching and how many conflicts there were. */
export interface AggregateStoreStats {
  commands: number;
  appends: number;
  conflicts: number;
}

interface Pending {
  command: unknown;
  metadata: EventMetadata;
  resolve(result: Handled<unknown, DomainEvent>): void;
  reject(err: unknown): void;
}

interface StreamQueue {
  decider: Decider<unknown, unknown, DomainEvent>;
  pending: Pending[];
  /** A drain is deciding this stream's commands: one more queued is taken by it. */
  draining: boolean;
}

type Outcome = { events: DomainEvent[] } | { error: unknown };

interface Decided {
  state: unknown;
  outcomes: Outcome[];
  events: NewEvent[];
}

function settleAll(batch: Pending[], decided: Decided, appended: AppendResult | null): void {
  batch.forEach((pending, i) => {
    const outcome = decided.outcomes[i];
    if ('error' in outcome) pending.reject(outcome.error);
    else pending.resolve({ events: outcome.events, state: decided.state, appended: outcome.events.length > 0 ? appended : null });
  });
}

/** A failure of the batch's append that one of its commands may have caused alone (see decideOneByOne). */
function isolatable(err: unknown, batch: Pending[]): boolean {
  return batch.length > 1 && !(err instanceof WrongExpectedVersionError) && !storeUnavailable(err);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Commands decided together and written by one append (ARCHITECTURE section 5: hot accounts). */
const MAX_BATCH = 128;
/**
 * Lost races a batch answers by deciding again on the events the refusal brought back (or on
 * the stream read again), before it takes a turn under the stream's lock: a stream that
 * several processes keep busy is not raced for ever.
 */
const FAST_RETRIES = 3;

/**
 * Issue 45: a batch that lost a race takes along, into its next append, the commands of its
 * stream that queued while it was on its way; they would otherwise race in an append of their
 * own right after it. On an account whose requests land on several gateways, every append is a
 * race: fewer appends for the same commands, fewer races lost.
 */
function absorbQueued(batch: Pending[], queue: StreamQueue | undefined): void {
  if (queue && queue.pending.length > 0 && batch.length < MAX_BATCH) batch.push(...queue.pending.splice(0, MAX_BATCH - batch.length));
}

/**
 * Issue 45: a stream's state is kept as a snapshot every this many events at least (more for a
 * large state, see SnapshotCodec.size), where its decider and the store can. A process that
 * never read the stream starts from the snapshot; one that finds itself this far behind (its
 * first read came back full) reads the snapshot, then only what followed it. Without them, a
 * gateway meeting an account it last served thousands of requests ago read all of those first,
 * while every request of that account waited, and a restarted one read each account whole.
 */
const SNAPSHOT_EVERY = 128;
/**
 * Events read before a process behind asks for the snapshot: a smaller gap is read as it is. As
 * many as a refused append brings back: a writer that had to read after one is further behind.
 */
const SNAPSHOT_PROBE = 64;

/**
 * Loads an aggregate, decides, appends with the expected revision, and retries on a
 * concurrency conflict. Aggregate state stays in memory between commands, and the commands
 * that queue up on one stream while an append is in flight are decided one after the other
 * on the evolving state and written by the next append, with one expected-revision check:
 * a hot account with hundreds of requests in flight costs a few appends, not hundreds of
 * conflicts. Across processes, optimistic concurrency first; a writer that loses a race
 * decides again at once on the events the refusal brought back, where the store sends them
 * (WrongExpectedVersionError.newer), or on the stream read again where they do not close the
 * gap, a few times; then it takes its next turn under the stream's lock where the store has
 * one (appendExclusive), else races again with jittered backoff, and after `maxRetries` lost
 * races fails with StreamContentionError, nothing written.
 */
export class AggregateStore {
  private readonly cache = new Map<string, Cached<unknown>>();
  private readonly queues = new Map<string, StreamQueue>();
  /** Streams remembered so far, the cache's clock (see remember). */
  private remembers = 0;
  readonly stats: AggregateStoreStats = { commands: 0, appends: 0, conflicts: 0 };

  constructor(
    private readonly store: EventStore,
    private readonly clock: Clock,
    private readonly options: {
      maxRetries?: number;
      maxCachedStreams?: number;
      snapshotEvery?: number;
      /** Told of every append to `stream` another process's append beat (issue 45: PeerRouting). */
      onLostRace?: (stream: string) => void;
    } = {},
  ) {}

  handle<C, S, E extends DomainEvent>(decider: Decider<C, S, E>, stream: string, command: C, metadata: EventMetadata = {}): Promise<Handled<S, E>> {
    this.stats.commands++;
    return new Promise((resolve, reject) => {
      let queue = this.queues.get(stream);
      if (!queue) {
        queue = { decider: decider as unknown as StreamQueue['decider'], pending: [], draining: false };
        this.queues.set(stream, queue);
      }
      queue.pending.push({ command, metadata, resolve: resolve as Pending['resolve'], reject });
      if (!queue.draining) {
        queue.draining = true;
        queue.decider = decider as unknown as StreamQueue['decider'];
        void this.drain(stream, queue);
      }
    });
  }

  /** The current state of a stream (catching up with events appended elsewhere). */
  async load<S, E extends DomainEvent>(decider: Decider<unknown, S, E>, stream: string): Promise<S> {
    return (await this.catchUp(decider, stream)).state;
  }

  private async drain(stream: string, queue: StreamQueue): Promise<void> {
    while (queue.pending.length > 0) {
      await this.decideBatch(queue.decider, stream, queue.pending.splice(0, MAX_BATCH), queue);
    }
    queue.draining = false;
    // Kept while its stream is cached, and forgotten with it (remember): a queue made and
    // deleted on every command made V8 rebuild the map's table every few dozen commands, and
    // the discarded tables kept the queues they held until a full collection.
    if (!this.cache.has(stream)) this.queues.delete(stream);
  }

  /** Streams whose command queue is kept: those cached, and any being decided. */
  get queuedStreams(): number {
    return this.queues.size;
  }

  /**
   * Settles every command of the batch; never throws. Resolves with the error that failed the
   * batch when it says the store cannot be reached (see storeUnavailable), otherwise undefined.
   */
  private async decideBatch(decider: StreamQueue['decider'], stream: string, batch: Pending[], queue?: StreamQueue): Promise<unknown> {
    const maxRetries = this.options.maxRetries ?? 50;
    try {
      // First use in this process: read the stream rather than deciding on an empty state.
      let current = this.cache.has(stream) ? this.cached(decider, stream) : await this.catchUp(decider, stream);
      let fresh = false;
      for (let attempt = 0; ; attempt++) {
        const decided = this.decideAll(decider, batch, current.state);
        // A refusal or a decision to do nothing, taken on a state another process has moved on
        // from, would be wrong (credits added elsewhere; a hold placed elsewhere now due to
        // expire) and no append would catch it: decide again on fresh state first.
        if (!fresh && decided.outcomes.some((o) => ('error' in o ? o.error instanceof DomainError : o.events.length === 0))) {
          fresh = true;
          const latest = await this.catchUp(decider, stream);
          if (latest.revision !== current.revision) {
            current = latest;
            continue;
          }
        }
        let appended: AppendResult | null = null;
        if (decided.events.length > 0) {
          try {
            appended = await this.store.append(stream, decided.events, current.revision < 0n ? 'no_stream' : current.revision);
            this.stats.appends++;
          } catch (err) {
            if (!(err instanceof WrongExpectedVersionError)) {
              if (isolatable(err, batch)) return await this.decideOneByOne(decider, stream, batch);
              throw err;
            }
            this.stats.conflicts++;
            this.options.onLostRace?.(stream);
            // Another process appended since this one last read. Where the refusal brought what
            // it appended, the batch is decided again on it at once: one more append, in the
            // next group, and no lock held across round trips (issue 45: with every account's
            // requests spread over four gateways, one append in fourteen lost a race, and each
            // turn under the lock stalled the groups of every other process waiting on it).
            // Further behind than a refusal brings back (the account served by other gateways
            // meanwhile, a key moved), or refused by a store that brings nothing back: the stream
            // is read, then raced again. Under the lock, a long read and the decision on it would
            // hold back every other process's appends to the stream, and the groups those are in.
            if (attempt < Math.min(FAST_RETRIES, maxRetries)) {
              current = this.foldNewer(decider, stream, current, err) ?? (await this.catchUp(decider, stream));
              fresh = true;
              absorbQueued(batch, queue);
              continue;
            }
            // Racing again could lose again, as often as other processes keep the stream busy
            // (issue 41 A: a hot account on four gateways lost twenty races in a row): where the
            // store can, take a turn under the stream's lock instead, which cannot conflict.
            if (this.store.appendExclusive) {
              absorbQueued(batch, queue);
              return await this.decideExclusively(decider, stream, batch);
            }
            if (attempt >= maxRetries) throw new StreamContentionError(stream, attempt + 1);
            // Jittered, so that the writers who lost together do not all race again together.
            await sleep(Math.random() * Math.min(5 * 2 ** attempt, 100));
            current = await this.catchUp(decider, stream);
            fresh = true;
            absorbQueued(batch, queue);
            continue;
          }
          this.remember(stream, { state: decided.state, revision: appended.nextRevision });
        }
        settleAll(batch, decided, appended);
        if (appended) this.keepSnapshot(decider, stream, decided.events);
        return undefined;
      }
    } catch (err) {
      for (const pending of batch) pending.reject(err);
      return storeUnavailable(err) ? err : undefined;
    }
  }

  /**
   * The batch decided and appended under the stream's lock, on the state as the lock's holder
   * reads it: no other append can come between, so no conflict and no retry.
   */
  private async decideExclusively(decider: StreamQueue['decider'], stream: string, batch: Pending[]): Promise<unknown> {
    const base = this.cached(decider, stream);
    let decided: Decided | undefined;
    let done;
    try {
      done = await this.store.appendExclusive!(stream, base.revision, (newer) => {
        let state = base.state;
        for (const event of newer) state = decider.evolve(state, event as unknown as DomainEvent);
        decided = this.decideAll(decider, batch, state);
        return decided.events;
      });
    } catch (err) {
      if (isolatable(err, batch)) return this.decideOneByOne(decider, stream, batch);
      throw err;
    }
    this.stats.appends += done.appended ? 1 : 0;
    this.remember(stream, { state: decided!.state, revision: done.revision });
    settleAll(batch, decided!, done.appended);
    if (done.appended) this.keepSnapshot(decider, stream, decided!.events);
    return undefined;
  }

  /**
   * One command's events the store refuses (too large, a string it cannot keep, a value it
   * rejects) must not fail the others of the batch, among them the charges of streams that
   * already delivered: each is decided and appended alone, and only the guilty one fails. Once
   * the store stops answering halfway the rest fail without trying: one attempt each could mean
   * up to MAX_BATCH connect or statement timeouts in a row.
   */
  private async decideOneByOne(decider: StreamQueue['decider'], stream: string, batch: Pending[]): Promise<unknown> {
    for (let i = 0; i < batch.length; i++) {
      const unavailable = await this.decideBatch(decider, stream, [batch[i]]);
      if (unavailable !== undefined) {
        for (const rest of batch.slice(i + 1)) rest.reject(unavailable);
        return unavailable;
      }
    }
    return undefined;
  }

  /** Each command of the batch decided in turn on the state the ones before it leave. */
  private decideAll(decider: StreamQueue['decider'], batch: Pending[], initial: unknown): Decided {
    const now = this.clock.now();
    const at = now.toISOString();
    let state = initial;
    const outcomes: Outcome[] = [];
    const events: NewEvent[] = [];
    for (const { command, metadata } of batch) {
      try {
        const decided = decider.decide(command, state, now);
        state = decided.reduce(decider.evolve, state);
        outcomes.push({ events: decided });
        for (const e of decided) events.push({ id: randomUUID(), type: e.type, data: e.data, metadata: { ...metadata, at } });
      } catch (error) {
        outcomes.push({ error });
      }
    }
    return { state, outcomes, events };
  }

  /** The state after the events a refused append brought back, when they close the gap exactly; else null. */
  private foldNewer(decider: StreamQueue['decider'], stream: string, current: Cached<unknown>, err: WrongExpectedVersionError): Cached<unknown> | null {
    const newer = err.newer;
    if (!newer || newer.length === 0 || newer[0].revision !== current.revision + 1n || newer[newer.length - 1].revision !== err.actual) return null;
    let state = current.state;
    for (const event of newer) state = decider.evolve(state, event as unknown as DomainEvent);
    const caughtUp = { state, revision: err.actual };
    this.remember(stream, caughtUp);
    return caughtUp;
  }

  private cached<S>(decider: { initialState: () => S }, stream: string): Cached<S> {
    return (this.cache.get(stream) as Cached<S> | undefined) ?? { state: decider.initialState(), revision: -1n };
  }

  private async catchUp<S, E extends DomainEvent>(
    decider: Pick<Decider<unknown, S, E>, 'initialState' | 'evolve' | 'snapshot'>,
    stream: string,
  ): Promise<Cached<S>> {
    let { state, revision, snapshotAt } = this.cached(decider, stream);
    const codec = this.store.readSnapshot ? decider.snapshot : undefined;
    let asked = false;
    const fromSnapshot = async (): Promise<void> => {
      asked = true;
      const kept = await this.store.readSnapshot!(stream);
      if (!kept || kept.version !== codec!.version || kept.revision <= revision) return;
      // Of this log: a snapshot kept beside an older copy of it (a backup restored) is not.
      const [at] = await this.store.readStream(stream, { fromRevision: kept.revision, maxCount: 1 });
      if (at?.revision !== kept.revision || at.id !== kept.eventId) return;
      try {
        state = codec!.decode(kept.state);
      } catch {
        // Unreadable after all: the events are the truth, and reading them is only slower.
        return;
      }
      revision = snapshotAt = kept.revision;
    };
    if (codec && revision < 0n) await fromSnapshot();
    for (;;) {
      const max = codec && !asked ? SNAPSHOT_PROBE : 1000;
      const batch = await this.store.readStream(stream, { fromRevision: revision + 1n, maxCount: max });
      for (const event of batch) {
        state = decider.evolve(state, event as unknown as E);
        revision = event.revision;
      }
      if (batch.length < max) break;
      if (codec && !asked) await fromSnapshot();
    }
    const fresh: Cached<S> = { state, revision, snapshotAt };
    this.remember(stream, fresh);
    return fresh;
  }

  /**
   * After an append: a snapshot of the stream's state when enough events have followed the
   * latest one this process knows of. Encoded and written after the requests are answered, and
   * never waited on: a lost one costs a later reader some events, nothing else.
   */
  private keepSnapshot(decider: StreamQueue['decider'], stream: string, appended: readonly NewEvent[]): void {
    const codec = decider.snapshot;
    const entry = this.cache.get(stream);
    if (!codec || !this.store.writeSnapshot || !entry || appended.length === 0) return;
    // On every append: the state's size is looked at only once the plain interval has passed.
    const since = entry.revision - (entry.snapshotAt ?? -1n);
    if (since < BigInt(this.options.snapshotEvery ?? SNAPSHOT_EVERY) || since < BigInt(codec.size(entry.state))) return;
    entry.snapshotAt = entry.revision;
    const { state, revision } = entry;
    const eventId = appended[appended.length - 1].id;
    setImmediate(() => {
      let encoded: unknown;
      try {
        encoded = codec.encode(state);
      } catch {
        return;
      }
      this.store.writeSnapshot!(stream, { revision, eventId, version: codec.version, state: encoded }).catch(() => undefined);
    });
  }

  /**
   * Keeps `entry` (a fresh object of the caller's) as the stream's latest, with the snapshot the
   * previous one knew of unless it names its own. The cache's order is the order in which streams
   * last moved to its end, and past the limit the first one goes. A stream moves only when its
   * last move is more than half the limit of remembers ago; otherwise its entry is replaced where
   * it is. So a stream remembered within the last half-limit remembers is never the one that goes:
   * more than half the limit of streams would have to have moved after it. Moving on every
   * remember (a delete, then a set) made V8 build the map's table anew every few dozen appends,
   * and each table it leaves stays reachable from the one before it until a full collection,
   * with the states it held. On an in-memory store, 64 accounts and 64 callers, that sent 0.86 KB
   * of every billed request to the old generation, against 0.05 KB now (docs/BENCHMARKS.md,
   * twenty-fourth round).
   */
  private remember(stream: string, entry: Cached<unknown>): void {
    const previous = this.cache.get(stream);
    entry.snapshotAt ??= previous?.snapshotAt;
    const limit = this.options.maxCachedStreams ?? 10_000;
    const count = ++this.remembers;
    if (previous?.movedAt !== undefined && count - previous.movedAt <= limit / 2) {
      entry.movedAt = previous.movedAt;
      this.cache.set(stream, entry);
      return;
    }
    entry.movedAt = count;
    this.cache.delete(stream);
    this.cache.set(stream, entry);
    if (this.cache.size > limit) {
      const forgotten = this.cache.keys().next().value as string;
      this.cache.delete(forgotten);
      if (this.queues.get(forgotten)?.draining === false) this.queues.delete(forgotten);
    }
  }
}
