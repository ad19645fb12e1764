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
  /** Optional: how the state is kept as a snapshot, so a long stream is not read whole (issue 45). */
  readonly snapshot?: SnapshotCodec<State>;
}

/**
 * A state as plain JSON and back. `decode(encode(s))` must decide and evolve exactly as `s`
 * does; `version` names the state's shape and meaning, and changes whenever `evolve` or the
 * state do, so that a snapshot of an older shape is ignored rather than misread.
 */
export interface SnapshotCodec<State> {
  readonly version: string;
  encode(state: State): unknown;
  decode(data: unknown): State;
  /**
   * Roughly how many entries the state holds: a snapshot is kept every max(this, the aggregate
   * store's interval) events, so that writing one never costs more than reading what it saves.
   */
  size(state: State): number;
}

// A decider's refusal is the platform's domain error: one class for every library, mapped once at the edge.
export { DomainError } from '@svc/platform';

/** Replays events onto the initial state (for tests, auditors and aggregate loading). */
export function fold<S, E extends DomainEvent>(decider: Pick<Decider<unknown, S, E>, 'initialState' | 'evolve'>, events: E[]): S {
  return events.reduce(decider.evolve, decider.initialState());
}
