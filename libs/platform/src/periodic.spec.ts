import { PeriodicTask, type IdleBackoff } from './periodic';

/** A task whose passes record when they began (ms since the test began, on jest's clock). */
function recorder(result: () => number = () => 0, passMs = 0) {
  const t0 = Date.now();
  const starts: number[] = [];
  let inFlight = 0;
  let overlapped = false;
  const pass = async () => {
    starts.push(Date.now() - t0);
    inFlight++;
    if (inFlight > 1) overlapped = true;
    if (passMs > 0) await new Promise((resolve) => setTimeout(resolve, passMs));
    inFlight--;
    return result();
  };
  return { pass, starts, overlapped: () => overlapped };
}

/** A backoff woken by hand: `fire()` is an append. */
function wakeable(idleMs: number, busy: IdleBackoff<number>['busy'] = (found) => found > 0) {
  const listeners = new Set<() => void>();
  const backoff: IdleBackoff<number> = {
    idleMs,
    busy,
    wake: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
  return { backoff, fire: () => listeners.forEach((l) => l()), listeners };
}

/** A task of a 100 ms interval backing off to 1,000 ms, started at once, recording when its passes began. */
function backedOff(result?: () => number, options: { passMs?: number; busy?: IdleBackoff<number>['busy'] } = {}) {
  const r = recorder(result, options.passMs);
  const { backoff, fire } = wakeable(1_000, options.busy);
  const task = new PeriodicTask(r.pass, 100, backoff);
  task.start(() => undefined, { immediately: true });
  return { starts: r.starts, task, fire };
}

/** Stops `task`, letting jest's clock run so that a pass in flight can end. */
async function stopAll(task: PeriodicTask<unknown>): Promise<void> {
  const stopped = task.stop();
  await jest.advanceTimersByTimeAsync(10_000);
  await stopped;
}

describe('PeriodicTask', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('runs a pass every interval, and a slow pass delays the next instead of overlapping it', async () => {
    const r = recorder(() => 0, 250);
    const task = new PeriodicTask(r.pass, 100);
    task.start(() => undefined);
    await jest.advanceTimersByTimeAsync(1_000);
    await stopAll(task);
    // Each pass takes 250 ms: the next starts as the last ends (a timer of 0 fires a millisecond
    // later), never beside it, and none piles up.
    expect(r.starts).toHaveLength(4);
    expect(r.starts[0]).toBe(100);
    for (let i = 1; i < r.starts.length; i++) expect(r.starts[i] - r.starts[i - 1]).toBeGreaterThanOrEqual(250);
    for (let i = 1; i < r.starts.length; i++) expect(r.starts[i] - r.starts[i - 1]).toBeLessThanOrEqual(251);
    expect(r.overlapped()).toBe(false);
  });

  it('without a backoff, an idle pass is run every interval all the same', async () => {
    const r = recorder();
    const task = new PeriodicTask(r.pass, 100);
    task.start(() => undefined, { immediately: true });
    await jest.advanceTimersByTimeAsync(450);
    await stopAll(task);
    expect(r.starts).toEqual([0, 100, 200, 300, 400]);
  });

  it('stop waits for the pass in flight and runs no other', async () => {
    const r = recorder(() => 0, 300);
    let ended = false;
    const task = new PeriodicTask(async () => {
      await r.pass();
      ended = true;
    }, 100);
    task.start(() => undefined);
    await jest.advanceTimersByTimeAsync(150);
    const stopped = task.stop();
    await jest.advanceTimersByTimeAsync(300);
    await stopped;
    expect(ended).toBe(true);
    await jest.advanceTimersByTimeAsync(1_000);
    expect(r.starts).toEqual([100]);
  });

  it('with an idle backoff, passes that find nothing come ever less often, up to idleMs', async () => {
    const { starts, task } = backedOff(() => 0);
    await jest.advanceTimersByTimeAsync(4_000);
    await stopAll(task);
    // Waits of 200, 400, 800, then 1,000 ms.
    expect(starts).toEqual([0, 200, 600, 1_400, 2_400, 3_400]);
  });

  it('a pass that finds work keeps the interval', async () => {
    let work = 3;
    const { starts, task } = backedOff(() => (work > 0 ? work-- : 0));
    await jest.advanceTimersByTimeAsync(1_000);
    await stopAll(task);
    // Three passes find work; the fourth finds none, and the waits grow from there.
    expect(starts).toEqual([0, 100, 200, 300, 500, 900]);
  });

  it('busy may ask the queue: work due later keeps the interval too', async () => {
    let queued = true;
    const { starts, task } = backedOff(() => 0, { busy: async () => queued });
    await jest.advanceTimersByTimeAsync(350);
    queued = false;
    await jest.advanceTimersByTimeAsync(1_000);
    await stopAll(task);
    expect(starts).toEqual([0, 100, 200, 300, 400, 600, 1_000]);
  });

  it('a wake-up brings a backed-off task to its interval at once, and keeps it there for idleMs', async () => {
    const { starts, task, fire } = backedOff(() => 0);
    await jest.advanceTimersByTimeAsync(3_000);
    expect(starts).toEqual([0, 200, 600, 1_400, 2_400]);
    // The next pass was due at 3,400; the last began more than an interval ago, so it runs now.
    fire();
    await jest.advanceTimersByTimeAsync(0);
    expect(starts.at(-1)).toBe(3_000);
    // For a second after the append the passes keep the interval (what it brought may be
    // scheduled by a projection a little later); then they back off again.
    await jest.advanceTimersByTimeAsync(1_700);
    await stopAll(task);
    expect(starts.slice(5)).toEqual([3_000, 3_100, 3_200, 3_300, 3_400, 3_500, 3_600, 3_700, 3_800, 3_900, 4_000, 4_200, 4_600]);
  });

  it('a wake-up soon after a pass waits for the rest of the interval', async () => {
    const { starts, task, fire } = backedOff(() => 0);
    await jest.advanceTimersByTimeAsync(1_430);
    expect(starts).toEqual([0, 200, 600, 1_400]);
    fire();
    await jest.advanceTimersByTimeAsync(69);
    expect(starts).toHaveLength(4);
    await jest.advanceTimersByTimeAsync(1);
    expect(starts.at(-1)).toBe(1_500);
    await stopAll(task);
  });

  it('a wake-up during a pass makes the next wait the interval', async () => {
    const { starts, task, fire } = backedOff(() => 0, { passMs: 50 });
    await jest.advanceTimersByTimeAsync(2_420);
    expect(starts).toEqual([0, 200, 600, 1_400, 2_400]);
    fire();
    await jest.advanceTimersByTimeAsync(100);
    await stopAll(task);
    expect(starts.at(-1)).toBe(2_500);
  });

  it('a failing pass is reported and tried again at the interval', async () => {
    const errors: unknown[] = [];
    let n = 0;
    const starts: number[] = [];
    const t0 = Date.now();
    const { backoff } = wakeable(1_000);
    const task = new PeriodicTask(
      async () => {
        starts.push(Date.now() - t0);
        if (n++ < 2) throw new Error(`failed ${n}`);
        return 0;
      },
      100,
      backoff,
    );
    task.start((err) => errors.push(err), { immediately: true });
    await jest.advanceTimersByTimeAsync(700);
    await stopAll(task);
    expect(errors.map((e) => (e as Error).message)).toEqual(['failed 1', 'failed 2']);
    expect(starts).toEqual([0, 100, 200, 400]);
  });

  it('stop lets go of the wake-ups: no pass runs after it', async () => {
    const r = recorder(() => 0);
    const { backoff, fire, listeners } = wakeable(1_000);
    const task = new PeriodicTask(r.pass, 100, backoff);
    task.start(() => undefined);
    expect(listeners.size).toBe(1);
    await stopAll(task);
    expect(listeners.size).toBe(0);
    fire();
    await jest.advanceTimersByTimeAsync(5_000);
    expect(r.starts).toEqual([]);
  });
});
