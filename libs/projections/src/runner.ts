import { randomBytes } from 'node:crypto';
import { comparePositions, START } from '@svc/eventstore';
import type { EventStore, Position, RecordedEvent } from '@svc/eventstore';
import { isConnectionFailure, SCHEMA_LOCK, type SqlExecutor, type SqlRunner, type TransactionOptions } from '@svc/platform';
import type { Projection } from './projection';

export interface ProjectionStatus {
  name: string;
  position: Position;
  /** Events in the log after the checkpoint. */
  lag: number;
  /** Events it met and could not apply, skipped and recorded in projection_quarantine. */
  quarantined: number;
}

/** An event a projection could not apply, set aside so the projection goes on. */
export interface QuarantinedEvent {
  projection: string;
  position: Position;
  event_id: string;
  event_type: string;
  error: string;
  quarantined_at: string;
}

export class ProjectionTimeoutError extends Error {
  override readonly name = 'ProjectionTimeoutError';
}

/**
 * Caches that readers keep of some read models (the gateways' authentication caches). A
 * projection's waitFor only says its rows are committed; a write that must be seen everywhere
 * at once (a revoked key) also needs every such cache to have let go of what it held before.
 */
export interface ProjectionCaches {
  /** The projections whose rows are cached. */
  readonly projections: ReadonlySet<string>;
  /**
   * Called once a batch that changed rows of one of them has committed, before this runner's
   * waitFor sees it. A failure is reported and otherwise ignored: the caches find out by
   * themselves, only later.
   */
  invalidate(): Promise<void>;
  /** Resolves once no cache can still answer with rows older than `position`. */
  settled(position: Position): Promise<void>;
}

const CHECKPOINTS = `
CREATE TABLE IF NOT EXISTS projection_checkpoints (
  name text PRIMARY KEY,
  position text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
)`;

/**
 * How many times the projection's rows were changed: every batch that held events of it, and
 * every rebuild. Most batches hold none of a projection's events and only move its checkpoint,
 * so a cache of its rows tells "moved" from "changed" by this count (auth-cache.ts, the lease's
 * renewal). A count rather than a position: a rebuild replays changes at positions already
 * passed, and its changes must be seen too.
 */
const CHANGES = `ALTER TABLE projection_checkpoints ADD COLUMN IF NOT EXISTS changes bigint NOT NULL DEFAULT 0`;

const QUARANTINE = `
CREATE TABLE IF NOT EXISTS projection_quarantine (
  projection text NOT NULL,
  position text NOT NULL,
  event_id text NOT NULL,
  event_type text NOT NULL,
  error text NOT NULL,
  quarantined_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (projection, position)
)`;

/**
 * SQLSTATE classes that speak of the server or of the statement, never of the values bound into
 * it: connection (08), transaction state (25: a read-only standby after a failover), rollback
 * (40: serialization failure, deadlock), the SQL or schema itself (42: a missing table while a
 * newer or older process changes it), insufficient resources (53), object state (55: a lock not
 * available), operator intervention (57: shutdown, crash, cancelled statement), system (58:
 * I/O), configuration (F0) and internal errors (XX).
 */
const NOT_THE_EVENT = new Set(['08', '25', '40', '42', '53', '55', '57', '58', 'F0', 'XX']);

/** The runner's own database closed under it (shutting down), or its pool misbehaving: not a fault of the event. */
const CLOSED = /PGlite is closed|Cannot use a pool after calling end|Transaction is closed|pool\.connect returned no client/;

/**
 * Issue 41 C: whether an error applying events says something about the events rather than the
 * moment, so that retrying cannot help and the event is set aside. The cut is by what the
 * moment can cause, not by what an event can: every failure of the database's availability (a
 * lost or refused connection, isConnectionFailure; the classes of NOT_THE_EVENT; a socket's
 * system error; the runner's database closed) is retried, however long it lasts, so no event is
 * ever skipped because the database was down. Anything else the event's content caused: a value
 * PostgreSQL refuses (22, 23), one it cannot hold (54: a caller's text too long for an index
 * row), a handler meeting a shape it cannot read (TypeError, or any error it throws).
 */
