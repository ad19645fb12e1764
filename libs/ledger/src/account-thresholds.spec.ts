import { BALANCE_LOW_NANO, type AccountCommand, type AccountEvent, type KeyLimit } from './account';
import { A, charged, credited, dailyLimitSet, held, opened, placeHold, specAt, stats } from './testing/account-fixtures';

const MON = '2026-11-02T10:00:00.000Z';
const TUE = '2026-11-03T10:00:00.000Z';
const daily: KeyLimit = { limitNano: 1000n, reset: 'daily' };
const rich = [opened, credited(1_000_000_000_000n)];
const charge = (holdId: string, amountNano: bigint): AccountCommand => ({ type: 'ChargeUsage', holdId, amountNano, stats: stats() });

const keyWindow = (charged_nano: bigint, limit = daily, day = '2026-11-02') => ({
  account_id: A,
  key_id: 'k1',
  reset: limit.reset,
  limit_nano: limit.limitNano.toString(),
  charged_nano: charged_nano.toString(),
  window_start: `${day}T00:00:00.000Z`,
  resets_at: new Date(Date.parse(`${day}T00:00:00.000Z`) + 86_400_000).toISOString(),
});
const warning = (chargedNano: bigint, limit = daily, day?: string): AccountEvent => ({ type: 'KeySpendCapWarning', data: keyWindow(chargedNano, limit, day) });
const reached = (chargedNano: bigint, trigger: 'charge' | 'refusal', limit = daily, day?: string): AccountEvent => ({
  type: 'KeySpendCapReached',
  data: { ...keyWindow(chargedNano, limit, day), trigger },
});
const dailyReached = (chargedNano: bigint, trigger: 'charge' | 'refusal', day = '2026-11-02', resets = '2026-11-03'): AccountEvent => ({
  type: 'DailyLimitReached',
  data: { account_id: A, limit_nano: '1000', charged_nano: chargedNano.toString(), day: `${day}T00:00:00.000Z`, resets_at: `${resets}T00:00:00.000Z`, trigger },
});

