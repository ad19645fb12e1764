/**
 * A pure decider (Emmett style): `decide(command, state, now) -> events` and
 * `evolve(state, event) -> state`. Domain code imports nothing else: no NestJS, no database,
 * no clock of its own.
 */
export interface DomainEvent<Type extends string = string, Data = unknown> {
  type: Type;
  data: Data;
}

export interface Decider<Command, State, Event extends DomainEvent> {
  readonly initialState: () => State;
  decide(command: Command, state: State, now: Date): Event[];
  evolve(state: State, event: Event): State;
}

// A decider's refusal is the platform's domain error: one class for every library, mapped once at the edge.
export { DomainError } from '@svc/platform';

/** Replays events onto the initial state (for tests, auditors and aggregate loading). */
export function fold<S, E extends DomainEvent>(decider: Pick<Decider<unknown, S, E>, 'initialState' | 'evolve'>, events: E[]): S {
  return events.reduce(decider.evolve, decider.initialState());
}
