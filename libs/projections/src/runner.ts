import { START } from '@svc/eventstore';
import type { EventStore, Position } from '@svc/eventstore';
import type { SqlRunner } from '@svc/platform';
import { BATCH, BatchApplier } from './batches';
import type { ProjectionCaches } from './caches';
import { CheckpointCache, readCheckpoints } from './checkpoints';
import { FollowLoop } from './loop';
import type { Projection } from './projection';
import { quarantineCounts, quarantinedEvents, type QuarantinedEvent } from './quarantine';
import { rebuildBeside } from './rebuild';
import { createSchema } from './schema';

export interface ProjectionStatus {
  name: string;
  position: Position;
  /** Events in the log after the checkpoint. */
  lag: number;
  /** Events it met and could not apply, skipped and recorded in projection_quarantine. */
  quarantined: number;
}

export class ProjectionTimeoutError extends Error {
  override readonly name = 'ProjectionTimeoutError';
}

/** How long a wait lasts for projections that timed out before and have not moved since. */
const STALLED_WAIT_MS = 250;
/** How long a catch-up waits for events a transaction open elsewhere holds back from global reads. */
const CATCH_UP_COMMITTED_MS = 15_000;

/**
 * How often a reader in another process (a gateway) looks at the checkpoints while it waits
 * for its own write: soon at first, since the runner it asked to catch up usually applies the
 * write within a few milliseconds, then every 25 ms.
 */
const READER_POLL_MS = [5, 5, 10, 25];

/**
 * Drives every projection from the event store's global order. Each projection has its own
 * checkpoint, written in the same transaction as its rows, so a crash never applies an event
 * twice; the checkpoint row is moved first, on the condition that it is still where the batch
 * was read from, so several runners (processes) on one database never apply the same batch
 * twice either. Projections at the same checkpoint (normally all of them) share each read and
 * each transaction.
 */
export class ProjectionRunner {
  private readonly byName: Map<string, Projection>;
  private readonly checkpoints: CheckpointCache;
  private readonly applier: BatchApplier;
  private readonly follower: FollowLoop;
  /** Per projection, the checkpoint it was at when a wait for it timed out. */
  private readonly stalled = new Map<string, Position>();

  constructor(
    private readonly sql: SqlRunner,
    private readonly store: EventStore,
    readonly projections: readonly Projection[],
    private readonly options: {
      batchSize?: number;
      idleMs?: number;
      /**
       * How long a woken projection waits for more appends before it reads: under load the
       * events of many requests then go through one read and one transaction instead of one
       * each, at the price of that much more lag.
       */
      coalesceMs?: number;
      /**
       * The wait instead when appends came while the last batch was applied (the log is busy):
       * longer than after a quiet spell, since each wait then gathers the events of many more
       * requests per transaction (a third less of the worker's and PostgreSQL's work per request
       * at 60 ms against 20 under a 64-connection load). Neither wait delays a reader of its own
       * write: waitFor asks every runner to catch up (EventStore.requestCatchUp), which ends
       * the wait running or skips the next. Defaults to `coalesceMs`.
       */
      busyCoalesceMs?: number;
      caches?: ProjectionCaches;
    } = {},
  ) {
    this.byName = new Map(projections.map((p) => [p.name, p]));
    this.checkpoints = new CheckpointCache(sql);
    this.applier = new BatchApplier(sql, store, this.checkpoints, options.caches);
    this.follower = new FollowLoop(store, () => this.applier.step(this.projections, this.options.batchSize ?? BATCH), options);
  }

  async init(): Promise<void> {
    await createSchema(this.sql, this.projections);
  }

  /** Keeps every projection up to date until stop(). */
  start(): void {
    this.follower.start();
  }

  async stop(): Promise<void> {
    await this.follower.stop();
  }

  /** Applies every event committed when it is called (see catchUpCommitted); returns the number of events read. */
  async catchUp(name: string, onBatch?: (events: number) => void): Promise<number> {
    return this.catchUpCommitted([this.projection(name)], onBatch);
  }

  /** catchUp for every projection. */
  async catchUpAll(): Promise<void> {
    await this.catchUpCommitted(this.projections);
  }

