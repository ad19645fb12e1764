import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DomainError } from '@svc/eventstore';
import { ACCOUNT_SNAPSHOT_VERSION, accountDecider, accountSnapshot, availableNano, type AccountCommand, type AccountState, type Budget } from './account';
import { A, placeHold, stats } from './testing/account-fixtures';

/*
 * Issue 45: an account's state kept as a snapshot (plain JSON) and restored decides every
 * command as the state it was taken from. The seeded simulation (account.simulation.spec.ts)
 * restores its state every few appends over holds, charges, limits and adjustments; these
 * histories add what it does not draw: Idempotency-Keys, guardrail budgets, reaped holds.
 */

const NOW = new Date('2026-11-02T10:00:00Z');
const org: Budget = { guardrailId: 'g1', name: 'team', scope: 'organization', subject: 'org1', limitNano: 5_000n, reset: 'daily' };
const idempotent = (key: string) => ({ idempotency: { key, fingerprint: `fp-${key}` } });

/** The state after each command is decided and its events evolved, in turn. */
function history(commands: AccountCommand[]): AccountState {
  let state = accountDecider.initialState();
  for (const command of commands) {
    for (const event of accountDecider.decide(command, state, NOW)) state = accountDecider.evolve(state, event);
  }
  return state;
}

const restore = (state: AccountState): AccountState => accountSnapshot.decode(JSON.parse(JSON.stringify(accountSnapshot.encode(state))));

const outcome = (state: AccountState, command: AccountCommand): unknown => {
  try {
    return accountDecider.decide(command, state, NOW);
  } catch (err) {
    if (err instanceof DomainError) return { code: err.code, details: err.details };
    throw err;
  }
};

const rich = history([
  { type: 'OpenAccount', accountId: A },
  { type: 'AddCredits', amountNano: 100_000n, reason: 'signup' },
  { type: 'SetDailyLimit', limitNano: 90_000n },
  { type: 'AdjustBalance', adjustmentId: 'adj1', amountNano: -1_000n, kind: 'adjustment', reason: 'refund reversal', operator: 'ops' },
  placeHold('charged-twice', 1_000n, idempotent('idem-1')),
  { type: 'ChargeUsage', holdId: 'charged-twice', amountNano: 800n, stats: stats() },
  placeHold('open-idem', 1_000n, idempotent('idem-2')),
  placeHold('budgeted', 3_000n, { budgets: [org], keyLimit: { limitNano: 10_000n, reset: 'weekly' } }),
  { type: 'ChargeUsage', holdId: 'budgeted', amountNano: 2_500n, stats: stats() },
  placeHold('budget-open', 1_500n, { budgets: [org] }),
  placeHold('reaped', 2_000n, { keyId: 'k2' }),
  { type: 'ChargeUsage', holdId: 'reaped', amountNano: 300n, stats: stats({ completion_tokens: 3 }), usage: { output: 3 }, reaped: true },
  placeHold('released', 700n),
  { type: 'ReleaseHold', holdId: 'released', errorCode: 'upstream_503' },
]);

describe('the account state as a snapshot (issue 45)', () => {
  it('is restored with every amount, open hold, Idempotency-Key, budget, reaped hold and adjustment it had', () => {
    const restored = restore(rich);
    expect(availableNano(restored)).toBe(availableNano(rich));
    expect([...restored.holds.keys()].sort()).toEqual(['budget-open', 'open-idem']);
    expect([...restored.idempotency.keys()]).toEqual([...rich.idempotency.keys()]);
    expect([...restored.reaped.keys()]).toEqual(['reaped']);
    expect(restored.reaped.get('reaped')!.chargedNano).toBe(300n);
    expect(restored.budgets).toEqual(rich.budgets);
    expect(restored.keys).toEqual(rich.keys);
    expect(restored.adjustments).toEqual(rich.adjustments);
    expect(restored.dailyLimitNano).toBe(90_000n);
  });

  it.each<[string, AccountCommand]>([
    ['a retry of a charged idempotent request', placeHold('retry', 1_000n, idempotent('idem-1'))],
    ['a retry of one in progress', placeHold('retry', 1_000n, idempotent('idem-2'))],
    ['a retry with another body', placeHold('retry', 1_000n, { idempotency: { key: 'idem-1', fingerprint: 'other' } })],
    ['a hold over what is left of the budget', placeHold('over-budget', 1_100n, { budgets: [org] })],
    ['a hold within it', placeHold('within-budget', 900n, { budgets: [org] })],
    [
      'the own charge of a reaped hold',
      { type: 'ChargeUsage', holdId: 'reaped', amountNano: 1_200n, stats: stats({ completion_tokens: 12 }), usage: { output: 12 } },
    ],
    [
      'an adjustment retried',
      { type: 'AdjustBalance', adjustmentId: 'adj1', amountNano: -1_000n, kind: 'adjustment', reason: 'refund reversal', operator: 'ops' },
    ],
    [
      'an adjustment retried with other content',
      { type: 'AdjustBalance', adjustmentId: 'adj1', amountNano: -2_000n, kind: 'adjustment', reason: 'other', operator: 'ops' },
    ],
    ['a hold over the daily limit', placeHold('over-day', 88_000n)],
    ['a charge of an open hold', { type: 'ChargeUsage', holdId: 'budget-open', amountNano: 1_400n, stats: stats() }],
    ['expiring the holds', { type: 'ExpireHolds' }],
  ])('decides %s as the state it was taken from', (_, command) => {
    expect(outcome(restore(rich), command)).toEqual(outcome(rich, command));
  });

  it('keeps a plain object whose one key is a tag of its own apart from the tagged values', () => {
    const tricky = history([
      { type: 'OpenAccount', accountId: A },
      { type: 'AddCredits', amountNano: 10_000n, reason: 'signup' },
      placeHold('h', 100n, { keyId: '$bigint' }),
      { type: 'ChargeUsage', holdId: 'h', amountNano: 40n, stats: stats() },
    ]);
    const restored = restore(tricky);
    expect(Object.keys(restored.keys)).toEqual(['$bigint']);
    expect(restored.keys.$bigint.lifetimeNano).toBe(40n);
  });

  // A snapshot of an older meaning must be ignored, not misread: whoever changes how the state
  // evolves moves ACCOUNT_SNAPSHOT_VERSION and records the files' new digest here.
  it('has its version moved whenever the files that say what a state means change', () => {
    const files = ['account/state.ts', 'account/snapshot.ts', 'spend-window.ts'];
    const digest = createHash('sha256');
    for (const file of files) digest.update(readFileSync(join(__dirname, file)));
    expect({ version: ACCOUNT_SNAPSHOT_VERSION, digest: digest.digest('hex').slice(0, 16) }).toEqual({ version: 'account-1', digest: '57a9ae535e03aea2' });
  });
});
