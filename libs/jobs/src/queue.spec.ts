import { AggregateStore, DomainError, SqlEventStore, type Decider, type DomainEvent } from '@svc/eventstore';
import { ManualClock, type SqlRunner } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import { WorkflowProcessor } from './processor';
import { JobQueue, scheduleJob, type Lease } from './queue';
import { call, complete, schedule, send, type Workflow } from './workflow';
import { memoryPglite } from '@svc/platform/testing/pglite';

const T0 = new Date('2026-11-02T10:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);

/** A stream that counts the effects made for it: one `Made` per effect, refused once two are made. */
type MadeEvent = DomainEvent<'Made', { n: number }>;
const madeDecider: Decider<{ n: number }, number, MadeEvent> = {
  initialState: () => 0,
  decide: (command, made) => {
    if (command.n !== made + 1) throw new DomainError('already_made', `effect ${command.n} is not the next one`);
    return [{ type: 'Made', data: { n: command.n } }];
  },
  evolve: (_made, event) => event.data.n,
};

/** Two effects a second apart, then done. */
const twoEffects: Workflow<{ type: 'Done'; n: number }, number, { n: number }, { n: number }, MadeEvent> = {
  kind: 'test',
  decide(input, made) {
    if (input.type === 'Done') return [send({ n: input.n })];
    if (made >= 2) return [complete()];
    return made === 0 ? [call({ n: 1 })] : [call({ n: 2 })];
  },
  evolve: (made, event) => event.data.n,
};

describe.each([
  ['pglite', () => memoryPglite()],
  ['postgres', () => freshPgRunner('jobs')],
])('the job table on %s', (_name, open) => {
  let sql: SqlRunner;
  let queue: JobQueue;
  const lease = (ms: number) => at(ms);

  beforeAll(async () => {
    sql = await open();
    await JobQueue.init(sql);
    // Twice: every process runs it at start.
    await JobQueue.init(sql);
    queue = new JobQueue(sql);
  });
  afterAll(() => sql.close());

  it('claims due jobs only, each by one worker, oldest due first', async () => {
    await queue.schedule('a', 'later', at(60_000));
    await queue.schedule('a', 'second', at(-1_000));
    await queue.schedule('a', 'first', at(-2_000));
    await queue.schedule('b', 'other-kind', at(-5_000));
    const [one, two] = await Promise.all([queue.claim('a', 'w1', T0, lease(30_000), 1), queue.claim('a', 'w2', T0, lease(30_000), 5)]);
    expect([...one, ...two].map((j) => j.key).sort()).toEqual(['first', 'second']);
    expect(await queue.claim('a', 'w3', T0, lease(30_000), 5)).toEqual([]);
    for (const job of [...one, ...two]) expect(await queue.complete(job)).toBe(true);
    await queue.remove('a', 'later');
    await queue.remove('b', 'other-kind');
  });

  it('a claim narrowed to some parents takes only their children: each share is claimed on its own', async () => {
    for (const key of ['b1:1', 'b1:2', 'b2:1', 'b3:1']) await queue.schedule('lines', key, at(-1_000));
    expect(await queue.claim('lines', 'w1', T0, lease(30_000), 5, [])).toEqual([]);
    const mine = await queue.claim('lines', 'w1', T0, lease(30_000), 5, ['b1', 'b3']);
    expect(mine.map((j) => j.key).sort()).toEqual(['b1:1', 'b1:2', 'b3:1']);
    const rest = await queue.claim('lines', 'w2', T0, lease(30_000), 5);
    expect(rest.map((j) => j.key)).toEqual(['b2:1']);
    for (const job of [...mine, ...rest]) await queue.complete(job);
  });

  it('hasAny tells a kind with jobs due later, or held, from one with none', async () => {
    expect(await queue.hasAny('h')).toBe(false);
    await queue.schedule('h', 'later', at(3_600_000));
    await queue.schedule('other', 'due', at(-1_000));
    expect(await queue.hasAny('h')).toBe(true);
    await queue.schedule('h', 'due', at(-1_000));
    const [held] = await queue.claim('h', 'w1', T0, lease(30_000), 1);
    await queue.remove('h', 'later');
    expect(await queue.hasAny('h')).toBe(true);
    expect(await queue.complete(held)).toBe(true);
    expect(await queue.hasAny('h')).toBe(false);
    await queue.remove('other', 'due');
  });

  it('ensure makes a job of each key without one and leaves the others as they are', async () => {
    await queue.schedule('e', 'later', at(60_000));
    await queue.ensure('e', ['later', 'new'], T0);
    expect(await queue.dueAt('e', 'later')).toEqual(at(60_000));
    expect(await queue.dueAt('e', 'new')).toEqual(T0);
    await queue.remove('e', 'later');
    await queue.remove('e', 'new');
  });

  it('a lease that ran out goes to the next claim under a new epoch; the old holder can no longer write', async () => {
    await queue.schedule('a', 'k', T0);
    const [dead] = await queue.claim('a', 'dead', T0, lease(10_000), 1);
    expect(dead).toMatchObject({ owner: 'dead', attempts: 1 });
    expect(await queue.claim('a', 'live', at(5_000), lease(15_000), 1)).toEqual([]);
    const [live] = await queue.claim('a', 'live', at(10_001), lease(40_000), 1);
    expect(live).toMatchObject({ key: 'k', owner: 'live', epoch: dead.epoch + 1, attempts: 2 });
    expect(await queue.holds(dead, at(10_001))).toBe(false);
    expect(await queue.reschedule(dead, at(999_000))).toBe(false);
    expect(await queue.complete(dead)).toBe(false);
    expect(await queue.reschedule(live, at(60_000))).toBe(true);
    expect(await queue.dueAt('a', 'k')).toEqual(at(60_000));
    const [again] = await queue.claim('a', 'live', at(60_000), lease(90_000), 1);
    // Moved on: the attempts count again from one.
    expect(again.attempts).toBe(1);
    await queue.complete(again);
    expect(await queue.dueAt('a', 'k')).toBeNull();
  });

  it('a schedule asked for while the job is held is kept: the holder letting it go later, or completing it, leaves it due then', async () => {
    await queue.schedule('a', 'w', T0);
    let [held] = await queue.claim('a', 'w1', T0, lease(30_000), 1);
    await scheduleJob(sql, 'a', 'w', at(1_000));
    await queue.reschedule(held, at(600_000));
    expect(await queue.dueAt('a', 'w')).toEqual(at(1_000));
    [held] = await queue.claim('a', 'w1', at(1_000), lease(30_000), 1);
    await scheduleJob(sql, 'a', 'w', at(2_000));
    await queue.complete(held);
    expect(await queue.dueAt('a', 'w')).toEqual(at(2_000));
    [held] = await queue.claim('a', 'w1', at(2_000), lease(30_000), 1);
    await queue.complete(held);
    expect(await queue.dueAt('a', 'w')).toBeNull();
  });

  it('a worker killed mid-step loses nothing: once its lease runs out another carries the workflow on from the stream, each effect recorded once', async () => {
    const clock = new ManualClock(T0);
    const store = new SqlEventStore(sql);
    await store.init();
    const aggregates = new AggregateStore(store, clock);
    const made: string[] = [];
    const handlers = (name: string, hang: (n: number) => boolean) => ({
      load: (job: Lease) => aggregates.load(madeDecider, `made-${job.key}`),
      send: async (job: Lease, command: { n: number }) => (await aggregates.handle(madeDecider, `made-${job.key}`, command, { actor: 'test' })).events,
      call: async (_job: Lease, effect: { n: number }) => {
        made.push(`${name}:${effect.n}`);
        // Killed after making the effect and before recording it: it never answers.
        if (hang(effect.n)) await new Promise(() => undefined);
        return { type: 'Done' as const, n: effect.n };
      },
    });
    const options = (owner: string) => ({ clock, queue, owner, leaseMs: 10_000, concurrency: 4, warn: () => undefined });
    const killed = new WorkflowProcessor(
      twoEffects,
      handlers('killed', (n) => n === 2),
      options('killed'),
    );
    const next = new WorkflowProcessor(
      twoEffects,
      handlers('next', () => false),
      options('next'),
    );
    await queue.schedule('test', 'crash', T0);

    void killed.runOnce();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(made).toEqual(['killed:1', 'killed:2']);
    expect(await next.runOnce()).toBe(0);
    clock.advance(10_001);
    expect(await next.runOnce()).toBe(1);
    // Effect 2 is made again (it was never recorded) and recorded once; the job is done.
    expect(made).toEqual(['killed:1', 'killed:2', 'next:2']);
    expect(await aggregates.load(madeDecider, 'made-crash')).toBe(2);
    expect(await queue.dueAt('test', 'crash')).toBeNull();
  });

  it('a workflow that schedules lets its job go until then', async () => {
    const clock = new ManualClock(T0);
    let looks = 0;
    const waiting: Workflow<never, null, never, never> = { kind: 'waits', decide: () => (looks++, [schedule(at(30_000))]), evolve: (s) => s };
    const processor = new WorkflowProcessor(
      waiting,
      { load: async () => null, send: async () => [], call: async () => undefined as never },
      { clock, queue, owner: 'w', leaseMs: 10_000, concurrency: 1, warn: () => undefined },
    );
    await queue.schedule('waits', 'x', T0);
    expect(await processor.runOnce()).toBe(1);
    clock.advance(29_000);
    expect(await processor.runOnce()).toBe(0);
    clock.advance(1_000);
    expect(await processor.runOnce()).toBe(1);
    expect(looks).toBe(2);
    await queue.remove('waits', 'x');
  });
});

describe("the processor, when a step's record is refused", () => {
  /** Records once, then completes: a stream's state is how many times it was loaded. */
  const recordsOnce: Workflow<never, number, string, never> = {
    kind: 'records',
    decide: (_input, loads) => (loads === 1 ? [send('record')] : [complete()]),
    evolve: (loads) => loads,
  };
  const stepWith = (refusal: DomainError) => {
    let loads = 0;
    const completed: string[] = [];
    const processor = new WorkflowProcessor(
      recordsOnce,
      {
        load: async () => ++loads,
        send: () => Promise.reject(refusal),
        call: async () => undefined as never,
      },
      {
        clock: new ManualClock(T0),
        queue: { claim: async () => [], reschedule: async () => true, complete: async (job) => completed.push(job.key) > 0 },
        owner: 'w',
        leaseMs: 10_000,
        concurrency: 1,
        warn: () => undefined,
      },
    );
    const job = { kind: 'records', key: 'r', owner: 'w', epoch: 1, attempts: 1, dueAt: T0, leaseUntil: at(10_000) } as Lease;
    return { step: processor.step(job), loads: () => loads, completed };
  };

  it('takes a refusal of the command as the stream having moved on: it loads the stream again and decides on what is there', async () => {
    const run = stepWith(new DomainError('moved_on', 'the stream moved on'));
    await run.step;
    expect([run.loads(), run.completed]).toEqual([2, ['r']]);
  });

  it('fails the step on a capability missing (unavailable), leaving the job to be tried again once its lease runs out', async () => {
    const refusal = new DomainError('storage_unavailable', 'no SVC_ENCRYPTION_KEY to seal with', {}, 'unavailable');
    const run = stepWith(refusal);
    await expect(run.step).rejects.toBe(refusal);
    expect([run.loads(), run.completed]).toEqual([1, []]);
  });
});
