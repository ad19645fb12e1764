import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import type { AccountCommand, AccountEvent } from './account';
import { accountDecider, availableNano } from './account';
import { A, charged, credited, held, opened, specAt, stats } from './testing/account-fixtures';

// The default clock of deciderSpec: Monday 2026-11-02 10:00 UTC; holds expire at 10:15.
const spec = deciderSpec(accountDecider);

const reapedCharge = (holdId: string, nano: bigint, completionTokens: number): AccountEvent => {
  const event = charged(holdId, nano, '2026-11-02T09:59:30.000Z', { stats: stats({ completion_tokens: completionTokens }) }) as Extract<
    AccountEvent,
    { type: 'UsageCharged' }
  >;
  return { ...event, data: { ...event.data, reaped: true } };
};
const reapedRelease = (holdId: string): AccountEvent => ({
  type: 'HoldReleased',
  data: { account_id: A, hold_id: holdId, key_id: 'k1', reason: 'error', error_code: 'gateway_lost', reaped: true },
});

/** The charge of the process that served the hold, as its settlement makes it. */
const ownCharge = (holdId: string, nano: bigint, completionTokens: number): AccountCommand => ({
  type: 'ChargeUsage',
  holdId,
  amountNano: nano,
  stats: stats({ completion_tokens: completionTokens }),
  usage: { input: stats().prompt_tokens, output: completionTokens },
});

const corrected = (holdId: string, delta: bigint, total: bigint, completionTokens: number, added: Record<string, number>): AccountEvent => ({
  type: 'UsageCorrected',
  data: {
    account_id: A,
    hold_id: holdId,
    key_id: 'k1',
    amount_nano: delta.toString(),
    total_nano: total.toString(),
    charged_at: '2026-11-02T10:00:00.000Z',
    ...stats({ completion_tokens: completionTokens }),
    usage: { input: stats().prompt_tokens, output: completionTokens },
    usage_added: added,
  },
});

/**
 * Issue 41 D: the hold reaper settles the holds of a process whose lease lapsed, from what it
 * recorded; a process that only paused (GC, SIGSTOP, a database outage) comes back and must
 * be able to charge what it delivered. Its charge corrects the reaper's, once.
 */
describe("account: a reaped hold's own charge corrects the reaper's (issue 41 D)", () => {
  it('charges the difference when the process delivered more than the reaper charged', () => {
    spec
      .given([opened, credited(1_000_000n), held('h1', 10_000n), reapedCharge('h1', 2_100n, 21)])
      .when(ownCharge('h1', 16_200n, 162))
      .then([corrected('h1', 14_100n, 16_200n, 162, { output: 141 })]);
  });

  it('charges in full a hold the reaper released with nothing recorded: a non-streamed answer already given', () => {
    spec
      .given([opened, credited(1_000_000n), held('h1', 10_000n), reapedRelease('h1')])
      .when(ownCharge('h1', 900n, 9))
      .then([corrected('h1', 900n, 900n, 9, { input: stats().prompt_tokens, output: 9 })]);
  });

  it('charges nothing more when nothing more was delivered, nor twice for one correction', () => {
    spec
      .given([opened, credited(1_000_000n), held('h1', 10_000n), reapedCharge('h1', 2_100n, 21)])
      .when(ownCharge('h1', 2_100n, 21))
      .then([]);
    spec
      .given([opened, credited(1_000_000n), held('h1', 10_000n), reapedCharge('h1', 2_100n, 21), corrected('h1', 14_100n, 16_200n, 162, { output: 141 })])
      .when(ownCharge('h1', 16_200n, 162))
      .then([]);
  });

  it('moves the balance by exactly the correction', () => {
    const events = [opened, credited(1_000_000n), held('h1', 10_000n), reapedCharge('h1', 2_100n, 21), corrected('h1', 14_100n, 16_200n, 162, { output: 141 })];
    const state = events.reduce(accountDecider.evolve, accountDecider.initialState());
    expect(availableNano(state)).toBe(1_000_000n - 16_200n);
    expect(state.keys.k1.lifetimeNano).toBe(16_200n);
  });

  it('still refuses a second settlement of a hold nobody reaped, and the reaper its own repeat', () => {
    spec
      .given([opened, credited(1_000_000n), held('h1', 10_000n), charged('h1', 900n, '2026-11-02T09:59:00.000Z')])
      .when(ownCharge('h1', 1_000n, 10))
      .thenThrows('hold_not_open');
    spec
      .given([opened, credited(1_000_000n), held('h1', 10_000n), reapedCharge('h1', 2_100n, 21)])
      .when({ ...ownCharge('h1', 3_000n, 30), reaped: true } as AccountCommand)
      .thenThrows('hold_not_open');
  });

  it('refuses a correction once the hold would have expired: no process serves a request that long', () => {
    specAt('2026-11-02T10:15:00Z')
      .given([opened, credited(1_000_000n), held('h1', 10_000n), reapedCharge('h1', 2_100n, 21)])
      .when(ownCharge('h1', 16_200n, 162))
      .thenThrows('hold_not_open');
  });
});
