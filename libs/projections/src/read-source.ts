import type { Position } from '@svc/eventstore';

/** Where a read of the read models is answered. */
export type ReadSource = 'replica' | 'primary';

export interface ReadSourceState {
  /** The position the reader must see (its own last write); undefined when it has none. */
  readonly needed: Position | undefined;
  /** The projection's checkpoint as the standby has replayed it; null when the standby did not answer. */
  readonly standbyAt: Position | null;
  /** How long this read has waited for the standby so far (ms). */
  readonly waitedMs: number;
  /** How long a read may wait for the standby before it goes to the primary (ms). */
  readonly maxWaitMs: number;
}

/**
 * Read-your-writes with a standby: the standby answers once its copy of the projection has
 * reached the reader's own last write; a standby behind it is waited for, briefly, then the
 * primary answers. A standby that does not answer sends the read to the primary at once: it is
 * an optimisation, never a reason to fail a read.
 */
export function chooseReadSource(state: ReadSourceState): ReadSource | 'wait' {
  if (state.standbyAt === null) return 'primary';
  if (state.needed === undefined || state.standbyAt >= state.needed) return 'replica';
  return state.waitedMs < state.maxWaitMs ? 'wait' : 'primary';
}
