import { DomainError, fold } from '@svc/eventstore';
import {
  accountDecider,
  budgetBucket,
  budgetHeldNano,
  budgetSpendOf,
  chargedIn,
  type AccountEvent,
  type AccountState,
  type Budget,
  type PlaceHold,
} from './account';
import type { LimitReset } from './spend-window';
import { A, charged, credited, opened, placeHold, released, specAt, stats } from './testing/account-fixtures';
import { Random } from './testing/random';

// Issue 44: guardrail budgets are holds. Monday 2026-11-02 10:00 UTC.
const MON = '2026-11-02T10:00:00.000Z';
const rich = [opened, credited(100_000_000_000n)];

const budget = (scope: Budget['scope'], subject: string, limitNano: bigint, over: Partial<Budget> = {}): Budget => ({
  guardrailId: `gr_${scope}`,
  name: `${scope} budget`,
  scope,
  subject,
  limitNano,
  reset: 'never',
  ...over,
});
const org = (limitNano: bigint, over: Partial<Budget> = {}) => budget('organization', 'org1', limitNano, over);
const member = (subject: string, limitNano: bigint, over: Partial<Budget> = {}) => budget('member', subject, limitNano, over);
const keyBudget = (subject: string, limitNano: bigint, over: Partial<Budget> = {}) => budget('key', subject, limitNano, over);

const budgetData = (b: Budget) => ({
  bucket: budgetBucket(b.guardrailId, b.scope, b.subject),
  guardrail_id: b.guardrailId,
  scope: b.scope,
  subject: b.subject,
  limit_nano: b.limitNano.toString(),
  reset: b.reset,
});

/** The HoldPlaced the decider records for `placeHold(holdId, nano, { keyId, budgets })` at MON. */
const heldUnder = (holdId: string, nano: bigint, budgets: Budget[], key = 'k1'): AccountEvent => ({
  type: 'HoldPlaced',
  data: {
    account_id: A,
    hold_id: holdId,
    key_id: key,
    amount_nano: nano.toString(),
    model: 'sim/echo',
    endpoint: '/v1/chat/completions',
    expires_at: '2026-11-02T10:15:00.000Z',
    key_limit: null,
    budgets: budgets.map(budgetData),
  },
});

