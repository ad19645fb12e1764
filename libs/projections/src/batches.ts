import type { EventStore, Position, RecordedEvent } from '@svc/eventstore';
import type { SqlRunner } from '@svc/platform';
import type { ProjectionCaches } from './caches';
import { moveCheckpoints, type CheckpointCache } from './checkpoints';
import type { Projection } from './projection';
import { isPoisonError, quarantine } from './quarantine';

/** Events per read while following the log. */
export const BATCH = 500;
/**
 * Up to this many events a batch is applied by all its projections in one transaction: while
 * following the log, batches are small and a transaction's own round trips and commit are most
 * of their cost. A larger one (a rebuild, catching up) is applied by each projection in its own
 * transaction, concurrently, so that PostgreSQL works on it with more than one core.
 */
const TOGETHER_MAX_EVENTS = BATCH;

/** A projection and the events of a batch it handles. */
interface Part {
  projection: Projection;
  events: readonly RecordedEvent[];
}

type Failure = { name: string; error: unknown };

/** What one step did (see BatchApplier.step). */
export interface StepResult {
  read: number;
  fresh: number;
  full: boolean;
  failures: Failure[];
}

/** A catch-up's count of the events it applied: the log is counted up to `upTo`. */
export interface Counted {
  upTo: Position | null;
}

/**
 * Reads batches of the log and applies them to projections, each with the checkpoints it moves
 * in the same transaction (see ProjectionRunner), setting aside the events a projection cannot
 * apply (see applyOrIsolate).
 */
export class BatchApplier {
  private ahead: { after: Position; batchSize: number; events: Promise<RecordedEvent[] | null> } | null = null;

  constructor(
    private readonly sql: SqlRunner,
    private readonly store: EventStore,
    private readonly checkpoints: CheckpointCache,
    private readonly caches?: ProjectionCaches,
  ) {}

  /**
   * Steps until the log holds nothing new for `projections`; the first failure is thrown.
   * Returns (and reports to `onBatch`) the events of the log applied, each counted once: when
   * the projections' checkpoints part (another runner, the worker, moved some of them), each
   * group reads its own batch and the same event is met once per group.
   */
  async catchUpMany(projections: readonly Projection[], batchSize: number, onBatch?: (events: number) => void): Promise<number> {
    let total = 0;
    // From where the projections furthest behind start (null until the first step reads it).
    const counted: Counted = { upTo: null };
    for (;;) {
      const { read, fresh, failures } = await this.step(projections, batchSize, counted);
      if (failures.length > 0) throw failures[0].error;
      total += fresh;
      if (fresh > 0) onBatch?.(fresh);
      if (read === 0) return total;
    }
  }

  /**
   * Reads one batch per group of projections at the same checkpoint and applies a small one to
   * all of them in one transaction: one commit per batch, not one per projection, which is most
   * of the worker's cost per request. A large batch, or one whose shared transaction failed, is
   * applied by each projection in its own transaction (those that read none of the events only
   * move their checkpoints, in one statement), so one failing projection does not hold the
   * others back.
   * `read`: events read by groups where at least one projection did not fail.
   */
  async step(projections: readonly Projection[], batchSize: number, counted?: Counted): Promise<StepResult> {
    const ordered = await this.groupsByCheckpoint(projections);
    let read = 0;
    let full = false;
    const failures: Failure[] = [];
    // What is counted is the log from its start to `counted.upTo`, with no gap: a batch counts
    // its events past that point if it starts within it (the groups go from the furthest behind).
    // Another runner may have taken every projection past it; the events between are done too.
    let fresh = counted ? await this.countPassedByOthers(counted, ordered[0]?.[0]) : 0;
    for (const [from, members] of ordered) {
      const batch = await this.applyGroup(from, members, batchSize);
      if (!batch) continue;
      failures.push(...batch.failures);
      if (!batch.applied) continue;
      read += batch.events.length;
      if (counted) fresh += countFresh(counted, from, batch.events);
      // Only a batch applied counts: one that failed must not be read again at once.
      full ||= batch.events.length === batchSize;
    }
    return { read, fresh, full, failures };
  }

  /** The projections grouped by checkpoint, the group furthest behind first. */
  private async groupsByCheckpoint(projections: readonly Projection[]): Promise<[Position, Projection[]][]> {
    const groups = new Map<Position, Projection[]>();
    for (const p of projections) {
      const from = await this.checkpoints.of(p.name);
      groups.set(from, [...(groups.get(from) ?? []), p]);
    }
    return [...groups].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  }

