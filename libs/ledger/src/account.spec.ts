import { fold } from '../../eventstore/src/decider';
import { deciderSpec } from '../../eventstore/src/testing/decider-spec';
import { accountDecider, availableNano, type AccountEvent, type GenerationStats } from './account';

const spec = deciderSpec(accountDecider);
const A = 'acc1';
const opened: AccountEvent = { type: 'AccountOpened', data: { account_id: A } };
const credited = (nano: bigint): AccountEvent => ({ type: 'CreditsAdded', data: { account_id: A, amount_nano: nano.toString(), reason: 'signup' } });
const held = (hold_id: string, nano: bigint): AccountEvent => ({
  type: 'HoldPlaced',
  data: { account_id: A, hold_id, key_id: 'k1', amount_nano: nano.toString(), model: 'sim/echo', endpoint: '/v1/chat/completions', expires_at: '2026-11-02T10:15:00.000Z' },
});
const stats = (over: Partial<GenerationStats> = {}): GenerationStats => ({
  model: 'sim/echo',
  provider: 'sim',
  endpoint: '/v1/chat/completions',
  prompt_tokens: 10,
  completion_tokens: 5,
  cached_tokens: 0,
  reasoning_tokens: 0,
  latency_ms: 12,
  ttft_ms: null,
  ...over,
});

describe('account decider', () => {
  it('opens an account once', () => {
    spec.given([]).when({ type: 'OpenAccount', accountId: A }).then([opened]);
    spec.given([opened]).when({ type: 'OpenAccount', accountId: A }).thenThrows('account_exists');
  });

  it('adds credits only to an open account and only positive amounts', () => {
    spec.given([opened]).when({ type: 'AddCredits', amountNano: 10_000_000_000n, reason: 'signup' }).then([credited(10_000_000_000n)]);
    spec.given([]).when({ type: 'AddCredits', amountNano: 1n, reason: 'signup' }).thenThrows('account_not_found');
    spec.given([opened]).when({ type: 'AddCredits', amountNano: 0n, reason: 'signup' }).thenThrows('invalid_amount');
  });

  describe('spec 1, rule 1: the available balance must cover the worst case', () => {
    const hold = (amountNano: bigint) => ({
      type: 'PlaceHold' as const,
      holdId: 'h2',
      keyId: 'k1',
      amountNano,
      model: 'sim/echo',
      endpoint: '/v1/chat/completions',
      ttlMs: 15 * 60_000,
    });

    it('places a hold that fits exactly, with its expiry from the injected clock', () => {
      // held() expires at 10:15, which is the spec clock (10:00) plus the 15 minute ttl.
      spec.given([opened, credited(1000n), held('h1', 400n)]).when(hold(600n)).then([held('h2', 600n)]);
    });

    it('counts open holds against the balance: 402 when one nano short', () => {
      const err = spec.given([opened, credited(1000n), held('h1', 400n)]).when(hold(601n)).thenThrows('insufficient_quota');
      expect(err.details).toEqual({ available_nano: 600n, required_nano: 601n });
    });

    it('counts charged usage against the balance', () => {
      const charged: AccountEvent = { type: 'UsageCharged', data: { account_id: A, hold_id: 'h1', key_id: 'k1', amount_nano: '300', ...stats() } };
      spec.given([opened, credited(1000n), held('h1', 400n), charged]).when(hold(700n)).then([held('h2', 700n)]);
      spec.given([opened, credited(1000n), held('h1', 400n), charged]).when(hold(701n)).thenThrows('insufficient_quota');
    });

    it('refuses a hold id that is already open', () => {
      spec.given([opened, credited(1000n), held('h2', 1n)]).when(hold(1n)).thenThrows('hold_exists');
    });
  });

  describe('settling a hold', () => {
    const given = [opened, credited(1000n), held('h1', 400n)];

    it('charges the actual cost, which closes the hold and releases the rest', () => {
      spec.given(given).when({ type: 'ChargeUsage', holdId: 'h1', amountNano: 123n, stats: stats() }).then([
        { type: 'UsageCharged', data: { account_id: A, hold_id: 'h1', key_id: 'k1', amount_nano: '123', ...stats() } },
      ]);
      const state = fold(accountDecider, [
        ...given,
        { type: 'UsageCharged', data: { account_id: A, hold_id: 'h1', key_id: 'k1', amount_nano: '123', ...stats() } },
      ]);
      expect(availableNano(state)).toBe(877n);
      expect(state.holds).toEqual({});
    });

    it('spec 1, rule 3: zero completion tokens release the hold and bill nothing', () => {
      spec.given(given).when({ type: 'ChargeUsage', holdId: 'h1', amountNano: 40n, stats: stats({ completion_tokens: 0 }) }).then([
        { type: 'HoldReleased', data: { account_id: A, hold_id: 'h1', key_id: 'k1', reason: 'zero_completion', ...stats({ completion_tokens: 0 }) } },
      ]);
    });

    it('spec 1, rule 3: an error releases the hold and bills nothing', () => {
      spec.given(given).when({ type: 'ReleaseHold', holdId: 'h1', errorCode: 'upstream_503' }).then([
        { type: 'HoldReleased', data: { account_id: A, hold_id: 'h1', key_id: 'k1', reason: 'error', error_code: 'upstream_503' } },
      ]);
      const state = fold(accountDecider, [...given, { type: 'HoldReleased', data: { account_id: A, hold_id: 'h1', key_id: 'k1', reason: 'error' } }]);
      expect(availableNano(state)).toBe(1000n);
    });

    it('resolves a hold at most once', () => {
      const released: AccountEvent = { type: 'HoldReleased', data: { account_id: A, hold_id: 'h1', key_id: 'k1', reason: 'error' } };
      spec.given([...given, released]).when({ type: 'ChargeUsage', holdId: 'h1', amountNano: 1n, stats: stats() }).thenThrows('hold_not_open');
      spec.given([...given, released]).when({ type: 'ReleaseHold', holdId: 'h1', errorCode: 'x' }).thenThrows('hold_not_open');
      spec.given([opened]).when({ type: 'ReleaseHold', holdId: 'nope', errorCode: 'x' }).thenThrows('hold_not_open');
    });
  });
});
