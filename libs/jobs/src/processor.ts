/**
 * The one processor of every workflow (./workflow): claims the due jobs of a kind, loads each
 * one's state, and carries out what its decider says until the decider lets the job go
 * (schedule) or ends it (complete). A step that throws leaves the job leased: once the lease
 * runs out, any worker takes it again from the streams, which are the truth.
 */
import { DomainError, type DomainEvent } from '@svc/eventstore';
import type { Clock } from '@svc/platform';
import type { JobQueue, Lease } from './queue';
import { DUE, type Due, type Workflow } from './workflow';

/** What a kind does for real: read its state, record on its streams, make its effects. */
export interface WorkflowHandlers<Input, State, Command, Effect, Event extends DomainEvent = DomainEvent> {
  /** The job's state, from its streams (and what is kept beside them). */
  load(job: Lease): Promise<State>;
  /** Decides `command` on its stream; resolves with the events recorded. */
  send(job: Lease, command: Command, state: State): Promise<Event[]>;
  /** Makes the effect; resolves with its result, the decider's next input. */
  call(job: Lease, effect: Effect, state: State): Promise<Input>;
}

export interface ProcessorOptions {
  clock: Clock;
  queue: Pick<JobQueue, 'claim' | 'reschedule' | 'complete'>;
  /** This worker's name in the leases. */
  owner: string;
  /** Longer than the slowest step of the kind, so a live worker's lease never lapses mid-step. */
  leaseMs: number;
  /** Jobs one pass takes on at once. */
  concurrency: number;
  warn(message: string): void;
  /** Runs one step of `job` inside a trace of its own; absent without tracing. */
  trace?<T>(job: Lease, fn: () => Promise<T>): Promise<T>;
}

/** Inputs one step may decide on: a workflow that never lets its job go is a bug, not a loop. */
const MAX_DECISIONS = 32;

export class WorkflowProcessor<Input, State, Command, Effect, Event extends DomainEvent = DomainEvent> {
  private readonly running = new Set<Promise<void>>();
  private stopping = false;

  constructor(
    readonly workflow: Workflow<Input, State, Command, Effect, Event>,
    private readonly handlers: WorkflowHandlers<Input, State, Command, Effect, Event>,
    private readonly options: ProcessorOptions,
  ) {}

  /** One pass: the jobs due now, each taken one step further; resolves with how many were, once their steps are done. */
  async runOnce(): Promise<number> {
    if (this.stopping) return 0;
    const { clock, queue, owner, leaseMs, concurrency, trace } = this.options;
    const now = clock.now();
    const claimed = await queue.claim(this.workflow.kind, owner, now, new Date(now.getTime() + leaseMs), concurrency);
    await Promise.all(claimed.map((job) => this.track(trace ? trace(job, () => this.run(job)) : this.run(job))));
    return claimed.length;
  }

  /** Starts nothing more and waits for the steps under way. */
  async stop(): Promise<void> {
    this.stopping = true;
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }

  private track(step: Promise<void>): Promise<void> {
    this.running.add(step);
    return step.finally(() => this.running.delete(step));
  }

  private async run(job: Lease): Promise<void> {
    try {
      await this.step(job);
    } catch (err) {
      this.options.warn(`${job.kind} ${job.key}: ${err instanceof Error ? err.message : String(err)}; tried again once its lease runs out`);
    }
  }

  /** Decides and carries out until the decider schedules or completes the job. */
  async step(job: Lease): Promise<void> {
    const { workflow, handlers } = this;
    const { queue, clock } = this.options;
    let state: State = await handlers.load(job);
    let input: Input | Due = DUE;
    for (let decisions = 0; decisions < MAX_DECISIONS; decisions++) {
      let next: Input | Due = DUE;
      outputs: for (const output of workflow.decide(input, state, clock.now())) {
        switch (output.type) {
          case 'send':
            try {
              const events = await handlers.send(job, output.command, state);
              state = events.reduce<State>((s, e) => workflow.evolve(s, e), state);
            } catch (err) {
              // The stream moved on under this step (a cancel from the API, another worker's
              // record): what was decided on the old state is dropped, and the new one decides.
              // A capability missing (no SVC_ENCRYPTION_KEY to seal what is recorded) is no such
              // refusal: the step fails and is tried again once its lease runs out.
              if (!(err instanceof DomainError) || err.kind === 'unavailable') throw err;
              state = await handlers.load(job);
              break outputs;
            }
            break;
          case 'call':
            next = await handlers.call(job, output.effect, state);
            break outputs;
          case 'schedule':
            await queue.reschedule(job, output.at);
            return;
          case 'complete':
            await queue.complete(job);
            return;
        }
      }
      input = next;
    }
    throw new Error(`its workflow decided ${MAX_DECISIONS} times without scheduling or completing it`);
  }
}