  /** The events between `counted.upTo` and `behind`, when every projection is past `upTo` already; `upTo` moves to `behind`. */
  private async countPassedByOthers(counted: Counted, behind: Position | undefined): Promise<number> {
    if (behind === undefined) return 0;
    if (counted.upTo === null) {
      counted.upTo = behind;
      return 0;
    }
    if (behind <= counted.upTo) return 0;
    const passed = (await this.store.countEventsAfter(counted.upTo)) - (await this.store.countEventsAfter(behind));
    counted.upTo = behind;
    return passed;
  }

  /**
   * One group's batch after `from`, applied; null when the log holds nothing after it.
   * `applied`: at least one of the group's projections did not fail.
   */
  private async applyGroup(
    from: Position,
    members: readonly Projection[],
    batchSize: number,
  ): Promise<{ events: RecordedEvent[]; applied: boolean; failures: Failure[] } | null> {
    const events = await this.read(from, batchSize);
    if (events.length === 0) return null;
    const to = events[events.length - 1].position;
    // A full batch: the log holds more, so the next one is read while this one is applied.
    if (events.length === batchSize) this.readAhead(to, batchSize);
    const parts = members.map((projection) => ({ projection, events: events.filter((e) => projection.eventTypes.has(e.type)) }));
    const busy = parts.some((part) => part.events.length > 0);
    if (busy && members.length > 1 && events.length <= TOGETHER_MAX_EVENTS) {
      const together = await this.applyTogether(parts, from, to).then(
        () => true,
        () => false,
      );
      if (together) return { events, applied: true, failures: [] };
    }
    return { events, ...(await this.applyApart(parts, from, to)) };
  }

  /** Each projection's part of a batch in its own transaction; those with no events only move their checkpoints, together. */
  private async applyApart(parts: readonly Part[], from: Position, to: Position): Promise<{ applied: boolean; failures: Failure[] }> {
    const busy = parts.filter((part) => part.events.length > 0);
    // Cached projections this batch changed: they reach `to` for waitFor only once the caches
    // were told, after every task of the group (the caches read all their checkpoints).
    const changed: string[] = [];
    const tasks: { names: string[]; run: Promise<void> }[] = busy.map(({ projection, events: relevant }) => ({
      names: [projection.name],
      run: this.applyOrIsolate(projection, relevant, from, to).then((committed) => {
        if (committed && this.cached(projection.name)) changed.push(projection.name);
        else this.checkpoints.settle(projection.name, committed, to);
      }),
    }));
    const idle = parts.filter((part) => part.events.length === 0).map((part) => part.projection.name);
    if (idle.length > 0) {
      tasks.push({
        names: idle,
        run: moveCheckpoints(this.sql, idle, from, to).then((moved) => idle.forEach((n) => this.checkpoints.settle(n, moved.includes(n), to))),
      });
    }
    const results = await Promise.allSettled(tasks.map((t) => t.run));
    await this.tellCaches(changed, to);
    for (const name of changed) this.checkpoints.settle(name, true, to);
    const failures: Failure[] = [];
    results.forEach((r, i) => {
      if (r.status === 'rejected') for (const name of tasks[i].names) failures.push({ name, error: r.reason });
    });
    return { applied: results.some((r) => r.status === 'fulfilled'), failures };
  }

  /**
   * Every projection's part of a batch, with all their checkpoints, in one transaction. Only
   * the projections whose checkpoints it moved apply their part: another runner has applied
   * the others' (or is applying them, and then holds their rows until it commits).
   */
  private async applyTogether(parts: readonly Part[], from: Position, to: Position): Promise<void> {
    const moved = await this.sql.transaction(
      async (tx) => {
        const names = await moveCheckpoints(
          tx,
          parts.map((part) => part.projection.name),
          from,
          to,
          parts.filter((part) => part.events.length > 0).map((part) => part.projection.name),
        );
        for (const { projection, events } of parts) {
          if (events.length > 0 && names.includes(projection.name)) await projection.apply(events, tx);
        }
        return names;
      },
      // As in applyBatch: rebuilt from the log, so the commit need not wait for its WAL flush.
      { asyncCommit: true },
    );
    const changed = parts.filter(({ projection, events }) => events.length > 0 && moved.includes(projection.name) && this.cached(projection.name));
    await this.tellCaches(
      changed.map((part) => part.projection.name),
      to,
    );
    for (const { projection } of parts) this.checkpoints.settle(projection.name, moved.includes(projection.name), to);
  }

