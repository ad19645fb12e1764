import { encodePosition, fold } from '@svc/eventstore';
import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import { MAX_AMOUNT_NANO } from '@svc/platform';
import { accountDecider, availableNano, EXPIRE_BATCH, upcastAccountEvent, type AccountEvent } from './account';
import { A, charged, credited, dailyLimitSet, expired, held, opened, placeHold, released, specAt, stats } from './testing/account-fixtures';

// The default clock of deciderSpec: Monday 2026-11-02 10:00 UTC.
const spec = deciderSpec(accountDecider);
const NOW = '2026-11-02T10:00:00.000Z';

describe('account decider', () => {
  it('opens an account once', () => {
    spec.given([]).when({ type: 'OpenAccount', accountId: A }).then([opened]);
    spec.given([opened]).when({ type: 'OpenAccount', accountId: A }).thenThrows('account_exists');
  });

  it('adds credits only to an open account and only positive amounts', () => {
    spec
      .given([opened])
      .when({ type: 'AddCredits', amountNano: 10_000_000_000n, reason: 'signup' })
      .then([credited(10_000_000_000n)]);
    spec.given([]).when({ type: 'AddCredits', amountNano: 1n, reason: 'signup' }).thenThrows('account_not_found');
    spec.given([opened]).when({ type: 'AddCredits', amountNano: 0n, reason: 'signup' }).thenThrows('invalid_amount');
    // Issue 14.1: credits whose sum would not fit the read model's bigint are refused, alone or summed.
    spec
      .given([opened])
      .when({ type: 'AddCredits', amountNano: MAX_AMOUNT_NANO + 1n, reason: 'admin' })
      .thenThrows('credits_limit_exceeded');
    spec
      .given([opened, credited(MAX_AMOUNT_NANO)])
      .when({ type: 'AddCredits', amountNano: 1n, reason: 'admin' })
      .thenThrows('credits_limit_exceeded');
    spec
      .given([opened, credited(MAX_AMOUNT_NANO - 1n)])
      .when({ type: 'AddCredits', amountNano: 1n, reason: 'signup' })
      .then([credited(1n)]);
  });

  describe('spec 1, rule 1: the available balance must cover the worst case', () => {
    it('places a hold that fits exactly, with its expiry from the injected clock', () => {
      // held() expires at 10:15, which is the spec clock (10:00) plus the 15 minute ttl.
      spec
        .given([opened, credited(1000n), held('h1', 400n)])
        .when(placeHold('h2', 600n))
        .then([held('h2', 600n)]);
    });

    it('counts open holds against the balance: 402 when one nano short, with what was available and required', () => {
      const err = spec
        .given([opened, credited(1000n), held('h1', 400n)])
        .when(placeHold('h2', 601n))
        .thenThrows('insufficient_quota');
      expect(err.details).toEqual({ available_nano: 600n, required_nano: 601n });
    });

    it('counts charged usage against the balance', () => {
      const given = [opened, credited(1000n), held('h1', 400n), charged('h1', 300n, NOW)];
      spec
        .given(given)
        .when(placeHold('h2', 700n))
        .then([held('h2', 700n)]);
      spec.given(given).when(placeHold('h2', 701n)).thenThrows('insufficient_quota');
    });

    it('refuses a hold id that is already open, and holds of nothing', () => {
      spec
        .given([opened, credited(1000n), held('h2', 1n)])
        .when(placeHold('h2', 1n))
        .thenThrows('hold_exists');
      spec
        .given([opened, credited(1000n)])
        .when(placeHold('h2', 0n))
        .thenThrows('invalid_amount');
    });
  });

  // Issue 15.2 and spec 4.13: a cache HIT's id, or a free call's, is a generation of its own, with cost 0.
  it('records a free generation without moving money or touching holds, with only the facts given', () => {
    const given = [opened, credited(1000n), held('h1', 400n)];
    const hit = { type: 'RecordFreeGeneration' as const, generationId: 'gen-hit', keyId: 'k1', sourceId: 'gen-src', endpoint: '/v1/chat/completions' };
    const served: AccountEvent = {
      type: 'FreeGenerationRecorded',
      data: { account_id: A, generation_id: 'gen-hit', key_id: 'k1', source_id: 'gen-src', endpoint: '/v1/chat/completions' },
    };
    spec.given(given).when(hit).then([served]);
    const state = fold(accountDecider, [...given, served]);
    expect(availableNano(state)).toBe(600n);
    expect(state.holds.has('h1')).toBe(true);
    spec.given([]).when(hit).thenThrows('account_not_found');
    const free = {
      type: 'RecordFreeGeneration' as const,
      generationId: 'gen-free',
      keyId: 'k1',
      endpoint: '/v1/moderations',
      model: 'sim/moderation',
      provider: 'sim',
      latencyMs: 12,
    };
    spec
      .given(given)
      .when(free)
      .then([
        {
          type: 'FreeGenerationRecorded',
          data: {
            account_id: A,
            generation_id: 'gen-free',
            key_id: 'k1',
            endpoint: '/v1/moderations',
            model: 'sim/moderation',
            provider: 'sim',
            latency_ms: 12,
          },
        },
      ]);
  });

  describe('settling a hold', () => {
    const given = [opened, credited(1000n), held('h1', 400n)];

    it('charges the actual cost at the decision time, which closes the hold and releases the rest', () => {
      spec
        .given(given)
        .when({ type: 'ChargeUsage', holdId: 'h1', amountNano: 123n, stats: stats() })
        .then([charged('h1', 123n, NOW)]);
      const state = fold(accountDecider, [...given, charged('h1', 123n, NOW)]);
      expect(availableNano(state)).toBe(877n);
      expect(state.holds.size).toBe(0);
    });

    it('records what it charged by meter: the meters the command names, else its tokens as input, cached_input and output', () => {
      const tokens = stats({ prompt_tokens: 10, cached_tokens: 4, completion_tokens: 5 });
      spec
        .given(given)
        .when({ type: 'ChargeUsage', holdId: 'h1', amountNano: 123n, stats: tokens })
        .then([charged('h1', 123n, NOW, { stats: tokens, usage: { input: 10, cached_input: 4, output: 5 } })]);
      spec
        .given(given)
        .when({ type: 'ChargeUsage', holdId: 'h1', amountNano: 123n, stats: tokens, usage: { images: 2 } })
        .then([charged('h1', 123n, NOW, { stats: tokens, usage: { images: 2 } })]);
    });

    it('charges more than the hold when the provider reports more, and records the excess', () => {
      spec
        .given(given)
        .when({ type: 'ChargeUsage', holdId: 'h1', amountNano: 450n, stats: stats() })
        .then([charged('h1', 450n, NOW, { exceeded: 50n })]);
      expect(availableNano(fold(accountDecider, [...given, charged('h1', 450n, NOW, { exceeded: 50n })]))).toBe(550n);
    });

    it('spec 1, rule 3: zero completion tokens (or a zero cost) release the hold and bill nothing', () => {
      const zero = {
        type: 'HoldReleased',
        data: { account_id: A, hold_id: 'h1', key_id: 'k1', reason: 'zero_completion', ...stats({ completion_tokens: 0 }) },
      };
      spec
        .given(given)
        .when({ type: 'ChargeUsage', holdId: 'h1', amountNano: 40n, stats: stats({ completion_tokens: 0 }) })
        .then([zero as AccountEvent]);
      spec
        .given(given)
        .when({ type: 'ChargeUsage', holdId: 'h1', amountNano: 0n, stats: stats() })
        .then([{ type: 'HoldReleased', data: { account_id: A, hold_id: 'h1', key_id: 'k1', reason: 'zero_completion', ...stats() } }]);
    });

    it('spec 1, rules 1-3: a request whose output is not tokens (embeddings) is billed when it returned something', () => {
      const embedded = stats({ completion_tokens: 0 });
      spec
        .given(given)
        .when({ type: 'ChargeUsage', holdId: 'h1', amountNano: 40n, stats: embedded, returned: 3 })
        .then([charged('h1', 40n, NOW, { stats: embedded })]);
      spec
        .given(given)
        .when({ type: 'ChargeUsage', holdId: 'h1', amountNano: 40n, stats: embedded, returned: 0 })
        .then([{ type: 'HoldReleased', data: { account_id: A, hold_id: 'h1', key_id: 'k1', reason: 'zero_completion', ...embedded } } as AccountEvent]);
    });

    it('spec 1, rule 3: an error releases the hold and bills nothing', () => {
      spec
        .given(given)
        .when({ type: 'ReleaseHold', holdId: 'h1', errorCode: 'upstream_503' })
        .then([released('h1')]);
      expect(availableNano(fold(accountDecider, [...given, released('h1')]))).toBe(1000n);
    });

    it('refuses a negative charge', () => {
      spec.given(given).when({ type: 'ChargeUsage', holdId: 'h1', amountNano: -1n, stats: stats() }).thenThrows('invalid_amount');
    });
  });

  describe('hold expiry (holds never leak)', () => {
    const given = [
      opened,
      credited(1000n),
      held('h1', 100n, { expires: '2026-11-02T10:00:00.000Z' }),
      held('h2', 200n, { expires: '2026-11-02T10:00:00.001Z' }),
    ];

    it('expires the holds whose expires_at is at or before now, and no other', () => {
      specAt(NOW)
        .given(given)
        .when({ type: 'ExpireHolds' })
        .then([expired('h1', 100n, NOW)]);
      expect(availableNano(fold(accountDecider, [...given, expired('h1', 100n, NOW)]))).toBe(800n);
    });

    it('records nothing when no hold is due', () => {
      specAt('2026-11-02T09:59:59.999Z').given(given).when({ type: 'ExpireHolds' }).then([]);
      specAt(NOW).given([opened]).when({ type: 'ExpireHolds' }).then([]);
    });

    it('expires the oldest deadlines first, at most `max` per decision', () => {
      const later = '2026-11-02T11:00:00.000Z';
      specAt(later)
        .given(given)
        .when({ type: 'ExpireHolds', max: 1 })
        .then([expired('h1', 100n, NOW)]);
      specAt(later)
        .given(given)
        .when({ type: 'ExpireHolds' })
        .then([expired('h1', 100n, NOW), expired('h2', 200n, '2026-11-02T10:00:00.001Z')]);
    });

    it('expires EXPIRE_BATCH holds per decision by default, so one append stays small', () => {
      const many = Array.from({ length: EXPIRE_BATCH + 1 }, (_, i) => held(`h${i}`, 1n, { expires: NOW }));
      const events = accountDecider.decide({ type: 'ExpireHolds' }, fold(accountDecider, [opened, credited(10_000n), ...many]), new Date(NOW));
      expect(events).toHaveLength(EXPIRE_BATCH);
    });
  });

  describe('a hold is resolved at most once', () => {
    const given = [opened, credited(1000n), held('h1', 400n)];
    const resolutions: [string, AccountEvent][] = [
      ['charged', charged('h1', 1n, NOW)],
      ['released', released('h1')],
      ['expired', expired('h1', 400n, '2026-11-02T10:15:00.000Z')],
    ];

    it.each(resolutions)('once %s, it can be neither charged, released nor expired', (_, resolution) => {
      const after = [...given, resolution];
      spec.given(after).when({ type: 'ChargeUsage', holdId: 'h1', amountNano: 1n, stats: stats() }).thenThrows('hold_not_open');
      spec.given(after).when({ type: 'ReleaseHold', holdId: 'h1', errorCode: 'x' }).thenThrows('hold_not_open');
      specAt('2026-11-03T00:00:00.000Z').given(after).when({ type: 'ExpireHolds' }).then([]);
    });

    it('refuses to resolve a hold that never existed', () => {
      spec.given([opened]).when({ type: 'ReleaseHold', holdId: 'nope', errorCode: 'x' }).thenThrows('hold_not_open');
    });
  });

  describe('account daily spend limit setting', () => {
    it('sets, changes and removes the limit; setting the same limit again records nothing', () => {
      spec
        .given([opened])
        .when({ type: 'SetDailyLimit', limitNano: 5n })
        .then([dailyLimitSet(5n)]);
      spec
        .given([opened, dailyLimitSet(5n)])
        .when({ type: 'SetDailyLimit', limitNano: 5n })
        .then([]);
      spec
        .given([opened])
        .when({ type: 'SetDailyLimit', limitNano: MAX_AMOUNT_NANO + 1n })
        .thenThrows('invalid_amount');
      spec
        .given([opened, dailyLimitSet(5n)])
        .when({ type: 'SetDailyLimit', limitNano: null })
        .then([dailyLimitSet(null)]);
      spec.given([opened]).when({ type: 'SetDailyLimit', limitNano: null }).then([]);
    });

    it('refuses a negative limit and an account that does not exist', () => {
      spec.given([opened]).when({ type: 'SetDailyLimit', limitNano: -1n }).thenThrows('invalid_amount');
      spec.given([]).when({ type: 'SetDailyLimit', limitNano: 1n }).thenThrows('account_not_found');
    });
  });

  describe('replay', () => {
    it('reads old UsageCharged events without charged_at into the lifetime totals only', () => {
      // Recorded before charged_at and meters: read, as the store reads it, through the upcaster.
      const old = { type: 'UsageCharged', data: { account_id: A, hold_id: 'h1', key_id: 'k1', amount_nano: '300', ...stats() } };
      const read = upcastAccountEvent({ ...old, id: 'e4', metadata: {}, stream: 'account-acc1', revision: 3n, position: encodePosition(4n, 0n) });
      const state = fold(accountDecider, [opened, credited(1000n), held('h1', 400n), read as unknown as AccountEvent]);
      expect(availableNano(state)).toBe(700n);
      expect(state.keys.k1?.lifetimeNano).toBe(300n);
      expect(state.keys.k1?.windows.daily.chargedNano).toBe(0n);
    });
  });
});