describe('guardrail budgets: the worst case is held against every layer in one decision (issue 44)', () => {
  it('records the budgets a hold was admitted under, and nothing new for a request no budget covers', () => {
    const budgets = [keyBudget('k1', 1000n), member('u1', 1000n), org(1000n)];
    specAt(MON)
      .given(rich)
      .when(placeHold('h1', 500n, { budgets }))
      .then([heldUnder('h1', 500n, budgets)]);
    const plain = accountDecider.decide(placeHold('h2', 500n), fold(accountDecider, rich), new Date(MON));
    expect(plain[0]!.data).not.toHaveProperty('budgets');
  });

  it('refuses a hold that would take the organization past its budget, counting the charges and open holds of every key and member under it', () => {
    const o = org(1000n);
    const given = [
      ...rich,
      heldUnder('a', 400n, [o], 'k1'),
      charged('a', 300n, MON, { key: 'k1' }),
      // Another member's key, still running: its worst case counts.
      heldUnder('b', 500n, [member('u2', 10_000n), o], 'k2'),
    ];
    // Spent: 300 charged + 500 held; 200 left.
    specAt(MON)
      .given(given)
      .when(placeHold('c', 200n, { keyId: 'k3', budgets: [o] }))
      .then([heldUnder('c', 200n, [o], 'k3')]);
    const err = specAt(MON)
      .given(given)
      .when(placeHold('c', 201n, { keyId: 'k3', budgets: [o] }))
      .thenThrows('budget_limit_reached');
    expect(err.details).toEqual({
      guardrail_id: 'gr_organization',
      guardrail_name: 'organization budget',
      scope: 'organization',
      subject: 'org1',
      limit_nano: 1000n,
      spent_nano: 800n,
      required_nano: 201n,
      resets_at: null,
    });
    expect(err.message).toContain('"organization budget"');
  });

  it('names the narrowest budget that refuses: key before member before organization, whatever order they come in', () => {
    const given = [...rich, heldUnder('a', 900n, [keyBudget('k1', 1000n), member('u1', 1000n), org(1000n)])];
    const all = [org(1000n), member('u1', 1000n), keyBudget('k1', 1000n)];
    expect(
      specAt(MON)
        .given(given)
        .when(placeHold('b', 101n, { budgets: all }))
        .thenThrows('budget_limit_reached').details.scope,
    ).toBe('key');
    const wideKey = [org(1000n), member('u1', 1000n), keyBudget('k1', 5000n)];
    expect(
      specAt(MON)
        .given(given)
        .when(placeHold('b', 101n, { budgets: wideKey }))
        .thenThrows('budget_limit_reached').details.scope,
    ).toBe('member');
  });

  it('a key limit refuses before a budget, and a budget before the daily limit and the balance', () => {
    const poor = [opened, credited(100n)];
    const err = specAt(MON)
      .given(poor)
      .when(placeHold('h', 500n, { keyLimit: { limitNano: 400n, reset: 'never' }, budgets: [org(300n)] }))
      .thenThrows('key_limit_reached');
    expect(err.details.limit_nano).toBe(400n);
    specAt(MON)
      .given(poor)
      .when(placeHold('h', 500n, { budgets: [org(300n)] }))
      .thenThrows('budget_limit_reached');
    specAt(MON)
      .given(poor)
      .when(placeHold('h', 500n, { budgets: [org(600n)] }))
      .thenThrows('insufficient_quota');
  });

  it('keeps spend per guardrail and subject: one guardrail on two members gives each its own budget', () => {
    const u1 = member('u1', 1000n);
    const u2 = member('u2', 1000n);
    const given = [...rich, heldUnder('a', 1000n, [u1], 'k1')];
    specAt(MON)
      .given(given)
      .when(placeHold('b', 1000n, { keyId: 'k2', budgets: [u2] }))
      .then([heldUnder('b', 1000n, [u2], 'k2')]);
    specAt(MON)
      .given(given)
      .when(placeHold('b', 1n, { keyId: 'k9', budgets: [u1] }))
      .thenThrows('budget_limit_reached');
    // A guardrail assigned anew is a new budget: it covers the charges made while it is assigned.
    const replaced = member('u1', 1000n, { guardrailId: 'gr_new' });
    specAt(MON)
      .given(given)
      .when(placeHold('b', 1000n, { budgets: [replaced] }))
      .then([heldUnder('b', 1000n, [replaced])]);
  });

  it('frees the margin at once: a stream that costs less than its worst case leaves the rest for the next request', () => {
    const o = org(1000n);
    const given = [...rich, heldUnder('a', 900n, [o])];
    specAt(MON)
      .given(given)
      .when(placeHold('b', 200n, { budgets: [o] }))
      .thenThrows('budget_limit_reached');
    specAt(MON)
      .given([...given, charged('a', 100n, MON)])
      .when(placeHold('b', 900n, { budgets: [o] }))
      .then([heldUnder('b', 900n, [o])]);
    specAt(MON)
      .given([...given, released('a')])
      .when(placeHold('b', 1000n, { budgets: [o] }))
      .then([heldUnder('b', 1000n, [o])]);
  });

  it.each([
    ['daily', '2026-11-02T23:59:59.000Z', '2026-11-03T00:00:00.000Z'],
    ['weekly', '2026-11-08T23:59:59.000Z', '2026-11-09T00:00:00.000Z'],
    ['monthly', '2026-11-30T23:59:59.000Z', '2026-12-01T00:00:00.000Z'],
  ] as const)('%s: windows are UTC as for key limits; refused at %s, admitted at %s', (reset, before, after) => {
    const o = org(1000n, { reset: reset as LimitReset });
    const given = [...rich, heldUnder('a', 1000n, [o]), charged('a', 1000n, MON)];
    const hold = placeHold('b', 1n, { budgets: [o], ttlMs: 1000 });
    const err = specAt(before).given(given).when(hold).thenThrows('budget_limit_reached');
    expect(err.details.resets_at).toBe(after);
    const admitted = accountDecider.decide(hold, fold(accountDecider, given), new Date(after));
    expect(admitted.map((e) => e.type)).toEqual(['HoldPlaced']);
  });

  it('a charge counts against every budget its hold was admitted under, and no other', () => {
    const budgets = [keyBudget('k1', 10_000n), member('u1', 10_000n), org(10_000n)];
    const state = fold(accountDecider, [...rich, heldUnder('a', 600n, budgets), charged('a', 250n, MON), heldUnder('b', 100n, [org(10_000n)], 'k2')]);
    const bucket = (b: Budget) => budgetBucket(b.guardrailId, b.scope, b.subject);
    for (const b of budgets) expect(budgetSpendOf(state, bucket(b)).lifetimeNano).toBe(250n);
    expect(budgetHeldNano(state, bucket(org(0n)))).toBe(100n);
    expect(budgetHeldNano(state, bucket(member('u1', 0n)))).toBe(0n);
    expect(budgetSpendOf(state, bucket(member('u2', 0n))).lifetimeNano).toBe(0n);
  });
});

