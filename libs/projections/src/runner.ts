import { START } from '../../eventstore/src/position';
import type { EventStore, Position } from '../../eventstore/src/port';
import type { SqlRunner } from '../../platform/src/sql';
import type { Projection } from './projection';

export interface ProjectionStatus {
  name: string;
  position: Position;
  /** Events in the log after the checkpoint. */
  lag: number;
}

export class ProjectionTimeoutError extends Error {
  override readonly name = 'ProjectionTimeoutError';
}

const CHECKPOINTS = `
CREATE TABLE IF NOT EXISTS projection_checkpoints (
  name text PRIMARY KEY,
  position text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
)`;

/**
 * Drives every projection from the event store's global order. Each projection has its own
 * checkpoint, written in the same transaction as its rows, so a crash never applies an event
 * twice; the checkpoint row is locked and compared first, so several runners (processes) on
 * one database never apply the same batch twice either.
 */
export class ProjectionRunner {
  private readonly byName: Map<string, Projection>;
  private readonly local = new Map<string, Position>();
  private running = false;
  private loops: Promise<void>[] = [];
  private wakers = new Set<() => void>();
  private unwatch: (() => void) | null = null;
  private advanced = new Set<() => void>();

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
    } = {},
  ) {
    this.byName = new Map(projections.map((p) => [p.name, p]));
  }

  async init(): Promise<void> {
    // The gateway and the worker may start together: concurrent CREATE ... IF NOT EXISTS can
    // still collide in the catalog, so one process at a time creates the schema.
    await this.sql.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended('projections.init', 0))`);
      await tx.query(CHECKPOINTS);
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
    this.unwatch = this.store.watchAppends(() => this.wake());
    this.loops = this.projections.map((p) => this.loop(p));
  }

  async stop(): Promise<void> {
    this.running = false;
    this.unwatch?.();
    this.unwatch = null;
    this.wake();
    await Promise.all(this.loops);
    this.loops = [];
  }

  /** Applies everything the log holds now; returns the number of events read. */
  async catchUp(name: string, onBatch?: (events: number) => void): Promise<number> {
    const projection = this.projection(name);
    let total = 0;
    for (;;) {
      const n = await this.step(projection);
      if (n === 0) return total;
      total += n;
      onBatch?.(n);
    }
  }

  async catchUpAll(): Promise<void> {
    for (const p of this.projections) await this.catchUp(p.name);
  }

  /**
   * Empties the projection's tables and its checkpoint in one transaction, then replays the
   * log from position 0. `onProgress(done, total)` reports events read.
   */
  async rebuild(name: string, onProgress?: (done: number, total: number) => void): Promise<number> {
    const projection = this.projection(name);
    await this.sql.transaction(async (tx) => {
      await tx.query('SELECT position FROM projection_checkpoints WHERE name = $1 FOR UPDATE', [name]);
      for (const table of projection.tables) await tx.query(`DELETE FROM ${table}`);
      await tx.query('UPDATE projection_checkpoints SET position = $2, updated_at = now() WHERE name = $1', [name, START]);
    });
    this.local.set(name, START);
    const total = await this.store.countEventsAfter(START);
    let done = 0;
    onProgress?.(0, total);
    await this.catchUp(name, (n) => {
      done += n;
      onProgress?.(done, Math.max(total, done));
    });
    return done;
  }

  async status(): Promise<ProjectionStatus[]> {
    const rows = await this.checkpoints();
    const out: ProjectionStatus[] = [];
    for (const p of this.projections) {
      const position = rows.get(p.name) ?? START;
      out.push({ name: p.name, position, lag: await this.store.countEventsAfter(position) });
    }
    return out;
  }

  /**
   * Resolves once the named projections (all by default) have applied `position`: a caller
   * that just appended reads its own write. Works whether the runner is in this process or not.
   */
  async waitFor(position: Position, names: string[] = [...this.byName.keys()], timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const known = this.running ? this.local : await this.checkpoints();
      if (names.every((n) => (known.get(n) ?? START) >= position)) return;
      const left = deadline - Date.now();
      if (left <= 0) throw new ProjectionTimeoutError(`projections ${names.join(', ')} did not reach ${position} in ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.advanced.delete(done);
          resolve();
        };
        const timer = setTimeout(done, this.running ? left : Math.min(left, 25));
        if (this.running) this.advanced.add(done);
      });
    }
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

  private async loop(projection: Projection): Promise<void> {
    while (this.running) {
      let applied = 0;
      try {
        applied = await this.step(projection);
      } catch (err) {
        // A failing handler must not spin: report, then retry after the idle delay.
        console.error(`projection ${projection.name} failed:`, err);
      }
      if (applied === 0 && this.running) await this.idle();
    }
  }

  private idle(): Promise<void> {
    return new Promise((resolve) => {
      const coalesceMs = this.options.coalesceMs ?? 0;
      const done = () => {
        clearTimeout(timer);
        this.wakers.delete(done);
        if (coalesceMs > 0 && this.running) setTimeout(resolve, coalesceMs);
        else resolve();
      };
      const timer = setTimeout(done, this.options.idleMs ?? 500);
      this.wakers.add(done);
    });
  }

  private wake(): void {
    for (const w of [...this.wakers]) w();
  }

  /** Reads one batch after the checkpoint and applies it; returns how many events it read. */
  private async step(projection: Projection): Promise<number> {
    const from = await this.checkpointOf(projection.name);
    const events = await this.store.readAll({ after: from, maxCount: this.options.batchSize ?? 500 });
    if (events.length === 0) return 0;
    const to = events[events.length - 1].position;
    const committed = await this.sql.transaction(async (tx) => {
      const { rows } = await tx.query<{ position: string }>('SELECT position FROM projection_checkpoints WHERE name = $1 FOR UPDATE', [projection.name]);
      // Another runner (or a rebuild) moved the checkpoint since we read it: drop this batch.
      if (rows[0]?.position !== from) return false;
      for (const event of events) await projection.handlers[event.type]?.(event, tx);
      await tx.query('UPDATE projection_checkpoints SET position = $2, updated_at = now() WHERE name = $1', [projection.name, to]);
      return true;
    });
    if (committed) this.advance(projection.name, to);
    // Otherwise forget the checkpoint: the next step reads where the other runner left it.
    else this.local.delete(projection.name);
    return events.length;
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
