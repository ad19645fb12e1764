import { fold } from '@svc/eventstore';
import { accountDecider, keySpendNano, type AccountEvent, type KeyLimit } from './account';
import type { LimitReset } from './spend-window';
import { charged, credited, dailyLimitSet, expired, held, opened, placeHold, released, specAt } from './testing/account-fixtures';

// Monday 2026-11-02 10:00 UTC; the week runs to Monday 2026-11-09 00:00.
const MON = '2026-11-02T10:00:00.000Z';
const WED = '2026-11-04T10:00:00.000Z';
const limit = (reset: LimitReset, limitNano = 1000n): KeyLimit => ({ limitNano, reset });
const rich = [opened, credited(1_000_000n)];

describe('per-key spend limits (spec 2.2, 3.3, 7: 429 insufficient_quota)', () => {
  it.each([
    ['daily', 'daily_spend_cap_reached', '2026-11-03T00:00:00.000Z'],
    ['weekly', 'weekly_spend_cap_reached', '2026-11-09T00:00:00.000Z'],
    ['monthly', 'monthly_spend_cap_reached', '2026-12-01T00:00:00.000Z'],
    ['never', 'key_limit_reached', null],
  ] as const)('%s: refuses a hold that would take the key past its limit with %s', (reset, code, resets_at) => {
    const given = [...rich, held('h1', 600n, { limit: limit(reset) }), charged('h1', 300n, MON), held('h2', 200n, { limit: limit(reset) })];
    // Spent: 300 charged + 200 still held.
    specAt(MON)
      .given(given)
      .when(placeHold('h3', 500n, { keyLimit: limit(reset) }))
      .then([held('h3', 500n, { limit: limit(reset) })]);
    const err = specAt(MON)
      .given(given)
      .when(placeHold('h3', 501n, { keyLimit: limit(reset) }))
      .thenThrows(code);
    expect(err.details).toEqual({ key_id: 'k1', limit_nano: 1000n, spent_nano: 500n, required_nano: 501n, resets_at });
  });

  it('counts only this key: other keys spend their own limits', () => {
    const given = [...rich, held('o1', 900n, { key: 'other' }), charged('o1', 900n, MON, { key: 'other' })];
    specAt(MON)
      .given(given)
      .when(placeHold('h1', 1000n, { keyLimit: limit('daily') }))
      .then([held('h1', 1000n, { limit: limit('daily') })]);
  });

  it('a released or expired hold stops counting', () => {
    const given = [...rich, held('h1', 600n), held('h2', 400n)];
    const hold = placeHold('h3', 1000n, { keyLimit: limit('never') });
    specAt(MON).given(given).when(hold).thenThrows('key_limit_reached');
    specAt(MON)
      .given([...given, released('h1'), expired('h2', 400n, MON)])
      .when(hold)
      .then([held('h3', 1000n, { limit: limit('never') })]);
  });

  it('weekly: a hold refused on Sunday 23:59:59 succeeds on Monday 00:00:00 (time moved through `now`)', () => {
    const given = [...rich, held('h1', 900n), charged('h1', 900n, WED)];
    const hold = placeHold('h2', 200n, { keyLimit: limit('weekly'), ttlMs: 1000 });
    const err = specAt('2026-11-08T23:59:59.000Z').given(given).when(hold).thenThrows('weekly_spend_cap_reached');
    expect(err.details.resets_at).toBe('2026-11-09T00:00:00.000Z');
    specAt('2026-11-09T00:00:00.000Z')
      .given(given)
      .when(hold)
      .then([held('h2', 200n, { limit: limit('weekly'), expires: '2026-11-09T00:00:01.000Z' })]);
  });

  it('daily resets at 00:00 UTC, monthly on the 1st, and a lifetime budget never', () => {
    const given = (at: string) => [...rich, held('h1', 1000n), charged('h1', 1000n, at)];
    const fits = (reset: LimitReset, chargedAt: string, now: string) =>
      specAt(now)
        .given(given(chargedAt))
        .when(placeHold('h2', 1n, { keyLimit: limit(reset), ttlMs: 0 }))
        .then([held('h2', 1n, { limit: limit(reset), expires: now })]);
    const refused = (reset: LimitReset, chargedAt: string, now: string) =>
      specAt(now)
        .given(given(chargedAt))
        .when(placeHold('h2', 1n, { keyLimit: limit(reset) }))
        .thenThrows(`${reset}_spend_cap_reached`);
    refused('daily', '2026-11-02T00:00:00.000Z', '2026-11-02T23:59:59.999Z');
    fits('daily', '2026-11-02T23:59:59.999Z', '2026-11-03T00:00:00.000Z');
    refused('monthly', '2026-11-01T00:00:00.000Z', '2026-11-30T23:59:59.999Z');
    fits('monthly', '2026-11-30T23:59:59.999Z', '2026-12-01T00:00:00.000Z');
    specAt('2030-01-01T00:00:00.000Z')
      .given(given(MON))
      .when(placeHold('h2', 1n, { keyLimit: limit('never') }))
      .thenThrows('key_limit_reached');
  });

  it('a hold placed in one window and charged in the next counts in the window of the charge', () => {
    const sunday = '2026-11-08T23:59:00.000Z';
    const monday = '2026-11-09T00:01:00.000Z';
    const placed = [...rich, held('h1', 900n, { limit: limit('weekly') })];
    const state = fold(accountDecider, [...placed, charged('h1', 700n, monday)]);
    expect(keySpendNano(state, 'k1', 'weekly', new Date(monday))).toBe(700n);
    expect(keySpendNano(state, 'k1', 'daily', new Date(monday))).toBe(700n);
    // While open on Monday, it already reserved Monday's window in full.
    expect(keySpendNano(fold(accountDecider, placed), 'k1', 'weekly', new Date(monday))).toBe(900n);
    expect(keySpendNano(fold(accountDecider, [...placed, charged('h1', 700n, sunday)]), 'k1', 'weekly', new Date(monday))).toBe(0n);
  });

  it('never overshoots: two requests that each fit but not together are decided one after the other', () => {
    const given = [...rich, held('h1', 600n, { limit: limit('daily') })];
    specAt(MON)
      .given(given)
      .when(placeHold('h2', 600n, { keyLimit: limit('daily') }))
      .thenThrows('daily_spend_cap_reached');
  });
});