  /** One projection's part of a batch, with its checkpoint, in one transaction; false when another runner had moved it. */
  private async applyBatch(projection: Projection, events: readonly RecordedEvent[], from: Position, to: Position): Promise<boolean> {
    return this.sql.transaction(
      async (tx) => {
        if ((await moveCheckpoints(tx, [projection.name], from, to, events.length > 0 ? [projection.name] : [])).length === 0) return false;
        await projection.apply(events, tx);
        return true;
      },
      // The read models are rebuilt from the log, so the commit need not wait for its WAL
      // flush: a server crash loses the last applied batches, rows and checkpoint together.
      { asyncCommit: true },
    );
  }

  /**
   * applyBatch, and when the batch holds an event the projection cannot apply (isPoisonError),
   * the batch again one event at a time, each with its checkpoint: the event that fails twice
   * is recorded in projection_quarantine and skipped, and the projection goes on.
   *
   * Skipping rather than stopping: a stopped identity projection would stop every key write
   * and leave every later revocation unapplied (a revoked key kept working), for every
   * account, over one bad event. A skipped event is visible (`projections status`, the table,
   * one log line) and its effect is missing, which fails closed for the events that could hold
   * one (a key never created does not authenticate). The deciders refuse to decide such events
   * in the first place; this is the last line.
   */
  private async applyOrIsolate(projection: Projection, events: readonly RecordedEvent[], from: Position, to: Position): Promise<boolean> {
    try {
      return await this.applyBatch(projection, events, from, to);
    } catch (err) {
      if (!isPoisonError(err)) throw err;
    }
    let at = from;
    for (const event of events) {
      let failure: unknown = null;
      for (let attempt = 0; attempt < 2; attempt++) {
        failure = await this.applyBatch(projection, [event], at, event.position).then(
          (committed) => (committed ? null : 'moved'),
          (err: unknown) => err,
        );
        if (failure === null || failure === 'moved' || !isPoisonError(failure)) break;
      }
      if (failure === 'moved') return false;
      if (failure !== null && !isPoisonError(failure)) throw failure;
      if (failure !== null && !(await quarantine(this.sql, projection, event, at, failure))) return false;
      at = event.position;
    }
    if (at === to) return true;
    return (await moveCheckpoints(this.sql, [projection.name], at, to)).length > 0;
  }

  private cached(name: string): boolean {
    return this.caches?.projections.has(name) ?? false;
  }

  /**
   * Tells the caches that `changed` (cached projections) committed a batch ending at `to`; the
   * callers let waitFor see them there only afterwards. A failure only delays the caches: they
   * find out by themselves.
   */
  private async tellCaches(changed: readonly string[], to: Position): Promise<void> {
    if (changed.length === 0) return;
    await this.caches!.invalidate().catch((err) => console.error(`caches of ${changed.join(', ')} were not told of the batch ending at ${to}:`, err));
  }

  /** The batch after `from`, from the read ahead when it started there. */
  private async read(from: Position, batchSize: number): Promise<RecordedEvent[]> {
    const ahead = this.ahead;
    this.ahead = null;
    if (ahead && ahead.after === from && ahead.batchSize === batchSize) {
      const events = await ahead.events;
      if (events !== null) return events;
    }
    return this.store.readAll({ after: from, maxCount: batchSize });
  }

  private readAhead(after: Position, batchSize: number): void {
    // A failed read ahead is only a lost head start: the next step reads again.
    this.ahead = { after, batchSize, events: this.store.readAll({ after, maxCount: batchSize }).catch(() => null) };
  }
}

/** The events of a batch from `from` past `counted.upTo`, when the batch starts within what is counted; `upTo` moves to its end. */
function countFresh(counted: Counted, from: Position, events: readonly RecordedEvent[]): number {
  if (counted.upTo === null) return 0;
  const { upTo } = counted;
  if (from > upTo) return 0;
  const fresh = events.filter((e) => e.position > upTo).length;
  if (events[events.length - 1].position > upTo) counted.upTo = events[events.length - 1].position;
  return fresh;
}