describe('threshold events, recorded in the decision that crosses them', () => {
  describe('KeySpendCapWarning: window charges cross 80% of the key limit', () => {
    const given = [
      ...rich,
      held('h1', 700n, { limit: daily }),
      charged('h1', 700n, MON),
      held('h2', 100n, { limit: daily }),
      held('h3', 100n, { limit: daily }),
    ];

    it('fires on the charge that crosses 80%, after the charge', () => {
      specAt(MON)
        .given(given)
        .when(charge('h2', 100n))
        .then([charged('h2', 100n, MON), warning(800n)]);
    });

    it('fires once per window: the next charge above 80% records no warning', () => {
      specAt(MON)
        .given([...given, charged('h2', 100n, MON)])
        .when(charge('h3', 50n))
        .then([charged('h3', 50n, MON)]);
    });

    it('fires again in the next window', () => {
      const tuesday = [...given, charged('h2', 100n, MON), held('h4', 900n, { limit: daily }), charged('h4', 700n, TUE)];
      specAt(TUE)
        .given(tuesday)
        .when(charge('h3', 100n))
        .then([charged('h3', 100n, TUE), warning(800n, daily, '2026-11-03')]);
    });

    it("measures charges against the key's latest limit, not the one an older hold was admitted under", () => {
      const raised: KeyLimit = { ...daily, limitNano: 2000n };
      const olderHold = [...rich, held('h1', 900n, { limit: daily }), held('h2', 700n, { limit: raised })];
      specAt(MON)
        .given(olderHold)
        .when(charge('h1', 900n))
        .then([charged('h1', 900n, MON)]);
      specAt(MON)
        .given([...olderHold, charged('h1', 900n, MON)])
        .when(charge('h2', 700n))
        .then([charged('h2', 700n, MON), warning(1600n, raised)]);
    });

    it('does not fire for holds, nor for keys without a limit', () => {
      specAt(MON)
        .given(given)
        .when(placeHold('h9', 100n, { keyLimit: daily }))
        .then([held('h9', 100n, { limit: daily })]);
      const unlimited = [...rich, held('h1', 900n), held('h2', 100n)];
      specAt(MON)
        .given(unlimited)
        .when(charge('h1', 900n))
        .then([charged('h1', 900n, MON)]);
    });
  });

  describe("KeySpendCapReached: the window's charges reach the limit (issue 41 item 18)", () => {
    const given = [...rich, held('h1', 700n, { limit: daily }), charged('h1', 700n, MON), held('h2', 300n, { limit: daily })];

    it('a charge that passes 80% and reaches the limit at once records the warning, then reached, in one decision', () => {
      specAt(MON)
        .given(given)
        .when(charge('h2', 300n))
        .then([charged('h2', 300n, MON), warning(1000n), reached(1000n, 'charge')]);
    });

    it('a charge that reaches the limit after the warning records reached alone', () => {
      const warned = [...rich, held('h1', 800n, { limit: daily }), charged('h1', 800n, MON), warning(800n), held('h2', 200n, { limit: daily })];
      specAt(MON)
        .given(warned)
        .when(charge('h2', 200n))
        .then([charged('h2', 200n, MON), reached(1000n, 'charge')]);
    });

    it('a hold refused at 67% of the limit is not "reached": spend has not reached the limit, and the warning still comes at 80%', () => {
      const at67 = [...rich, held('h1', 670n, { limit: daily }), charged('h1', 670n, MON)];
      const refused: AccountCommand = { type: 'RecordLimitRefusal', hold: placeHold('h9', 400n, { keyLimit: daily }) };
      specAt(MON).given(at67).when(refused).then([]);
      specAt(MON)
        .given([...at67, held('h2', 200n, { limit: daily })])
        .when(charge('h2', 130n))
        .then([charged('h2', 130n, MON), warning(800n)]);
    });

    it('a refusal records reached, once per window, when the charges are already at a limit lowered under them', () => {
      const lowered: KeyLimit = { ...daily, limitNano: 500n };
      const refused: AccountCommand = { type: 'RecordLimitRefusal', hold: placeHold('h9', 1n, { keyLimit: lowered }) };
      specAt(MON)
        .given(given)
        .when(refused)
        .then([reached(700n, 'refusal', lowered)]);
      specAt(MON)
        .given([...given, reached(700n, 'refusal', lowered)])
        .when(refused)
        .then([]);
    });

    it('after the cap is reached, crossing 80% records no warning', () => {
      const bigHold = [...rich, held('h1', 500n, { limit: daily }), held('h2', 400n, { limit: daily }), reached(0n, 'refusal')];
      specAt(MON)
        .given([...bigHold, charged('h1', 500n, MON)])
        .when(charge('h2', 400n))
        .then([charged('h2', 400n, MON)]);
    });

    it('is re-armed by the next window and by a changed limit', () => {
      const afterReached = [
        ...rich,
        held('h1', 1000n, { limit: daily }),
        charged('h1', 1000n, MON),
        reached(1000n, 'charge'),
        held('h2', 1000n, { limit: daily }),
      ];
      specAt(TUE)
        .given(afterReached)
        .when(charge('h2', 1000n))
        .then([charged('h2', 1000n, TUE), warning(1000n, daily, '2026-11-03'), reached(1000n, 'charge', daily, '2026-11-03')]);
      const lowered = { ...daily, limitNano: 1000n - 1n };
      specAt(MON)
        .given(afterReached)
        .when({ type: 'RecordLimitRefusal', hold: placeHold('h9', 1n, { keyLimit: lowered }) })
        .then([reached(1000n, 'refusal', lowered)]);
    });

    it('records nothing when the hold would now be admitted, or was refused for the balance', () => {
      specAt(MON)
        .given(given)
        .when({ type: 'RecordLimitRefusal', hold: placeHold('h9', 1n, { keyLimit: { ...daily, limitNano: 2000n } }) })
        .then([]);
      specAt(MON)
        .given([opened, credited(10n)])
        .when({ type: 'RecordLimitRefusal', hold: placeHold('h9', 11n, { keyLimit: daily }) })
        .then([]);
    });

    it('a lifetime budget reports no window', () => {
      const never: KeyLimit = { limitNano: 10n, reset: 'never' };
      const spent = [...rich, held('h1', 10n, { limit: never }), charged('h1', 10n, MON)];
      specAt(MON)
        .given(spent)
        .when({ type: 'RecordLimitRefusal', hold: placeHold('h9', 1n, { keyLimit: never }) })
        .then([{ type: 'KeySpendCapReached', data: { ...keyWindow(10n, never), window_start: null, resets_at: null, trigger: 'refusal' } }]);
    });
  });

  describe('DailyLimitReached: the account daily limit', () => {
    const given = [...rich, dailyLimitSet(1000n), held('h1', 900n), charged('h1', 900n, MON), held('h2', 100n, { key: 'k2' })];

    it('a charge that reaches it records it', () => {
      specAt(MON)
        .given(given)
        .when(charge('h2', 100n))
        .then([charged('h2', 100n, MON, { key: 'k2' }), dailyReached(1000n, 'charge')]);
    });

    it('a refused hold records it once per day; the next day and a new limit re-arm it', () => {
      const refused: AccountCommand = { type: 'RecordLimitRefusal', hold: placeHold('h9', 101n) };
      specAt(MON)
        .given(given)
        .when(refused)
        .then([dailyReached(900n, 'refusal')]);
      specAt(MON)
        .given([...given, dailyReached(900n, 'refusal')])
        .when(refused)
        .then([]);
      const tuesday = [...given, dailyReached(900n, 'refusal'), charged('h2', 100n, TUE, { key: 'k2' }), held('h3', 950n)];
      specAt(TUE)
        .given(tuesday)
        .when(refused)
        .then([dailyReached(100n, 'refusal', '2026-11-03', '2026-11-04')]);
      specAt(MON)
        .given([...given, dailyReached(900n, 'refusal'), dailyLimitSet(500n), dailyLimitSet(1000n)])
        .when(refused)
        .then([dailyReached(900n, 'refusal')]);
    });
  });

  describe('BalanceLow: the settled balance falls below $1.00', () => {
    const low = (balance: bigint): AccountEvent => ({
      type: 'BalanceLow',
      data: { account_id: A, balance_nano: balance.toString(), threshold_nano: BALANCE_LOW_NANO.toString() },
    });
    const given = [opened, credited(BALANCE_LOW_NANO + 100n), held('h1', 500n), held('h2', 500n)];

    it('fires on the charge that crosses below, once', () => {
      specAt(MON)
        .given(given)
        .when(charge('h1', 101n))
        .then([charged('h1', 101n, MON), low(BALANCE_LOW_NANO - 1n)]);
      specAt(MON)
        .given([...given, charged('h1', 101n, MON)])
        .when(charge('h2', 1n))
        .then([charged('h2', 1n, MON)]);
    });

    it('does not fire for holds: a hold is not spent money', () => {
      specAt(MON)
        .given([opened, credited(BALANCE_LOW_NANO)])
        .when(placeHold('h1', 500n))
        .then([held('h1', 500n)]);
    });

    it('is re-armed only by credits that bring the balance back to the threshold', () => {
      const afterLow = [...given, charged('h1', 101n, MON)];
      specAt(MON)
        .given([...afterLow, credited(1n)])
        .when(charge('h2', 1n))
        .then([charged('h2', 1n, MON), low(BALANCE_LOW_NANO - 1n)]);
      const stillBelow = [...afterLow, charged('h2', 100n, MON), credited(50n), held('h3', 1n)];
      specAt(MON)
        .given(stillBelow)
        .when(charge('h3', 1n))
        .then([charged('h3', 1n, MON)]);
    });
  });
});