  /**
   * Applies every event committed when it is called. Global reads on a server stop below the
   * oldest transaction still open anywhere on it (another process's, another database's), so
   * what one pass applies can stop short of an append that has already returned: where the
   * store tells its last committed position, the pass is made again until every projection has
   * passed it, for CATCH_UP_COMMITTED_MS at most.
   */
  private async catchUpCommitted(projections: readonly Projection[], onBatch?: (events: number) => void): Promise<number> {
    const last = await this.store.lastCommittedPosition?.();
    const deadline = Date.now() + CATCH_UP_COMMITTED_MS;
    let read = 0;
    for (;;) {
      read += await this.applier.catchUpMany(projections, this.options.batchSize ?? BATCH, onBatch);
      if (last === undefined || last === START) return read;
      const known = await readCheckpoints(this.sql);
      const behind = projections.filter((p) => (known.get(p.name) ?? START) < last).map((p) => p.name);
      if (behind.length === 0) return read;
      if (Date.now() > deadline) {
        throw new ProjectionTimeoutError(
          `projections ${behind.join(', ')} did not reach ${last}, the last event committed when the catch-up began, in ${CATCH_UP_COMMITTED_MS} ms`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  /**
   * Rebuilds the projections (all by default) from position 0 beside the live ones, then puts
   * them in their place (issue 41 item 20): while it runs, readers keep the read models they
   * had, whole, and the live runner keeps them up to date. The replay goes into tables of a
   * schema of its own; once it has reached the end of the log, one short transaction holds the
   * live checkpoints, drops the live tables and moves the rebuilt ones into their place with
   * their checkpoints and set-aside events. Should the live runner have gone past the rebuilt
   * position meanwhile, the rebuild catches up again first, so the rebuilt model never holds
   * less than the one it replaces. A rebuild that fails leaves the live model as it was.
   * `onProgress(done, total)` reports events read.
   */
  async rebuild(names: string | readonly string[] = [...this.byName.keys()], onProgress?: (done: number, total: number) => void): Promise<number> {
    const projections = (typeof names === 'string' ? [names] : names).map((n) => this.projection(n));
    return rebuildBeside(this.sql, this.store, projections, this.checkpoints, this.options.batchSize, onProgress);
  }

  async status(): Promise<ProjectionStatus[]> {
    const rows = await readCheckpoints(this.sql);
    const quarantined = await quarantineCounts(this.sql);
    const out: ProjectionStatus[] = [];
    for (const p of this.projections) {
      const position = rows.get(p.name) ?? START;
      out.push({ name: p.name, position, lag: await this.store.countEventsAfter(position), quarantined: quarantined.get(p.name) ?? 0 });
    }
    return out;
  }

  /** The events set aside, oldest first (all projections, or one). */
  quarantined(name?: string): Promise<QuarantinedEvent[]> {
    return quarantinedEvents(this.sql, name);
  }

  /**
   * Resolves once the named projections (all by default) have applied `position`: a caller
   * that just appended reads its own write. Works whether the runner is in this process or not.
   */
  async waitFor(position: Position, names: string[] = [...this.byName.keys()], timeoutMs = 5000): Promise<void> {
    const started = Date.now();
    let deadline = started + timeoutMs;
    let asked = false;
    let polls = 0;
    for (;;) {
      const known = this.follower.isRunning ? this.checkpoints.known : await readCheckpoints(this.sql);
      const behind = names.filter((n) => (known.get(n) ?? START) < position);
      if (behind.length === 0) return;
      // The runner applying the projections (this process's or the worker's) may be gathering
      // more appends before it reads: this reader waits, so it should read now.
      if (!asked) {
        asked = true;
        this.store.requestCatchUp();
      }
      // Projections that already let a wait time out and have not moved since (the worker is
      // down): waiting the whole timeout again would only make every request slow.
      if (behind.every((n) => this.stalled.get(n) === (known.get(n) ?? START))) deadline = Math.min(deadline, started + STALLED_WAIT_MS);
      const left = deadline - Date.now();
      if (left <= 0) {
        // Stalled only if it has events to apply and did not apply them: a wait for a position
        // the log does not hold yet says nothing about the projection.
        for (const n of behind) {
          const at = known.get(n) ?? START;
          if ((await this.store.countEventsAfter(at).catch(() => 0)) > 0) this.stalled.set(n, at);
        }
        throw new ProjectionTimeoutError(`projections ${behind.join(', ')} did not reach ${position} in ${Date.now() - started} ms`);
      }
      await new Promise<void>((resolve) => {
        let unwatch: () => void = () => undefined;
        const done = () => {
          clearTimeout(timer);
          unwatch();
          resolve();
        };
        const timer = setTimeout(done, this.follower.isRunning ? left : Math.min(left, READER_POLL_MS[Math.min(polls++, READER_POLL_MS.length - 1)]));
        if (this.follower.isRunning) unwatch = this.checkpoints.onAdvance(done);
      });
    }
  }

  /**
   * What a write waits for before it answers: waitFor, then (for cached projections) until no
   * cache of them can still answer with what they held before `position`, so every process
   * sees the write once it has answered (a revoked key stops working at once, everywhere).
   */
  async waitUntilVisible(position: Position, names: string[] = [...this.byName.keys()], timeoutMs = 5000): Promise<void> {
    await this.waitFor(position, names, timeoutMs);
    const caches = this.options.caches;
    if (caches && names.some((n) => caches.projections.has(n))) await caches.settled(position);
  }

  private projection(name: string): Projection {
    const p = this.byName.get(name);
    if (!p) throw new Error(`unknown projection ${name}; known: ${[...this.byName.keys()].join(', ')}`);
    return p;
  }
}
