import type { EventStore } from '@svc/eventstore';

/** A step of the loop: one batch per group of projections (see BatchApplier.step). */
export type LoopStep = () => Promise<{ read: number; full: boolean; failures: { name: string; error: unknown }[] }>;

/** The waits of the loop (see the runner's options). */
export interface LoopTimings {
  idleMs?: number;
  coalesceMs?: number;
  busyCoalesceMs?: number;
}

/** The first wait before a step looks again for events a wake-up announced but it could not read. */
const MIN_HELD_BACK_MS = 10;

/**
 * Follows the log: steps while batches come full, then waits for a wake-up (an append, or a
 * reader's catch-up request) or the idle delay, and gathers appends a while before the next step.
 */
export class FollowLoop {
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

  constructor(
    private readonly store: EventStore,
    private readonly step: LoopStep,
    private readonly options: LoopTimings,
  ) {}

  get isRunning(): boolean {
    return this.running;
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

  private async loop(): Promise<void> {
    /** The step follows a wake-up (an append or a catch-up request), not the idle delay. */
    let wokenUp = false;
    /** The last wait for events a wake-up announced but the step could not read yet. */
    let heldBackMs = 0;
    while (this.running) {
      let more = false;
      let read = 0;
      this.woken = false;
      try {
        const step = await this.step();
        // A failing projection must not spin: reported, it is retried after the next wake or
        // the idle delay (its batches no longer count as progress once it lags alone), while
        // the others go on.
        for (const f of step.failures) console.error(`projection ${f.name} failed:`, f.error);
        more = step.full;
        read = step.read;
      } catch (err) {
        console.error('projections could not read the log:', err);
      }
      if (!this.running || more) continue;
      // The log was read to its end. Under load, appends came while this batch was applied:
      // one coalescing wait gathers them with those still to come into one batch, rather than
      // an immediate read of the few that came meanwhile (one transaction each, most of the
      // worker's cost per request), then another wait.
      if (this.woken) {
        await this.pause(this.options.busyCoalesceMs ?? this.options.coalesceMs ?? 0);
        continue;
      }
      const idleMs = this.options.idleMs ?? 500;
      if (wokenUp && read === 0 && heldBackMs < idleMs) {
        // Woken by an append, the step read nothing: a transaction still open anywhere on the
        // server holds the newest events back from every reader (see VISIBLE_AFTER). Looked for
        // again soon, less often each time, instead of after the idle delay, which a wake-up
        // that read nothing would otherwise cost the read models.
        heldBackMs = Math.min(Math.max(2 * heldBackMs, this.options.coalesceMs ?? 0, MIN_HELD_BACK_MS), idleMs);
        await this.pause(heldBackMs);
        continue;
      }
      heldBackMs = 0;
      wokenUp = await this.idle(idleMs);
    }
  }

  /** Waits for a wake-up (true) or `idleMs` (false), then gathers appends for coalesceMs. */
  private idle(idleMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const done = (woken: boolean) => {
        clearTimeout(timer);
        this.wakers.delete(wake);
        void this.pause(this.options.coalesceMs ?? 0).then(() => resolve(woken));
      };
      const wake = () => done(true);
      const timer = setTimeout(() => done(false), idleMs);
      this.wakers.add(wake);
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
}
