import { DEFAULT_RETRY_POLICY, EventStoreDbUnavailableError, retryDecision, revisionOfAppended, type FailureKind } from './eventstoredb-retry';
import { storeUnavailable } from './common';

describe('retryDecision (EventStoreDB leader change)', () => {
  const transient: FailureKind[] = ['not-leader', 'unavailable', 'deadline', 'timeout', 'cancelled', 'discovery'];

  it('given a refusal that repetition cannot change, when it fails, then it gives up at once', () => {
    expect(retryDecision('other', 1, 0)).toEqual({ retry: false });
  });

  it('given the first not-leader answer, when deciding, then it retries at once: the client already reconnected to the named leader', () => {
    expect(retryDecision('not-leader', 1, 5)).toEqual({ retry: true, afterMs: 0 });
    expect(retryDecision('not-leader', 2, 5)).toEqual({ retry: true, afterMs: 200 });
  });

  it('given a lost connection or an election, when it keeps failing, then the waits double from 100 ms up to 1 s', () => {
    const waits = [1, 2, 3, 4, 5, 6].map((attempt) => retryDecision('unavailable', attempt, 0));
    expect(waits).toEqual([100, 200, 400, 800, 1000, 1000].map((afterMs) => ({ retry: true, afterMs })));
    for (const kind of transient.filter((k) => k !== 'not-leader')) expect(retryDecision(kind, 1, 0)).toEqual({ retry: true, afterMs: 100 });
  });

  it('given 10 s spent, when the next wait would end at or past the budget, then it gives up whatever the kind', () => {
    for (const kind of transient) {
      expect(retryDecision(kind, 7, 8_999)).toEqual({ retry: true, afterMs: 1000 });
      expect(retryDecision(kind, 7, 9_000)).toEqual({ retry: false });
      expect(retryDecision(kind, 2, 10_000)).toEqual({ retry: false });
    }
    expect(retryDecision('not-leader', 1, 9_999)).toEqual({ retry: true, afterMs: 0 });
  });

  it('given a smaller budget, when deciding, then that budget bounds it', () => {
    const policy = { ...DEFAULT_RETRY_POLICY, budgetMs: 250 };
    expect(retryDecision('unavailable', 1, 0, policy)).toEqual({ retry: true, afterMs: 100 });
    expect(retryDecision('unavailable', 2, 100, policy)).toEqual({ retry: false });
  });
});

describe('revisionOfAppended', () => {
  const tail = ['a', 'b', 'c', 'd'].map((id, i) => ({ id, revision: BigInt(10 + i) }));

  it('finds our events together and in order, and answers the revision of the last of them', () => {
    expect(revisionOfAppended(['b', 'c'], tail)).toBe(12n);
    expect(revisionOfAppended(['d'], tail)).toBe(13n);
    expect(revisionOfAppended(['a', 'b', 'c', 'd'], tail)).toBe(13n);
  });

  it('does not take events of ours out of order, apart, or only some of them, for an append that happened', () => {
    expect(revisionOfAppended(['c', 'b'], tail)).toBeNull();
    expect(revisionOfAppended(['a', 'c'], tail)).toBeNull();
    expect(revisionOfAppended(['d', 'e'], tail)).toBeNull();
    expect(revisionOfAppended([], tail)).toBeNull();
    expect(revisionOfAppended(['a'], [])).toBeNull();
  });
});

describe('EventStoreDbUnavailableError', () => {
  it('is an outage to the rest of the service, whatever the last failure was, and keeps it as its cause', () => {
    const last = new Error('Failed to discover after 10 attempts.');
    const err = new EventStoreDbUnavailableError('append to account-1', 9, 9_100, 'discovery', last);
    expect(err).toMatchObject({ type: 'unavailable', attempts: 9, cause: last });
    expect(err.message).toBe('EventStoreDB: append to account-1 failed 9 time(s) over 9100 ms, the last with: Failed to discover after 10 attempts.');
    expect(storeUnavailable(err)).toBe(true);
    expect(storeUnavailable(new EventStoreDbUnavailableError('read', 1, 0, 'deadline', last))).toBe(true);
  });
});
