import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import type { AccountEvent } from './account';
import { accountDecider } from './account';
import { charged, credited, held, opened, placeHold, released, specAt } from './testing/account-fixtures';

// The default clock of deciderSpec: Monday 2026-11-02 10:00 UTC.
const spec = deciderSpec(accountDecider);

const KEY = { key: 'a1b2', fingerprint: 'f00d' };
const UNTIL = '2026-11-03T10:00:00.000Z';

/** A hold placed by a request sent with KEY (or `over`), at the default clock. */
function heldWithKey(holdId: string, nano: bigint, over: Partial<typeof KEY> = {}, until = UNTIL): AccountEvent {
  const event = held(holdId, nano) as Extract<AccountEvent, { type: 'HoldPlaced' }>;
  return { ...event, data: { ...event.data, idempotency: { ...KEY, ...over, until } } };
}

/**
 * Issue 41 B: an Idempotency-Key is decided with the hold, in the account's log, so a retry of
 * a charged request is refused whatever the edge's own store (Redis) forgot. Spec 3.3 and 8.
 */
describe('account: Idempotency-Key decided with the hold (issue 41 B)', () => {
  it('records the hashed key, the fingerprint and 24 hours on the hold', () => {
    spec
      .given([opened, credited(1000n)])
      .when(placeHold('h1', 100n, { idempotency: KEY }))
      .then([heldWithKey('h1', 100n)]);
  });

  it('refuses a retry of a charged request: it would be billed twice', () => {
    spec
      .given([opened, credited(1000n), heldWithKey('h1', 100n), charged('h1', 80n, '2026-11-02T09:59:00.000Z')])
      .when(placeHold('h2', 100n, { idempotency: KEY }))
      .thenThrows('idempotency_completed');
  });

  it('refuses a retry while the first still runs: in progress', () => {
    spec
      .given([opened, credited(1000n), heldWithKey('h1', 100n)])
      .when(placeHold('h2', 100n, { idempotency: KEY }))
      .thenThrows('idempotency_conflict');
  });

  it('refuses the key with another body: reused', () => {
    spec
      .given([opened, credited(1000n), heldWithKey('h1', 100n)])
      .when(placeHold('h2', 100n, { idempotency: { ...KEY, fingerprint: 'beef' } }))
      .thenThrows('idempotency_key_reused');
  });

  it('lets a request whose hold was released run again under its key: an error is not billed', () => {
    spec
      .given([opened, credited(1000n), heldWithKey('h1', 100n), released('h1')])
      .when(placeHold('h2', 100n, { idempotency: KEY }))
      .then([heldWithKey('h2', 100n)]);
  });

  it('keeps a key 24 hours: a day later the same key is a new request', () => {
    specAt('2026-11-03T10:00:01Z')
      .given([opened, credited(1000n), heldWithKey('h1', 100n), charged('h1', 80n, '2026-11-02T10:00:00.000Z')])
      .when(placeHold('h2', 100n, { idempotency: KEY }))
      .then([
        {
          ...heldWithKey('h2', 100n, {}, '2026-11-04T10:00:01.000Z'),
          data: { ...heldWithKey('h2', 100n, {}, '2026-11-04T10:00:01.000Z').data, expires_at: '2026-11-03T10:15:01.000Z' },
        } as AccountEvent,
      ]);
  });

  it('forgets the keys a later request outlived, so the record stays one day long', () => {
    const later = heldWithKey('h2', 100n, { key: 'other' }, '2026-11-04T10:00:01.000Z');
    const state = [opened, credited(1000n), heldWithKey('h1', 100n), charged('h1', 80n, '2026-11-02T10:00:00.000Z'), later].reduce(
      accountDecider.evolve,
      accountDecider.initialState(),
    );
    expect([...state.idempotency.keys()]).toEqual(['other']);
  });

  it('decides requests without a key as before', () => {
    spec
      .given([opened, credited(1000n), heldWithKey('h1', 100n)])
      .when(placeHold('h2', 100n))
      .then([held('h2', 100n)]);
  });
});