describe('account daily spend limit (spec 7: 429 daily_spend_limit_reached)', () => {
  it("refuses a hold when today's charges plus every open hold plus this one exceed it", () => {
    const given = [...rich, dailyLimitSet(1000n), held('h1', 300n), charged('h1', 300n, MON), held('h2', 200n, { key: 'k2' })];
    specAt(MON)
      .given(given)
      .when(placeHold('h3', 500n))
      .then([held('h3', 500n)]);
    const err = specAt(MON).given(given).when(placeHold('h3', 501n)).thenThrows('daily_spend_limit_reached');
    expect(err.details).toEqual({ limit_nano: 1000n, spent_nano: 500n, required_nano: 501n, resets_at: '2026-11-03T00:00:00.000Z' });
  });

  it("resets at 00:00 UTC: yesterday's charges do not count", () => {
    const given = [...rich, dailyLimitSet(1000n), held('h1', 1000n), charged('h1', 1000n, '2026-11-01T23:59:59.999Z')];
    specAt(MON)
      .given(given)
      .when(placeHold('h2', 1000n))
      .then([held('h2', 1000n)]);
  });

  it('a limit of zero refuses everything, and removing the limit lifts it', () => {
    specAt(MON)
      .given([...rich, dailyLimitSet(0n)])
      .when(placeHold('h1', 1n))
      .thenThrows('daily_spend_limit_reached');
    specAt(MON)
      .given([...rich, dailyLimitSet(0n), dailyLimitSet(null)])
      .when(placeHold('h1', 1n))
      .then([held('h1', 1n)]);
  });
});

describe('refusal order: key cap, then account daily limit, then balance', () => {
  // 100 available, a daily limit of 50 and a key limit of 10: a hold of 200 breaks all three.
  const given: AccountEvent[] = [opened, credited(100n), dailyLimitSet(50n)];
  const hold = placeHold('h1', 200n, { keyLimit: limit('monthly', 10n) });

  it('reports the key cap first, a limit topping up cannot lift', () => {
    specAt(MON).given(given).when(hold).thenThrows('monthly_spend_cap_reached');
  });

  it('then the account daily limit, then the balance (402)', () => {
    specAt(MON)
      .given(given)
      .when({ ...hold, keyLimit: null })
      .thenThrows('daily_spend_limit_reached');
    specAt(MON)
      .given([...given, dailyLimitSet(null)])
      .when({ ...hold, keyLimit: null })
      .thenThrows('insufficient_quota');
  });
});
