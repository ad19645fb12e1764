import { fold } from '@svc/eventstore';
import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import { MAX_AMOUNT_NANO } from '@svc/platform';
import { accountDecider, availableNano, balanceNano, BALANCE_LOW_NANO, type AccountCommand, type AccountEvent, type AdjustmentKind } from './account';
import { A, charged, credited, held, opened, placeHold } from './testing/account-fixtures';

const spec = deciderSpec(accountDecider);
const NOW = '2026-11-02T10:00:00.000Z';

const adjust = (
  adjustmentId: string,
  amountNano: bigint,
  kind: AdjustmentKind = 'adjustment',
  reason = 'duplicate charge',
  operator = 'ana',
): AccountCommand => ({
  type: 'AdjustBalance',
  adjustmentId,
  amountNano,
  kind,
  reason,
  operator,
});
const adjusted = (adjustment_id: string, amount: bigint, kind: AdjustmentKind = 'adjustment', reason = 'duplicate charge', operator = 'ana'): AccountEvent => ({
  type: 'BalanceAdjusted',
  data: { account_id: A, adjustment_id, amount_nano: amount.toString(), kind, reason, operator },
});

/** Issue 23, corrections: recorded as events beside what they correct; nothing is edited in place. */
describe('account decider: credit notes and adjustments', () => {
  it('records a credit note (positive) and an adjustment of either sign, with the operator and reason', () => {
    spec
      .given([opened, credited(1000n)])
      .when(adjust('adj1', 250n, 'credit_note', 'outage refund'))
      .then([adjusted('adj1', 250n, 'credit_note', 'outage refund')]);
    spec
      .given([opened, credited(1000n)])
      .when(adjust('adj1', -300n))
      .then([adjusted('adj1', -300n)]);
    spec
      .given([opened, credited(1000n)])
      .when(adjust('adj1', 300n))
      .then([adjusted('adj1', 300n)]);
  });

  it('refuses zero, a negative credit note, and an account that does not exist', () => {
    expect(
      spec
        .given([opened, credited(1000n)])
        .when(adjust('adj1', 0n))
        .thenThrows('invalid_amount').details.param,
    ).toBe('amount_usd');
    expect(
      spec
        .given([opened, credited(1000n)])
        .when(adjust('adj1', -1n, 'credit_note'))
        .thenThrows('invalid_amount').details.param,
    ).toBe('amount_usd');
    spec.given([]).when(adjust('adj1', 1n)).thenThrows('account_not_found');
  });

  it('counts adjustments in the balance and in what a hold may take', () => {
    const given = [opened, credited(1000n), adjusted('adj1', 500n, 'credit_note'), adjusted('adj2', -200n)];
    const state = fold(accountDecider, given);
    expect(balanceNano(state)).toBe(1300n);
    spec
      .given(given)
      .when(placeHold('h1', 1300n))
      .then([held('h1', 1300n)]);
    spec.given(given).when(placeHold('h1', 1301n)).thenThrows('insufficient_quota');
  });

  it('never takes the available balance (open holds counted) below zero: exactly to zero passes, one nano more is refused', () => {
    const given = [opened, credited(1000n), held('h1', 400n), charged('h1', 100n, NOW), held('h2', 300n)];
    // available = 1000 - 100 - 300 = 600
    spec
      .given(given)
      .when(adjust('adj1', -600n))
      .then([adjusted('adj1', -600n)]);
    const err = spec.given(given).when(adjust('adj1', -601n)).thenThrows('adjustment_exceeds_balance');
    expect(err.details).toEqual({ param: 'amount_usd', available_nano: 600n });
  });

  it('makes a retry safe: the same id and content decides nothing, the same id with other content is refused', () => {
    const given = [opened, credited(1000n), adjusted('adj1', -200n)];
    spec.given(given).when(adjust('adj1', -200n)).then([]);
    expect(spec.given(given).when(adjust('adj1', -201n)).thenThrows('adjustment_id_conflict').details.param).toBe('adjustment_id');
    spec
      .given(given)
      .when(adjust('adj1', -200n, 'adjustment', 'other reason'))
      .thenThrows('adjustment_id_conflict');
    spec
      .given(given)
      .when(adjust('adj1', -200n, 'adjustment', 'duplicate charge', 'bob'))
      .thenThrows('adjustment_id_conflict');
    // A retry is recognised even when the balance no longer covers it: it was already applied.
    spec
      .given([...given, held('h1', 800n)])
      .when(adjust('adj1', -200n))
      .then([]);
  });

  it('keeps credits and positive adjustments within what the read model can sum', () => {
    spec
      .given([opened, credited(MAX_AMOUNT_NANO - 10n)])
      .when(adjust('adj1', 11n))
      .thenThrows('credits_limit_exceeded');
    spec
      .given([opened, credited(MAX_AMOUNT_NANO - 10n)])
      .when(adjust('adj1', 10n))
      .then([adjusted('adj1', 10n)]);
  });

  it('records BalanceLow when a negative adjustment takes the settled balance under $1.00, once', () => {
    const given = [opened, credited(BALANCE_LOW_NANO + 100n)];
    spec
      .given(given)
      .when(adjust('adj1', -101n))
      .then([
        adjusted('adj1', -101n),
        { type: 'BalanceLow', data: { account_id: A, balance_nano: (BALANCE_LOW_NANO - 1n).toString(), threshold_nano: BALANCE_LOW_NANO.toString() } },
      ]);
    spec
      .given(given)
      .when(adjust('adj1', -100n))
      .then([adjusted('adj1', -100n)]);
    spec
      .given([...given, adjusted('adj1', -101n)])
      .when(adjust('adj2', -1n))
      .then([adjusted('adj2', -1n)]);
  });

  it('an adjustment moves the balance, not the spend windows: key and account spend count charges only', () => {
    const state = fold(accountDecider, [
      opened,
      credited(1000n),
      held('h1', 400n),
      charged('h1', 100n, NOW),
      adjusted('adj1', -50n),
      adjusted('adj2', 70n, 'credit_note'),
    ]);
    expect(state.chargedNano).toBe(100n);
    expect(state.keys.k1.lifetimeNano).toBe(100n);
    expect(state.day.chargedNano).toBe(100n);
    expect(availableNano(state)).toBe(920n);
  });
});
