/** The operator's view of an account and its corrections and statements (docs/api/operator.md, issue 23), and the health checks (docs/operations.md). */
import { arr, constant, dateTime, int, nullable, num, obj, oneOfValues, ref, str, usd } from '../json-schema';

export const AccountCredits = obj({
  account_id: str(),
  total_credits: usd(),
  total_usage: usd(),
  total_adjustments: usd(),
  balance: usd(),
  daily_limit_usd: nullable(usd()),
});

/** Issue 23, corrections (docs/api/account.md "Statements and corrections"). */
const adjustmentKind = oneOfValues(['credit_note', 'adjustment'], 'credit_note: money given back (positive); adjustment: either sign');
export const AdjustmentRequest = obj(
  {
    amount_usd: usd('non-zero, at most 9 decimals; negative lowers the balance (never below what open requests hold)'),
    kind: adjustmentKind,
    reason: str(undefined, { minLength: 1, maxLength: 500 }),
    operator: str('who makes the correction (the admin token is shared)', { minLength: 1, maxLength: 200 }),
    adjustment_id: str('makes a retry safe: the same id and content answers the recorded correction again; other content is a 409', {
      pattern: '^[A-Za-z0-9_.:-]{1,100}$',
    }),
  },
  { required: ['amount_usd', 'kind', 'reason', 'operator'] },
);
export const Adjustment = obj({
  adjustment_id: str(),
  account_id: str(),
  kind: adjustmentKind,
  amount_usd: usd(),
  reason: str(),
  operator: str(),
  created_at: dateTime(),
});
const meters = { type: 'object', additionalProperties: num(), description: 'quantity by meter' };
/** Issue 23, statements: replayed from the log up to the end of a period that has ended. */
export const Statement = obj({
  account_id: str(),
  from: dateTime('inclusive'),
  to: dateTime('exclusive'),
  built_at_position: nullable(str('log position of the last event of the account stream included (not the log head); null when none is')),
  currency: constant('USD'),
  opening_balance: usd(),
  closing_balance: usd('opening_balance + totals.credits - totals.charges + totals.adjustments'),
  credits: arr(obj({ at: dateTime(), amount: usd(), reason: str() })),
  charges: arr(obj({ date: str('UTC day', { format: 'date' }), model: str(), key_id: str(), requests: int(), amount: usd(), meters })),
  totals: obj(
    {
      credits: usd(),
      charges: usd('the charges listed'),
      other_keys_charges: usd(
        'issue 41 item 13, only to a key of an organization: what the keys it may not see were charged, one sum (closing = opening + credits - charges - other_keys_charges + adjustments)',
      ),
      adjustments: usd(),
      by_meter: meters,
    },
    { required: ['credits', 'charges', 'adjustments', 'by_meter'] },
  ),
  releases: arr(obj({ at: dateTime(), hold_id: str(), key_id: str(), held_amount: usd('freed, not a movement of the balance'), reason: str() })),
  expiries: arr(obj({ at: dateTime(), hold_id: str(), key_id: str(), held_amount: usd('freed, not a movement of the balance') })),
  adjustments: arr(
    obj({
      at: dateTime(),
      adjustment_id: str(),
      kind: adjustmentKind,
      amount: usd(),
      reason: nullable(str('null to a key of an organization (issue 41 item 13)')),
      operator: nullable(str('null to a key of an organization')),
    }),
  ),
});

/** docs/operations.md "Health". */
export const Check = obj(
  {
    status: oneOfValues(['ok', 'fail']),
    reason: str(),
    backend: oneOfValues(['postgresql', 'pglite']),
    lag_seconds: num(),
    max_lag_seconds: num(),
    slowest: nullable(str()),
  },
  { required: ['status'] },
);
export const Readiness = obj({
  status: oneOfValues(['ready', 'degraded', 'not_ready']),
  checks: obj({ postgres: ref('Check'), redis: ref('Check'), eventstore: ref('Check'), projections: ref('Check') }, { required: ['postgres', 'projections'] }),
});
