/** How a pass that may find nothing to do is spaced out (see PeriodicTask). */
export interface IdleBackoff<T> {
  /** The longest wait between passes while they find nothing to do; the wait doubles from the interval up to it. */
  idleMs: number;
  /** Whether the pass that resolved with `result` found work to do, now or later: the wait stays at the interval. */
  busy(result: T): boolean | Promise<boolean>;
  /**
   * Calls `listener` whenever work may have come (an append to the log); returns the unsubscribe
   * function. For `idleMs` after a wake-up the wait stays at the interval: what an append brings
   * may reach the queue a little later (a projection schedules it).
   */
  wake(listener: () => void): () => void;
}

/**
 * A background pass run every `intervalMs`, never two at once: a slow pass delays the next
 * instead of overlapping it, and `stop` waits for the pass in flight.
 *
 * With an idle backoff, the passes of an idle process come less often: once passes find nothing
 * to do, now or later, and nothing woke the task for `idleMs`, the wait doubles up to `idleMs`;
 * a wake-up brings it back to the interval at once. Polling a job table every half second costs
 * an idle process most of its CPU, and its database a query each time; work comes with an
 * append, which wakes the task, so it is still looked at within the interval.
 */
export class PeriodicTask<T = unknown> {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> = Promise.resolve();
  private started = false;
  /** The wait after the last pass, from its start. */
  private waitMs: number;
  private lastStart = 0;
  /** When the pending timer fires (ms since the epoch), or null while a pass runs. */
  private dueAt: number | null = null;
  private lastWake = Number.NEGATIVE_INFINITY;
  private unwatch: (() => void) | null = null;
  private onError: (err: unknown) => void = () => undefined;

  constructor(
    private readonly pass: () => Promise<T>,
    private readonly intervalMs: number,
    private readonly backoff?: IdleBackoff<T>,
  ) {
    this.waitMs = intervalMs;
  }

  start(onError: (err: unknown) => void, options: { immediately?: boolean } = {}): void {
    if (this.started) return;
    this.started = true;
    this.onError = onError;
    this.unwatch = this.backoff?.wake(() => this.wake()) ?? null;
    this.lastStart = Date.now();
    if (options.immediately) this.run();
    else this.schedule(this.intervalMs);
  }

  async stop(): Promise<void> {
    this.started = false;
    this.unwatch?.();
    this.unwatch = null;
    this.clearTimer();
    await this.running;
  }

  private run(): void {
    this.clearTimer();
    this.lastStart = Date.now();
    this.running = this.running
      .then(async () => {
        const result = await this.pass();
        return this.backoff ? await this.backoff.busy(result) : true;
      })
      .catch((err) => {
        this.onError(err);
        // A failing pass is tried again at the interval, as a busy one is.
        return true;
      })
      .then((busy) => {
        if (!this.started) return;
        const idleMs = this.backoff?.idleMs ?? this.intervalMs;
        this.waitMs = busy || Date.now() - this.lastWake < idleMs ? this.intervalMs : Math.min(2 * this.waitMs, idleMs);
        this.schedule(this.lastStart + this.waitMs - Date.now());
      });
  }

  private schedule(delayMs: number): void {
    this.clearTimer();
    const delay = Math.max(0, delayMs);
    this.dueAt = Date.now() + delay;
    this.timer = setTimeout(() => this.run(), delay);
    this.timer.unref();
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.dueAt = null;
  }

  /** Work may have come: the next pass is at most the interval after the last one began. */
  private wake(): void {
    this.lastWake = Date.now();
    this.waitMs = this.intervalMs;
    // A pass running now sets its timer when it ends.
    if (!this.started || this.dueAt === null) return;
    const sooner = this.lastStart + this.intervalMs;
    if (sooner < this.dueAt) this.schedule(sooner - Date.now());
  }
}
