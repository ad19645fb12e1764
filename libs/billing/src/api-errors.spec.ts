import { EventStoreDbUnavailableError, fold } from '@svc/eventstore';
import { accountDecider, type AccountEvent, PeerUnavailableError, type PlaceHold } from '@svc/ledger';
import { isConnectionFailure } from '@svc/platform';
import { apiErrorOfFailure } from './api-errors';

// Spec 7's 429 insufficient_quota row: spend limits (a key's, the account's daily) are 429, not
// 402, because a top-up does not lift them. A guardrail budget (issue 44) is a spend limit too.
const now = new Date('2026-11-02T10:00:00.000Z');
const given: AccountEvent[] = [
  { type: 'AccountOpened', data: { account_id: 'acc1' } },
  { type: 'CreditsAdded', data: { account_id: 'acc1', amount_nano: '100000000000', reason: 'signup' } },
];
const hold = (amountNano: bigint, limitNano: bigint): PlaceHold => ({
  type: 'PlaceHold',
  holdId: 'h1',
  keyId: 'k1',
  amountNano,
  model: 'sim/echo',
  endpoint: '/v1/chat/completions',
  ttlMs: 60_000,
  budgets: [{ guardrailId: 'gr_1', name: 'Team Q4', scope: 'organization', subject: 'org1', limitNano, reset: 'daily' }],
});
const refusal = (command: PlaceHold): unknown => {
  try {
    accountDecider.decide(command, fold(accountDecider, given), now);
  } catch (err) {
    return err;
  }
  throw new Error('the hold was admitted');
};

describe('a guardrail budget refusal at the edge (issue 44)', () => {
  it('is 429 insufficient_quota naming the guardrail, with Retry-After until the window resets', () => {
    const err = apiErrorOfFailure(refusal(hold(2_000_000_000n, 1_000_000_000n)), now);
    expect(err).toMatchObject({ status: 429, type: 'insufficient_quota', code: 'budget_limit_reached', param: null });
    expect(err.message).toContain('the organization budget set by the guardrail "Team Q4" (gr_1)');
    expect(err.message).toContain('or for the limit to reset at 2026-11-03T00:00:00.000Z.');
    expect(err.message).not.toContain('reached');
    // 14 hours to 2026-11-03T00:00Z.
    expect(err.headers['retry-after']).toBe(String(14 * 3600));
  });

  it('says the budget is reached once its window is spent, naming the guardrail and layer', () => {
    const spent: AccountEvent[] = [
      ...given,
      {
        type: 'HoldPlaced',
        data: {
          account_id: 'acc1',
          hold_id: 'h0',
          key_id: 'k1',
          amount_nano: '1000000000',
          model: 'sim/echo',
          endpoint: '/v1/chat/completions',
          expires_at: '2026-11-02T10:01:00.000Z',
          budgets: [
            { bucket: 'gr_1/organization:org1', guardrail_id: 'gr_1', scope: 'organization', subject: 'org1', limit_nano: '1000000000', reset: 'daily' },
          ],
        },
      },
    ];
    let thrown: unknown;
    try {
      accountDecider.decide(hold(1n, 1_000_000_000n), fold(accountDecider, spent), now);
    } catch (err) {
      thrown = err;
    }
    expect(apiErrorOfFailure(thrown, now).message).toBe(
      'The organization\'s daily budget, set by the guardrail "Team Q4" (gr_1), is reached; it resets at 2026-11-03T00:00:00.000Z.',
    );
  });

  it("says when it is this request's worst case that does not fit, so a smaller max_tokens may pass", () => {
    const err = apiErrorOfFailure(refusal(hold(2_000_000_000n, 1_000_000_000n)), now);
    expect(err.message).toMatch(/^This request's worst case \(\$2(\.0+)?: .* does not fit in what is left of the limit \(\$1(\.0+)? of \$1(\.0+)?/);
  });
});

describe('an event store that cannot be reached', () => {
  it('is the 503 of spec 7 with Retry-After, for EventStoreDB through a leader change as for PostgreSQL', () => {
    const esdb = apiErrorOfFailure(new EventStoreDbUnavailableError('append to account-a1', 13, 9500, 'not-leader', new Error('not leader')), now);
    expect(esdb).toMatchObject({ status: 503, type: 'service_unavailable', code: 'database_unavailable', headers: { 'retry-after': '1' } });
    const pg = apiErrorOfFailure(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }), now);
    expect(pg).toMatchObject({ status: 503, code: 'database_unavailable' });
    // A fault that is no outage stays a 500.
    expect(apiErrorOfFailure(new EventStoreDbUnavailableError('append', 1, 0, 'other', new Error('bad data')), now).status).toBe(500);
  });
});

describe('the gateway deciding the account lost mid-batch (issue 45, SVC_PEER_FORWARDING=on or ledger)', () => {
  it('is a 502 peer_unavailable, as a gateway lost mid-request is, not a database outage', () => {
    const lost = new PeerUnavailableError('the gateway deciding this account stopped answering: other side closed');
    expect(apiErrorOfFailure(lost, now)).toMatchObject({ status: 502, type: 'api_error', code: 'peer_unavailable' });
    // Still a lost connection to the pipeline, which retries a charge on it.
    expect(isConnectionFailure(lost)).toBe(true);
  });
});