describe('budget threshold events: budget.warning at 80%, budget.reached at the limit (issue 44)', () => {
  const o = org(1000n, { reset: 'daily' });
  const window = (charged_nano: string) => ({
    account_id: A,
    guardrail_id: 'gr_organization',
    scope: 'organization',
    subject: 'org1',
    reset: 'daily',
    limit_nano: '1000',
    charged_nano,
    window_start: '2026-11-02T00:00:00.000Z',
    resets_at: '2026-11-03T00:00:00.000Z',
  });
  const charge = (holdId: string, nano: bigint) => ({ type: 'ChargeUsage' as const, holdId, amountNano: nano, stats: stats() });
  const types = (events: AccountEvent[]) => events.map((e) => e.type);

  it('a charge that crosses 80% records the warning after the charge; one that reaches the limit records both, in that order', () => {
    const given = [...rich, heldUnder('a', 1000n, [o])];
    const state = fold(accountDecider, given);
    const at80 = accountDecider.decide(charge('a', 800n), state, new Date(MON));
    expect(types(at80)).toEqual(['UsageCharged', 'BudgetWarning']);
    expect(at80[1]!.data).toEqual(window('800'));
    const full = accountDecider.decide(charge('a', 1000n), state, new Date(MON));
    expect(types(full)).toEqual(['UsageCharged', 'BudgetWarning', 'BudgetReached']);
    expect(full[2]!.data).toEqual({ ...window('1000'), trigger: 'charge' });
  });

  it('fires once per window, and again in the next', () => {
    const given = [...rich, heldUnder('a', 900n, [o]), charged('a', 850n, MON), { type: 'BudgetWarning', data: window('850') } as AccountEvent];
    const state = fold(accountDecider, [...given, heldUnder('b', 100n, [o])]);
    expect(types(accountDecider.decide(charge('b', 50n), state, new Date(MON)))).toEqual(['UsageCharged']);
    const tomorrow = fold(accountDecider, [...given, { ...heldUnder('b', 900n, [o]) }]);
    expect(types(accountDecider.decide(charge('b', 900n), tomorrow, new Date('2026-11-03T08:00:00.000Z')))).toEqual(['UsageCharged', 'BudgetWarning']);
  });

  it('a refusal records reached only when the charges are already at a limit lowered under them, once', () => {
    const given = [...rich, heldUnder('a', 900n, [o]), charged('a', 900n, MON)];
    const refusal = (limitNano: bigint): PlaceHold => placeHold('b', 200n, { budgets: [org(limitNano, { reset: 'daily' })] });
    const record = (events: AccountEvent[], limitNano: bigint) =>
      accountDecider.decide({ type: 'RecordLimitRefusal', hold: refusal(limitNano) }, fold(accountDecider, events), new Date(MON));
    expect(record(given, 1000n)).toEqual([]);
    const reached = record(given, 800n);
    expect(reached).toEqual([{ type: 'BudgetReached', data: { ...window('900'), limit_nano: '800', trigger: 'refusal' } }]);
    expect(record([...given, ...reached], 800n)).toEqual([]);
  });
});

