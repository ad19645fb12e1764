import { encodePosition } from '@svc/eventstore';
import { chooseReadSource, type ReadSourceState } from './read-source';

const at = (n: number) => encodePosition(BigInt(n), 1n);
/** A reader whose own last write is at 10, looking for the first time at a standby at 10. */
const base: ReadSourceState = { needed: at(10), standbyAt: at(10), waitedMs: 0, maxWaitMs: 200 };

describe('chooseReadSource: where a pure read of a projection is answered', () => {
  it('given a standby that has replayed the reader’s own write, when it reads, then the standby answers', () => {
    expect(chooseReadSource(base)).toBe('replica');
  });

  it('given a standby past the reader’s own write, when it reads, then the standby answers', () => {
    expect(chooseReadSource({ ...base, standbyAt: at(12) })).toBe('replica');
  });

  it('given a reader with no write known anywhere, when it reads, then the standby answers however far behind it is', () => {
    expect(chooseReadSource({ ...base, needed: undefined, standbyAt: '' })).toBe('replica');
  });

  it('given a standby behind the reader’s own write, when the wait has not used its budget, then the read waits', () => {
    expect(chooseReadSource({ ...base, standbyAt: at(9) })).toBe('wait');
    expect(chooseReadSource({ ...base, standbyAt: at(9), waitedMs: 199 })).toBe('wait');
  });

  it('given a standby still behind once the budget is spent, when it reads, then the primary answers', () => {
    expect(chooseReadSource({ ...base, standbyAt: at(9), waitedMs: 200 })).toBe('primary');
    expect(chooseReadSource({ ...base, standbyAt: '', waitedMs: 5_000 })).toBe('primary');
  });

  it('given a budget of 0, when the standby is behind, then the primary answers without waiting', () => {
    expect(chooseReadSource({ ...base, standbyAt: at(9), maxWaitMs: 0 })).toBe('primary');
  });

  it('given a standby that did not answer, when it reads, then the primary answers at once, own write or not', () => {
    expect(chooseReadSource({ ...base, standbyAt: null })).toBe('primary');
    expect(chooseReadSource({ ...base, needed: undefined, standbyAt: null })).toBe('primary');
  });

  it('compares positions by transaction first, as the log orders them', () => {
    // (9, 99) is before (10, 1): string order of encoded positions is the log's order.
    expect(chooseReadSource({ ...base, standbyAt: encodePosition(9n, 99n) })).toBe('wait');
  });
});
