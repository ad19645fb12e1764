/**
 * Workflows (ARCHITECTURE section 11), in the manner of Emmett's: a pure `decide(input, state,
 * now)` says what to do next as outputs, `evolve` folds what was recorded into the state, and
 * one processor carries the outputs out for every kind. The decider chooses; the processor
 * and the kind's handlers only do what it chose:
 *
 *   send     a command decided on a stream (the events it records are evolved into the state)
 *   call     an effect (a POST, a provider call, a charge); its result is the next input
 *   schedule look again at T (the job is let go, due then)
 *   complete nothing is left to do (the job is removed)
 *
 * Deciders import no framework, database client or clock: everything they know is the input,
 * the state and `now`.
 */
import type { DomainEvent } from '@svc/eventstore';

/** The input every step starts from: the job is due. */
export interface Due {
  type: 'Due';
}

export const DUE: Due = { type: 'Due' };

export type WorkflowOutput<Command, Effect> =
  { type: 'send'; command: Command } | { type: 'call'; effect: Effect } | { type: 'schedule'; at: Date } | { type: 'complete' };

export interface Workflow<Input, State, Command, Effect, Event extends DomainEvent = DomainEvent> {
  /** The job kind in the job table. */
  readonly kind: string;
  decide(input: Input | Due, state: State, now: Date): WorkflowOutput<Command, Effect>[];
  evolve(state: State, event: Event): State;
}

export const send = <C>(command: C) => ({ type: 'send' as const, command });
export const call = <E>(effect: E) => ({ type: 'call' as const, effect });
export const schedule = (at: Date) => ({ type: 'schedule' as const, at });
export const complete = () => ({ type: 'complete' as const });