/**
 * Whatever order concurrent requests of many keys, members and one organization are decided in
 * (the store serialises them on the account's stream), no budget's window ever holds more than
 * its limit in charges and open holds together, and refusals name a budget that really was full.
 */
describe('no layer is ever exceeded, over random interleavings (issue 44)', () => {
  const members = { u1: ['k1', 'k2', 'k3'], u2: ['k4', 'k5', 'k6'], u3: ['k7', 'k8', 'k9'] } as const;
  const orgBudget = org(50_000n, { reset: 'daily' });
  const memberBudgets = { u1: member('u1', 20_000n), u2: member('u2', 30_000n, { reset: 'weekly' }), u3: member('u3', 25_000n) };
  const keyBudgets: Record<string, Budget> = { k1: keyBudget('k1', 8_000n), k5: keyBudget('k5', 6_000n, { reset: 'monthly' }) };
  const budgetsOf = (user: keyof typeof members, key: string): Budget[] => [orgBudget, memberBudgets[user], ...(keyBudgets[key] ? [keyBudgets[key]!] : [])];
  const all = [orgBudget, ...Object.values(memberBudgets), ...Object.values(keyBudgets)];
  const used = (state: AccountState, b: Budget, at: Date) => {
    const bucket = budgetBucket(b.guardrailId, b.scope, b.subject);
    return chargedIn(budgetSpendOf(state, bucket), b.reset, at.getTime()) + budgetHeldNano(state, bucket);
  };

  it.each([1, 2, 3, 4, 5])('seed %i: 600 steps of holds, charges below the worst case, and releases', (seed) => {
    const random = new Random(seed);
    const now = new Date(MON);
    let state = fold(accountDecider, rich);
    const open: string[] = [];
    let refused = 0;
    for (let step = 0; step < 600; step++) {
      let command;
      if (open.length === 0 || random.chance(0.55)) {
        const user = random.pick(Object.keys(members) as (keyof typeof members)[]);
        const key = random.pick(members[user]);
        command = placeHold(`h${step}`, random.nano(100n, 3_000n), { keyId: key, budgets: budgetsOf(user, key) });
      } else {
        const holdId = open.splice(random.int(0, open.length - 1), 1)[0]!;
        const hold = state.holds.get(holdId)!;
        command = random.chance(0.8)
          ? { type: 'ChargeUsage' as const, holdId, amountNano: random.nano(1n, hold.amountNano), stats: stats() }
          : { type: 'ReleaseHold' as const, holdId, errorCode: 'upstream_503' };
      }
      try {
        const events = accountDecider.decide(command, state, now);
        state = events.reduce(accountDecider.evolve, state);
        if (command.type === 'PlaceHold') open.push(command.holdId);
      } catch (err) {
        expect(err).toBeInstanceOf(DomainError);
        expect((err as DomainError).code).toBe('budget_limit_reached');
        const { limit_nano, spent_nano, required_nano } = (err as DomainError).details as Record<string, bigint>;
        expect(spent_nano + required_nano).toBeGreaterThan(limit_nano);
        refused++;
      }
      for (const b of all) expect(used(state, b, now)).toBeLessThanOrEqual(b.limitNano);
    }
    // The budgets are small enough that the run reaches them: the check above was exercised.
    expect(refused).toBeGreaterThan(20);
  });
});
