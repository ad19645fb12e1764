/**
 * A background pass run every `intervalMs`, never two at once: a slow pass delays the next
 * instead of overlapping it, and `stop` waits for the pass in flight.
 */
export class PeriodicTask {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly pass: () => Promise<unknown>,
    private readonly intervalMs: number,
  ) {}

  start(onError: (err: unknown) => void, options: { immediately?: boolean } = {}): void {
    if (this.timer) return;
    const run = () => {
      this.running = this.running.then(this.pass).catch(onError);
    };
    this.timer = setInterval(run, this.intervalMs);
    this.timer.unref();
    if (options.immediately) run();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }
}