export function isPoisonError(err: unknown): boolean {
  if (err instanceof AggregateError) return err.errors.length > 0 && err.errors.every(isPoisonError);
  if (isConnectionFailure(err)) return false;
  const e = err as { code?: unknown; errno?: unknown; syscall?: unknown; message?: unknown } | null;
  // Node's system errors (a socket's ECONNABORTED, ENETUNREACH...) name the call that failed.
  if (typeof e?.syscall === 'string' || typeof e?.errno === 'number') return false;
  if (typeof e?.message === 'string' && CLOSED.test(e.message)) return false;
  const code = e?.code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return !NOT_THE_EVENT.has(code.slice(0, 2));
  return true;
}

/** Events per read while following the log. */
const BATCH = 500;
/** Events per read when rebuilding: large batches let the set-based projections write in bulk. */
const REBUILD_BATCH = 5000;
/**
 * Up to this many events a batch is applied by all its projections in one transaction: while
 * following the log, batches are small and a transaction's own round trips and commit are most
 * of their cost. A larger one (a rebuild, catching up) is applied by each projection in its own
 * transaction, concurrently, so that PostgreSQL works on it with more than one core.
 */
const TOGETHER_MAX_EVENTS = BATCH;
/** How long a wait lasts for projections that timed out before and have not moved since. */
const STALLED_WAIT_MS = 250;

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
  private readonly local = new Map<string, Position>();
  private running = false;
  private looping: Promise<void> | null = null;
  private wakers = new Set<() => void>();
  /** An append was signalled since the current step began. */
  private woken = false;
  /** Coalescing waits, cut short by stop() and by a reader's catch-up request. */
  private readonly stopping = new Set<() => void>();
  /** A reader asked to catch up while no wait was running: the next wait is skipped. */
  private hurried = false;
  private unwatch: (() => void) | null = null;
  private advanced = new Set<() => void>();
  private ahead: { after: Position; batchSize: number; events: Promise<RecordedEvent[] | null> } | null = null;
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
  }

  async init(): Promise<void> {
    // The gateway and the worker may start together: concurrent CREATE ... IF NOT EXISTS can
    // still collide in the catalog, so one process at a time creates the schema.
    await this.sql.transaction(async (tx) => {
      await tx.query(SCHEMA_LOCK);
      await tx.query(CHECKPOINTS);
      await tx.query(CHANGES);
      await tx.query(QUARANTINE);
      for (const p of this.projections) {
        for (const statement of p.schema) await tx.query(statement);
        await tx.query('INSERT INTO projection_checkpoints (name, position) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [p.name, START]);
      }
    });
  }

  /** Keeps every projection up to date until stop(). */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.unwatch = this.store.watchAppends((hint) => {
      this.wake();
      if (hint === 'catch-up') this.hurry();
    });
    this.looping = this.loop();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.unwatch?.();
    this.unwatch = null;
    this.wake();
    for (const cut of [...this.stopping]) cut();
    await this.looping;
    this.looping = null;
  }

  /** Applies everything the log holds now; returns the number of events read. */
  async catchUp(name: string, onBatch?: (events: number) => void): Promise<number> {
    return this.catchUpMany([this.projection(name)], this.options.batchSize ?? BATCH, onBatch);
  }

  async catchUpAll(): Promise<void> {
    await this.catchUpMany(this.projections, this.options.batchSize ?? BATCH);
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
    const live = (await this.sql.query<{ schema: string }>('SELECT current_schema() AS schema')).rows[0].schema;
    const beside = `rebuild_${randomBytes(6).toString('hex')}`;
    await this.sql.query(`CREATE SCHEMA ${beside}`);
    try {
      // The schema statements see the new schema alone, so that none can reach a live table;
      // the replay reads through to the live schema, as handlers may read other read models.
      await new ProjectionRunner(inSchema(this.sql, beside), this.store, projections).init();
      const shadow = new ProjectionRunner(inSchema(this.sql, `${beside}, ${quoteIdent(live)}`), this.store, projections, {
        batchSize: this.options.batchSize ?? REBUILD_BATCH,
      });
      const total = await this.store.countEventsAfter(START);
      let done = 0;
      onProgress?.(0, total);
      for (;;) {
        await shadow.catchUpMany(projections, this.options.batchSize ?? REBUILD_BATCH, (n) => {
          done += n;
          onProgress?.(done, Math.max(total, done));
        });
        const rebuilt = await shadow.checkpoints();
        const switched = await this.switchIn(projections, rebuilt, live, beside).catch((err: unknown) => {
          // The live runner locks checkpoint rows too: a deadlock between the two is tried again.
          if ((err as { code?: unknown })?.code === '40P01') return false;
          throw err;
        });
        if (!switched) continue;
        // This runner, following the log, goes on from the rebuilt positions.
        for (const p of projections) this.local.set(p.name, rebuilt.get(p.name) ?? START);
        return done;
      }
    } finally {
      await this.sql.query(`DROP SCHEMA IF EXISTS ${beside} CASCADE`).catch(() => undefined);
    }
  }

  /** The rebuilt tables in place of the live ones, in one transaction; false when the live ones have gone further. */
  private switchIn(projections: readonly Projection[], rebuilt: Map<string, Position>, live: string, beside: string): Promise<boolean> {
    return this.sql.transaction(async (tx) => {
      const { rows } = await tx.query<{ name: string; position: string }>(
        'SELECT name, position FROM projection_checkpoints WHERE name = ANY($1::text[]) ORDER BY name FOR UPDATE',
        [projections.map((p) => p.name)],
      );
      if (rows.some((r) => comparePositions(r.position, rebuilt.get(r.name) ?? START) > 0)) return false;
      for (const p of projections) {
        for (const table of p.tables) {
          await tx.query(`DROP TABLE IF EXISTS ${quoteIdent(live)}.${table}`);
          await tx.query(`ALTER TABLE ${beside}.${table} SET SCHEMA ${quoteIdent(live)}`);
        }
        await tx.query('DELETE FROM projection_quarantine WHERE projection = $1', [p.name]);
        await tx.query(`INSERT INTO projection_quarantine SELECT * FROM ${beside}.projection_quarantine WHERE projection = $1`, [p.name]);
        await tx.query('UPDATE projection_checkpoints SET position = $2, changes = changes + 1, updated_at = now() WHERE name = $1', [
          p.name,
          rebuilt.get(p.name) ?? START,
        ]);
      }
      return true;
    });
  }

  /**
   * Steps until the log holds nothing new for `projections`; the first failure is thrown.
   * Returns (and reports to `onBatch`) the events of the log applied, each counted once: when
   * the projections' checkpoints part (another runner, the worker, moved some of them), each
   * group reads its own batch and the same event is met once per group.
   */
  private async catchUpMany(projections: readonly Projection[], batchSize: number, onBatch?: (events: number) => void): Promise<number> {
    let total = 0;
    // From where the projections furthest behind start (null until the first step reads it).
    const counted: { upTo: Position | null } = { upTo: null };
    for (;;) {
      const { read, fresh, failures } = await this.step(projections, batchSize, counted);
      if (failures.length > 0) throw failures[0].error;
      total += fresh;
      if (fresh > 0) onBatch?.(fresh);
      if (read === 0) return total;
    }
  }

  async status(): Promise<ProjectionStatus[]> {
    const rows = await this.checkpoints();
    const { rows: counts } = await this.sql.query<{ projection: string; n: number }>(
      'SELECT projection, count(*)::int AS n FROM projection_quarantine GROUP BY projection',
    );
    const quarantined = new Map(counts.map((r) => [r.projection, r.n]));
    const out: ProjectionStatus[] = [];
    for (const p of this.projections) {
      const position = rows.get(p.name) ?? START;
      out.push({ name: p.name, position, lag: await this.store.countEventsAfter(position), quarantined: quarantined.get(p.name) ?? 0 });
    }
    return out;
  }

  /** The events set aside, oldest first (all projections, or one). */
  async quarantined(name?: string): Promise<QuarantinedEvent[]> {
    const { rows } = await this.sql.query<QuarantinedEvent & { quarantined_at: Date | string }>(
      `SELECT projection, position, event_id, event_type, error, quarantined_at FROM projection_quarantine
        WHERE $1::text IS NULL OR projection = $1 ORDER BY position, projection`,
      [name ?? null],
    );
    return rows.map((r) => ({ ...r, quarantined_at: new Date(r.quarantined_at).toISOString() }));
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
      const known = this.running ? this.local : await this.checkpoints();
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
        const done = () => {
          clearTimeout(timer);
          this.advanced.delete(done);
          resolve();
        };
        const timer = setTimeout(done, this.running ? left : Math.min(left, READER_POLL_MS[Math.min(polls++, READER_POLL_MS.length - 1)]));
        if (this.running) this.advanced.add(done);
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

  private async checkpoints(): Promise<Map<string, Position>> {
    const { rows } = await this.sql.query<{ name: string; position: string }>('SELECT name, position FROM projection_checkpoints');
    return new Map(rows.map((r) => [r.name, r.position]));
  }

  private async loop(): Promise<void> {
    while (this.running) {
      let more = false;
      this.woken = false;
      try {
        const { full, failures } = await this.step(this.projections, this.options.batchSize ?? BATCH);
        // A failing projection must not spin: reported, it is retried after the next wake or
        // the idle delay (its batches no longer count as progress once it lags alone), while
        // the others go on.
        for (const f of failures) console.error(`projection ${f.name} failed:`, f.error);
        more = full;
      } catch (err) {
        console.error('projections could not read the log:', err);
      }
      if (!this.running || more) continue;
      // The log was read to its end. Under load, appends came while this batch was applied:
      // one coalescing wait gathers them with those still to come into one batch, rather than
      // an immediate read of the few that came meanwhile (one transaction each, most of the
      // worker's cost per request), then another wait.
      if (this.woken) await this.pause(this.options.busyCoalesceMs ?? this.options.coalesceMs ?? 0);
      else await this.idle();
    }
  }

  private idle(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakers.delete(done);
        void this.pause(this.options.coalesceMs ?? 0).then(resolve);
      };
      const timer = setTimeout(done, this.options.idleMs ?? 500);
      this.wakers.add(done);
    });
  }

  /** Ends the coalescing wait running now, or skips the next one. */
  private hurry(): void {
    if (this.stopping.size === 0) this.hurried = true;
    for (const cut of [...this.stopping]) cut();
  }

  /** Waits `ms`, or less when the runner stops or a reader asks it to catch up. */
  private pause(ms: number): Promise<void> {
    if (ms <= 0 || !this.running) return Promise.resolve();
    if (this.hurried) {
      this.hurried = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.stopping.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.stopping.add(done);
    });
  }

  private wake(): void {
    this.woken = true;
    for (const w of [...this.wakers]) w();
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
  private async step(
    projections: readonly Projection[],
    batchSize: number,
    counted?: { upTo: Position | null },
  ): Promise<{ read: number; fresh: number; full: boolean; failures: { name: string; error: unknown }[] }> {
    const groups = new Map<Position, Projection[]>();
    for (const p of projections) {
      const from = await this.checkpointOf(p.name);
      groups.set(from, [...(groups.get(from) ?? []), p]);
    }
    let read = 0;
    let fresh = 0;
    let full = false;
    const failures: { name: string; error: unknown }[] = [];
    // What is counted is the log from its start to `counted.upTo`, with no gap: a batch counts
    // its events past that point if it starts within it (the groups go from the furthest behind).
    // Another runner may have taken every projection past it; the events between are done too.
    const ordered = [...groups].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const behind = ordered[0]?.[0];
    if (counted && behind !== undefined) {
      if (counted.upTo === null) counted.upTo = behind;
      else if (behind > counted.upTo) {
        fresh += (await this.store.countEventsAfter(counted.upTo)) - (await this.store.countEventsAfter(behind));
        counted.upTo = behind;
      }
    }
    const count = (from: Position, events: readonly RecordedEvent[]) => {
      if (!counted || counted.upTo === null) return;
      const { upTo } = counted;
      if (from > upTo) return;
      fresh += events.filter((e) => e.position > upTo).length;
      if (events[events.length - 1].position > upTo) counted.upTo = events[events.length - 1].position;
    };
    for (const [from, members] of ordered) {
      const events = await this.read(from, batchSize);
      if (events.length === 0) continue;
      const to = events[events.length - 1].position;
      // A full batch: the log holds more, so the next one is read while this one is applied.
      if (events.length === batchSize) this.readAhead(to, batchSize);
      const parts = members.map((projection) => ({ projection, events: events.filter((e) => projection.eventTypes.has(e.type)) }));
      const busy = parts.filter((part) => part.events.length > 0);
      if (busy.length > 0 && members.length > 1 && events.length <= TOGETHER_MAX_EVENTS) {
        const together = await this.applyTogether(parts, from, to).then(
          () => true,
          () => false,
        );
        if (together) {
          read += events.length;
          count(from, events);
          full ||= events.length === batchSize;
          continue;
        }
      }
      // Cached projections this batch changed: they reach `to` for waitFor only once the caches
      // were told, after every task of the group (the caches read all their checkpoints).
      const changed: string[] = [];
      const tasks: { names: string[]; run: Promise<void> }[] = busy.map(({ projection, events: relevant }) => ({
        names: [projection.name],
        run: this.applyOrIsolate(projection, relevant, from, to).then((committed) => {
          if (committed && this.cached(projection.name)) changed.push(projection.name);
          else this.settle(projection.name, committed, to);
        }),
      }));
      const idle = parts.filter((part) => part.events.length === 0).map((part) => part.projection.name);
      if (idle.length > 0) {
        tasks.push({ names: idle, run: this.move(this.sql, idle, from, to).then((moved) => idle.forEach((n) => this.settle(n, moved.includes(n), to))) });
      }
      const results = await Promise.allSettled(tasks.map((t) => t.run));
      await this.tellCaches(changed, to);
      for (const name of changed) this.settle(name, true, to);
      results.forEach((r, i) => {
        if (r.status === 'rejected') for (const name of tasks[i].names) failures.push({ name, error: r.reason });
      });
      if (results.some((r) => r.status === 'fulfilled')) {
        read += events.length;
        count(from, events);
        // Only a batch applied counts: one that failed must not be read again at once.
        full ||= events.length === batchSize;
      }
    }
    return { read, fresh, full, failures };
  }

  /**
   * Every projection's part of a batch, with all their checkpoints, in one transaction. Only
   * the projections whose checkpoints it moved apply their part: another runner has applied
   * the others' (or is applying them, and then holds their rows until it commits).
   */
  private async applyTogether(parts: readonly { projection: Projection; events: readonly RecordedEvent[] }[], from: Position, to: Position): Promise<void> {
    const moved = await this.sql.transaction(
      async (tx) => {
        const names = await this.move(
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
    for (const { projection } of parts) this.settle(projection.name, moved.includes(projection.name), to);
  }

  /** One projection's part of a batch, with its checkpoint, in one transaction; false when another runner had moved it. */
  private async applyBatch(projection: Projection, events: readonly RecordedEvent[], from: Position, to: Position): Promise<boolean> {
    return this.sql.transaction(
      async (tx) => {
        if ((await this.move(tx, [projection.name], from, to, events.length > 0 ? [projection.name] : [])).length === 0) return false;
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
      if (failure !== null && !(await this.quarantine(projection, event, at, failure))) return false;
      at = event.position;
    }
    if (at === to) return true;
    return (await this.move(this.sql, [projection.name], at, to)).length > 0;
  }

  /** Records `event` as set aside by `projection` and moves its checkpoint past it, in one transaction. */
  private async quarantine(projection: Projection, event: RecordedEvent, from: Position, err: unknown): Promise<boolean> {
    const error = (err instanceof Error ? `${err.name}: ${err.message}` : String(err)).slice(0, 500);
    const moved = await this.sql.transaction(async (tx) => {
      if ((await this.move(tx, [projection.name], from, event.position)).length === 0) return false;
      await tx.query(
        `INSERT INTO projection_quarantine (projection, position, event_id, event_type, error) VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (projection, position) DO NOTHING`,
        [projection.name, event.position, event.id, event.type, error],
      );
      return true;
    });
    // Once per event: the checkpoint is past it, so it is never met again (short of a rebuild).
    if (moved) console.error(`projection ${projection.name} set aside event ${event.id} (${event.type}) at ${event.position}: ${error}`);
    return moved;
  }

  private cached(name: string): boolean {
    return this.options.caches?.projections.has(name) ?? false;
  }

  /**
   * Tells the caches that `changed` (cached projections) committed a batch ending at `to`; the
   * callers let waitFor see them there only afterwards. A failure only delays the caches: they
   * find out by themselves.
   */
  private async tellCaches(changed: readonly string[], to: Position): Promise<void> {
    if (changed.length === 0) return;
    await this.options.caches!.invalidate().catch((err) => console.error(`caches of ${changed.join(', ')} were not told of the batch ending at ${to}:`, err));
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

  /**
   * Moves the checkpoints of `names` from `from` to `to`, each only if it is still at `from`;
   * returns those it moved. Inside a batch's transaction it is the first statement, so its row
   * lock keeps other runners out until the batch commits. `applying`: those the batch holds
   * events of, whose count of changes goes up.
   */
  private async move(sql: SqlExecutor, names: string[], from: Position, to: Position, applying: readonly string[] = []): Promise<string[]> {
    // The rows are locked in name order: two runners moving overlapping sets never deadlock.
    const { rows } = await sql.query<{ name: string }>(
      `UPDATE projection_checkpoints SET position = $3, updated_at = now(),
          changes = changes + CASE WHEN name = ANY($4::text[]) THEN 1 ELSE 0 END
        WHERE name IN (SELECT name FROM projection_checkpoints WHERE name = ANY($1::text[]) AND position = $2 ORDER BY name FOR UPDATE)
          AND position = $2
        RETURNING name`,
      [names, from, to, applying],
    );
    return rows.map((r) => r.name);
  }

  private settle(name: string, committed: boolean, to: Position): void {
    if (committed) this.advance(name, to);
    // Another runner (or a rebuild) moved the checkpoint since we read it: the batch is dropped,
    // and the next step reads where the other runner left it.
    else this.local.delete(name);
  }

  private async checkpointOf(name: string): Promise<Position> {
    const known = this.local.get(name);
    if (known !== undefined) return known;
    const { rows } = await this.sql.query<{ position: string }>('SELECT position FROM projection_checkpoints WHERE name = $1', [name]);
    const position = rows[0]?.position ?? START;
    this.advance(name, position);
    return position;
  }

  private advance(name: string, position: Position): void {
    this.local.set(name, position);
    for (const notify of [...this.advanced]) notify();
  }
}

/** A PostgreSQL identifier, quoted. */
const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;

/**
 * `sql` with every statement run under `search_path` (a rebuild's own schema first): each one
 * in a transaction of its own that sets it locally, so the pool's connections keep theirs.
 */
function inSchema(sql: SqlRunner, searchPath: string): SqlRunner {
  const set = `SET LOCAL search_path TO ${searchPath}`;
  const transaction = <T>(fn: (tx: SqlExecutor) => Promise<T>, options?: TransactionOptions) =>
    sql.transaction(async (tx) => {
      await tx.query(set);
      return fn({ query: (text, params) => tx.query(text, params) });
    }, options);
  return {
    dialect: sql.dialect,
    // A named statement is planned once per connection: not under a search_path it would outlive.
    query: (text, params) => transaction((tx) => tx.query(text, params)),
    exec: (text) => transaction(async (tx) => void (await tx.query(text))),
    transaction,
    close: async () => undefined,
  };
}
