import { randomUUID } from 'node:crypto';
import type { Clock } from '../../platform/src/clock';
import { DomainError, type Decider, type DomainEvent } from './decider';
import { WrongExpectedVersionError, type AppendResult, type EventMetadata, type EventStore } from './port';

interface Cached<S> {
  state: S;
  /** Last revision folded into `state`; -1n for a stream with no events. */
  revision: bigint;
}

export interface Handled<S, E> {
  events: E[];
  state: S;
  /** null when the decision produced no events. */
  appended: AppendResult | null;
}

/**
 * Loads an aggregate, decides, appends with the expected revision, and retries on a
 * concurrency conflict. Aggregate state stays in memory between commands: a command reads
 * only the events appended since, and commands on one stream run one at a time in this process.
 */
export class AggregateStore {
  private readonly cache = new Map<string, Cached<unknown>>();
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(
    private readonly store: EventStore,
    private readonly clock: Clock,
    private readonly options: { maxRetries?: number; maxCachedStreams?: number } = {},
  ) {}

  handle<C, S, E extends DomainEvent>(
    decider: Decider<C, S, E>,
    stream: string,
    command: C,
    metadata: EventMetadata = {},
  ): Promise<Handled<S, E>> {
    const previous = this.queues.get(stream) ?? Promise.resolve();
    const run = previous.then(
      () => this.decideAndAppend(decider, stream, command, metadata),
      () => this.decideAndAppend(decider, stream, command, metadata),
    );
    const settled = run.catch(() => undefined);
    this.queues.set(stream, settled);
    void settled.then(() => {
      if (this.queues.get(stream) === settled) this.queues.delete(stream);
    });
    return run;
  }

  /** The current state of a stream (catching up with events appended elsewhere). */
  async load<S, E extends DomainEvent>(decider: Decider<unknown, S, E>, stream: string): Promise<S> {
    return (await this.catchUp(decider, stream)).state;
  }

  private async decideAndAppend<C, S, E extends DomainEvent>(
    decider: Decider<C, S, E>,
    stream: string,
    command: C,
    metadata: EventMetadata,
  ): Promise<Handled<S, E>> {
    const maxRetries = this.options.maxRetries ?? 20;
    // First use in this process: read the stream rather than deciding on an empty state.
    let current = this.cache.has(stream) ? this.cached(decider, stream) : await this.catchUp(decider, stream);
    for (let attempt = 0; ; attempt++) {
      const now = this.clock.now();
      let events: E[];
      try {
        events = decider.decide(command, current.state, now);
      } catch (err) {
        // A refusal decided on a state another process has moved on from would be wrong
        // (credits added elsewhere, say): decide again on fresh state before refusing.
        if (err instanceof DomainError) {
          const fresh = await this.catchUp(decider, stream);
          if (fresh.revision !== current.revision) {
            current = fresh;
            continue;
          }
        }
        throw err;
      }
      if (events.length === 0) return { events, state: current.state, appended: null };
      const at = now.toISOString();
      try {
        const appended = await this.store.append(
          stream,
          events.map((e) => ({ id: randomUUID(), type: e.type, data: e.data, metadata: { ...metadata, at } })),
          current.revision < 0n ? 'no_stream' : current.revision,
        );
        const state = events.reduce(decider.evolve, current.state);
        this.remember(stream, { state, revision: appended.nextRevision });
        return { events, state, appended };
      } catch (err) {
        if (!(err instanceof WrongExpectedVersionError) || attempt >= maxRetries) throw err;
        current = await this.catchUp(decider, stream);
      }
    }
  }

  private cached<S>(decider: { initialState: () => S }, stream: string): Cached<S> {
    return (this.cache.get(stream) as Cached<S> | undefined) ?? { state: decider.initialState(), revision: -1n };
  }

  private async catchUp<S, E extends DomainEvent>(decider: Pick<Decider<unknown, S, E>, 'initialState' | 'evolve'>, stream: string): Promise<Cached<S>> {
    let { state, revision } = this.cached(decider, stream);
    for (;;) {
      const batch = await this.store.readStream(stream, { fromRevision: revision + 1n, maxCount: 1000 });
      for (const event of batch) {
        state = decider.evolve(state, event as unknown as E);
        revision = event.revision;
      }
      if (batch.length < 1000) break;
    }
    const fresh = { state, revision };
    this.remember(stream, fresh);
    return fresh;
  }

  private remember(stream: string, entry: Cached<unknown>): void {
    this.cache.delete(stream);
    this.cache.set(stream, entry);
    const limit = this.options.maxCachedStreams ?? 10_000;
    // Map iteration is insertion order, so the first key is the least recently used.
    if (this.cache.size > limit) this.cache.delete(this.cache.keys().next().value as string);
  }
}
