import { encodePosition } from '@svc/eventstore';
import type { RecordedEvent } from '@svc/eventstore';
import { accountDecider, accountStream, type AccountEvent } from './account';
import {
  auditLedger,
  compareCredits,
  compareKeyUsage,
  formatLedgerAudit,
  ledgerAuditJson,
  type AccountReplay,
  type AuditOptions,
  type CreditRows,
  type KeyUsageRow,
  type ProjectedFigures,
} from './auditor';
import { A, charged, credited, expired, held, opened, released } from './testing/account-fixtures';

/** A hand-built log: every event is recorded with its stream revision, a global position and metadata.at. */
class Log {
  readonly events: RecordedEvent[] = [];
  private readonly revisions = new Map<string, bigint>();

  add(at: string, event: AccountEvent, account = A): this {
    const stream = accountStream(account);
    const revision = (this.revisions.get(stream) ?? -1n) + 1n;
    this.revisions.set(stream, revision);
    const position = encodePosition(BigInt(this.events.length + 1), 0n);
    this.events.push({ id: `e${this.events.length}`, type: event.type, data: event.data, metadata: { at }, stream, revision, position });
    return this;
  }

  get last(): RecordedEvent {
    return this.events[this.events.length - 1];
  }
}

const NOW = new Date('2026-11-03T12:00:00.000Z'); // a Tuesday

/**
 * A clean history across window boundaries: Saturday 31 October (previous month and week),
 * Sunday 1 November (this month, previous week), Monday 2 and Tuesday 3 November (this week).
 * Every way a hold ends, an over-hold charge, and one hold still open.
 */
const cleanLog = () =>
  new Log()
    .add('2026-10-31T12:00:00.000Z', opened)
    .add('2026-10-31T12:00:00.000Z', credited(1000n))
    .add('2026-10-31T12:01:00.000Z', held('h0', 100n))
    .add('2026-10-31T12:02:00.000Z', charged('h0', 70n, '2026-10-31T12:02:00.000Z'))
    .add('2026-11-01T12:00:00.000Z', held('h1', 400n))
    .add('2026-11-01T12:01:00.000Z', charged('h1', 300n, '2026-11-01T12:01:00.000Z'))
    .add('2026-11-02T10:00:00.000Z', held('h2', 200n, { key: 'k2' }))
    .add('2026-11-02T10:01:00.000Z', released('h2', 'k2'))
    .add('2026-11-02T10:05:00.000Z', held('h3', 100n, { expires: '2026-11-02T10:06:00.000Z' }))
    .add('2026-11-02T10:20:00.000Z', expired('h3', 100n, '2026-11-02T10:06:00.000Z'))
    .add('2026-11-02T10:30:00.000Z', held('h4', 50n, { key: 'k2' }))
    .add('2026-11-02T10:31:00.000Z', charged('h4', 60n, '2026-11-02T10:31:00.000Z', { key: 'k2', exceeded: 10n }))
    .add('2026-11-03T09:00:00.000Z', held('h5', 100n))
    .add('2026-11-03T09:10:00.000Z', held('h6', 20n))
    .add('2026-11-03T09:11:00.000Z', charged('h6', 5n, '2026-11-03T09:11:00.000Z'));

const audit = (log: Log, options: AuditOptions = {}) => auditLedger(log.events, { now: NOW, ...options });

describe('ledger auditor', () => {
  it('reports balance, open holds, over-hold charges and per-key window spend of a clean log, with no violation', async () => {
    const result = await audit(cleanLog());
    expect(result.violations).toEqual([]);
    expect(result.events).toBe(15);
    expect(result.accounts).toEqual([
      {
        accountId: A,
        revision: 14n,
        events: 15,
        creditsNano: 1000n,
        chargedNano: 435n,
        adjustedNano: 0n,
        openHolds: 1,
        heldNano: 100n,
        availableNano: 465n,
        overHold: { count: 1, nano: 10n },
        reaped: { count: 0, chargedNano: 0n, released: 0, corrections: 0, correctedNano: 0n },
        keys: [
          // k1: Tuesday's 5 today and this week; November's 305 (not October's 70); 375 in all.
          { keyId: 'k1', spend: { daily: 5n, weekly: 5n, monthly: 305n, lifetime: 375n }, heldNano: 100n },
          { keyId: 'k2', spend: { daily: 0n, weekly: 60n, monthly: 60n, lifetime: 60n }, heldNano: 0n },
        ],
      },
    ]);
  });

  describe('--at: the ledger as it stood at an instant', () => {
    it('shows a hold placed before and charged after the instant as open, and measures windows at the instant', async () => {
      const at = new Date('2026-11-02T10:30:30.000Z');
      const result = await audit(cleanLog(), { at });
      expect(result.violations).toEqual([]);
      expect(result).toMatchObject({ at, cut: true, events: 11 });
      expect(result.accounts[0]).toMatchObject({ revision: 10n, chargedNano: 370n, openHolds: 1, heldNano: 50n, availableNano: 580n, overHold: { count: 0 } });
      expect(result.accounts[0].keys).toEqual([
        // Monday: nothing of k1's charges is from this week; 300 is from November.
        { keyId: 'k1', spend: { daily: 0n, weekly: 0n, monthly: 300n, lifetime: 370n }, heldNano: 0n },
        { keyId: 'k2', spend: { daily: 0n, weekly: 0n, monthly: 0n, lifetime: 0n }, heldNano: 50n },
      ]);
    });

    it('leaves out an account whose first event is after the instant', async () => {
      const log = cleanLog().add('2026-11-03T10:00:00.000Z', opened, 'later');
      expect((await audit(log)).accounts.map((a) => a.accountId)).toEqual([A, 'later']);
      expect((await audit(log, { at: new Date('2026-11-03T09:59:59.999Z') })).accounts.map((a) => a.accountId)).toEqual([A]);
    });

    it('includes an event decided exactly at the instant', async () => {
      const result = await audit(cleanLog(), { at: new Date('2026-11-02T10:31:00.000Z') });
      expect(result.accounts[0]).toMatchObject({ chargedNano: 430n, openHolds: 0 });
    });

    it('cuts each stream at its first event after the instant, even when a lagging clock stamped a later event earlier', async () => {
      const log = new Log()
        .add('2026-11-02T10:00:00.000Z', opened)
        .add('2026-11-02T10:00:00.000Z', credited(1000n))
        .add('2026-11-02T10:05:00.000Z', held('h1', 400n))
        .add('2026-11-02T10:03:00.000Z', charged('h1', 300n, '2026-11-02T10:03:00.000Z'));
      const result = await audit(log, { at: new Date('2026-11-02T10:04:00.000Z') });
      // Taking the charge without its hold would be a state the account never was in.
      expect(result.violations).toEqual([]);
      expect(result.accounts[0]).toMatchObject({ revision: 1n, chargedNano: 0n, openHolds: 0, availableNano: 1000n });
    });
  });

  it('audits one account when asked, leaving the others out', async () => {
    const log = cleanLog().add('2026-11-02T10:00:00.000Z', opened, 'other').add('2026-11-02T10:00:00.000Z', credited(5n), 'other');
    expect((await audit(log)).accounts.map((a) => a.accountId)).toEqual([A, 'other']);
    const one = await audit(log, { account: 'other' });
    expect(one.accounts).toMatchObject([{ accountId: 'other', creditsNano: 5n, events: 2 }]);
    expect(one.events).toBe(2);
  });

  describe('invariant 1: one terminal event per hold, after it; charged <= held except counted over-hold', () => {
    const base = () =>
      new Log().add('2026-11-02T10:00:00.000Z', opened).add('2026-11-02T10:00:00.000Z', credited(1000n)).add('2026-11-02T10:01:00.000Z', held('h1', 400n));

    it('reports a second terminal event with its stream and revision', async () => {
      const log = base()
        .add('2026-11-02T10:02:00.000Z', charged('h1', 300n, '2026-11-02T10:02:00.000Z'))
        .add('2026-11-02T10:03:00.000Z', released('h1'));
      expect((await audit(log)).violations).toEqual([
        { invariant: 1, stream: 'account-acc1', revision: 4n, message: 'second terminal event for hold h1 (first at revision 3)' },
      ]);
    });

    it('reports a terminal event before its hold was placed', async () => {
      const log = new Log()
        .add('2026-11-02T10:00:00.000Z', opened)
        .add('2026-11-02T10:00:00.000Z', credited(1000n))
        .add('2026-11-02T10:01:00.000Z', expired('h1', 400n, '2026-11-02T10:01:00.000Z'))
        .add('2026-11-02T10:02:00.000Z', held('h1', 400n));
      expect((await audit(log)).violations).toEqual([
        { invariant: 1, stream: 'account-acc1', revision: 2n, message: 'HoldExpired for hold h1, which was never placed' },
      ]);
    });

    it('reports a charge above its hold whose excess is not recorded', async () => {
      const log = base().add('2026-11-02T10:02:00.000Z', charged('h1', 450n, '2026-11-02T10:02:00.000Z'));
      const result = await audit(log);
      expect(result.violations).toEqual([
        { invariant: 1, stream: 'account-acc1', revision: 3n, message: 'hold h1 of 400 charged 450: exceeded_hold_nano is 0, the excess 50' },
      ]);
      expect(result.accounts[0].overHold).toEqual({ count: 1, nano: 50n });
    });

    it('counts the excess of a charge from before exceeded_hold_nano was recorded, without reporting it', async () => {
      const old = charged('h1', 450n, '2026-11-02T10:02:00.000Z') as Extract<AccountEvent, { type: 'UsageCharged' }>;
      delete old.data.exceeded_hold_nano;
      const result = await audit(base().add('2026-11-02T10:02:00.000Z', old));
      expect(result.violations).toEqual([]);
      expect(result.accounts[0].overHold).toEqual({ count: 1, nano: 50n });
    });

    it('reports a hold id placed again, while open or after it was resolved', async () => {
      const log = base().add('2026-11-02T10:02:00.000Z', held('h1', 100n));
      expect((await audit(log)).violations).toEqual([{ invariant: 1, stream: 'account-acc1', revision: 3n, message: 'hold h1 placed again while open' }]);
      const reused = base().add('2026-11-02T10:02:00.000Z', released('h1')).add('2026-11-02T10:03:00.000Z', held('h1', 100n));
      expect((await audit(reused)).violations).toEqual([
        { invariant: 1, stream: 'account-acc1', revision: 4n, message: 'hold h1 placed again after it was resolved at revision 3' },
      ]);
    });
  });

  // Issue 41 D: reaped holds may be under-billed; the audit shows them and their corrections.
  describe("holds settled by the hold reaper, and their gateways' corrections", () => {
    const reaped = (event: AccountEvent): AccountEvent => ({ ...event, data: { ...event.data, reaped: true } }) as AccountEvent;
    const correction = (holdId: string, delta: bigint, total: bigint): AccountEvent => ({
      type: 'UsageCorrected',
      data: {
        ...(charged(holdId, 0n, '').data as object),
        amount_nano: delta.toString(),
        total_nano: total.toString(),
        charged_at: '2026-11-02T10:05:00.000Z',
        usage_added: { output: 3 },
      } as never,
    });
    const base = () =>
      new Log()
        .add('2026-11-02T10:00:00.000Z', opened)
        .add('2026-11-02T10:00:00.000Z', credited(1000n))
        .add('2026-11-02T10:01:00.000Z', held('h1', 400n))
        .add('2026-11-02T10:01:00.000Z', held('h2', 100n))
        .add('2026-11-02T10:02:00.000Z', reaped(charged('h1', 120n, '2026-11-02T10:02:00.000Z')))
        .add('2026-11-02T10:02:00.000Z', reaped(released('h2')));

    it('counts reaped holds and the corrections their gateways made, which count in the charges', async () => {
      const log = base()
        .add('2026-11-02T10:05:00.000Z', correction('h1', 200n, 320n))
        .add('2026-11-02T10:05:00.000Z', correction('h2', 50n, 50n));
      const result = await audit(log);
      expect(result.violations).toEqual([]);
      expect(result.accounts[0]).toMatchObject({
        chargedNano: 370n,
        reaped: { count: 2, chargedNano: 120n, released: 1, corrections: 2, correctedNano: 250n },
      });
      expect(formatLedgerAudit({ ...result, projections: null }).join('\n')).toContain('reaped holds 2');
    });

    it('reports a correction of a hold the reaper did not settle', async () => {
      const log = base()
        .add('2026-11-02T10:03:00.000Z', held('h3', 100n))
        .add('2026-11-02T10:04:00.000Z', charged('h3', 90n, '2026-11-02T10:04:00.000Z'))
        .add('2026-11-02T10:05:00.000Z', correction('h3', 10n, 100n));
      expect((await audit(log)).violations).toEqual([
        { invariant: 1, stream: 'account-acc1', revision: 8n, message: 'correction of hold h3, which the hold reaper did not settle' },
      ]);
    });
  });

  it('invariant 2: reports a reservation that took the available balance below zero', async () => {
    const log = new Log()
      .add('2026-11-02T10:00:00.000Z', opened)
      .add('2026-11-02T10:00:00.000Z', credited(100n))
      .add('2026-11-02T10:01:00.000Z', held('h1', 60n))
      .add('2026-11-02T10:02:00.000Z', held('h2', 50n));
    const result = await audit(log);
    expect(result.violations).toEqual([{ invariant: 2, stream: 'account-acc1', revision: 3n, message: 'hold h2 of 50 took the available balance to -10' }]);
    expect(result.accounts[0].availableNano).toBe(-10n);
  });

  it("invariant 3: reports a replay whose lifetime usage is not the sum of the log's charges, per account and per key", async () => {
    // A faulty evolve that loses k2's charges (the hold still closes).
    const lossy: AccountReplay = {
      initialState: accountDecider.initialState,
      evolve: (state, event) =>
        event.type === 'UsageCharged' && event.data.key_id === 'k2'
          ? accountDecider.evolve(state, { type: 'HoldReleased', data: { ...event.data, reason: 'error' } })
          : accountDecider.evolve(state, event),
    };
    expect((await audit(cleanLog(), { replay: lossy })).violations).toEqual([
      { invariant: 3, stream: 'account-acc1', revision: null, message: 'the charges in the log sum to 435 but the replayed lifetime usage is 375' },
      { invariant: 3, stream: 'account-acc1', revision: null, message: 'key k2: its charges in the log sum to 60 but its replayed lifetime usage is 0' },
    ]);
  });

  it('invariant 4: reports a replay that does not give the same state twice', async () => {
    // Reads something besides (state, event), as a wall clock would.
    let calls = 0;
    const impure: AccountReplay = {
      initialState: accountDecider.initialState,
      evolve: (state, event) => ({ ...accountDecider.evolve(state, event), dailyLimitReachedOn: ++calls }),
    };
    expect((await audit(cleanLog(), { replay: impure })).violations).toEqual([
      { invariant: 4, stream: 'account-acc1', revision: 14n, message: 'replaying the same events twice gave different states' },
    ]);
  });

  it('reports an event without metadata.at, and leaves it out of an audit at an instant', async () => {
    const log = new Log().add('2026-11-02T10:00:00.000Z', opened).add('2026-11-02T10:00:00.000Z', credited(100n));
    log.events.push({ ...log.last, id: 'late', revision: 2n, position: encodePosition(3n, 0n), metadata: {} });
    const violation = { invariant: 0, stream: 'account-acc1', revision: 2n, message: 'has no metadata.at: when it was decided is unknown' };
    expect(await audit(log)).toMatchObject({ violations: [violation], accounts: [{ creditsNano: 200n }] });
    expect(await audit(log, { at: NOW })).toMatchObject({ violations: [violation], accounts: [{ creditsNano: 100n }] });
  });

  describe('comparison with the projections', () => {
    /** The credits projection's rows for the clean log, as they should be. */
    const creditRows = (): CreditRows => ({
      accounts: [{ accountId: A, purchasedNano: 1000n, usedNano: 435n, adjustedNano: 0n, heldNano: 100n, openHolds: 1 }],
      holds: [{ holdId: 'h5', accountId: A, amountNano: 100n }],
    });
    const usageRows = (): KeyUsageRow[] => [
      { keyId: 'k1', day: '2026-10-31', costNano: 70n },
      { keyId: 'k1', day: '2026-11-01', costNano: 300n },
      { keyId: 'k1', day: '2026-11-03', costNano: 5n },
      { keyId: 'k2', day: '2026-11-02', costNano: 60n },
    ];
    let figures: ProjectedFigures;

    beforeAll(async () => {
      const log = cleanLog();
      figures = (await audit(log, { captureAt: [log.last.position] })).captured.get(log.last.position)!;
    });

    it('finds nothing when the rows are what the log says', () => {
      expect(compareCredits(figures, creditRows())).toEqual([]);
      expect(compareKeyUsage(figures, usageRows())).toEqual([]);
    });

    it('reports a corrupt credit_accounts column, a missing and an extra row', () => {
      const rows = creditRows();
      rows.accounts[0].usedNano += 1n;
      rows.accounts.push({ accountId: 'ghost', purchasedNano: 1n, usedNano: 0n, adjustedNano: 0n, heldNano: 0n, openHolds: 0 });
      expect(compareCredits(figures, rows).map((m) => m.message)).toEqual([
        'credit_accounts row for acc1: used_nano 436 but the log says 435',
        'credit_accounts has a row for ghost, an account the log does not open',
      ]);
      expect(compareCredits(figures, { ...rows, accounts: [] }).map((m) => m.message)).toEqual([
        'credit_accounts has no row for acc1; the log has it with 1000 purchased, 435 used',
      ]);
    });

    it('reports credit_holds rows for holds the log has closed, and open holds missing', () => {
      const rows = creditRows();
      rows.holds = [{ holdId: 'h3', accountId: A, amountNano: 100n }];
      expect(compareCredits(figures, rows)).toEqual([
        { table: 'credit_holds', row: 'h3', message: 'credit_holds has hold h3 of acc1 open; the log has no such open hold' },
        { table: 'credit_holds', row: 'h5', message: 'credit_holds lacks open hold h5 of acc1 (100)' },
      ]);
    });

    it("invariant 3 on the projection: reports a key_usage_daily day that differs from the log's charges, a missing and an extra row", () => {
      const rows = usageRows();
      rows[1].costNano = 299n;
      rows.splice(2, 1);
      rows.push({ keyId: 'k9', day: '2026-11-02', costNano: 1n });
      expect(compareKeyUsage(figures, rows).map((m) => m.message)).toEqual([
        'key_usage_daily for key k1 on 2026-11-01: cost_nano 299 but the log says 300',
        'key_usage_daily has no row for key k1 on 2026-11-03; the log charges 5',
        'key_usage_daily for key k9 on 2026-11-02: cost_nano 1 but the log says 0',
      ]);
      // Auditing one account compares only its keys.
      expect(compareKeyUsage(figures, rows, new Set(['k2']))).toEqual([]);
    });

    it('captures the figures as they stood at a log position (a projection checkpoint)', async () => {
      const log = cleanLog();
      const checkpoint = log.events[10].position; // h4 placed, not yet charged
      const { captured } = await audit(log, { captureAt: [checkpoint, log.last.position] });
      const then = captured.get(checkpoint)!;
      expect(then.accounts.get(A)).toEqual({ purchasedNano: 1000n, usedNano: 370n, adjustedNano: 0n, heldNano: 50n, openHolds: 1 });
      expect([...then.holds.keys()]).toEqual(['h4']);
      expect(then.keyUsage.get('k2')).toBeUndefined();
      expect(captured.get(log.last.position)!.accounts.get(A)).toMatchObject({ usedNano: 435n });
    });
  });

  it('prints a readable report and JSON with amounts as decimal strings', async () => {
    const result = await audit(cleanLog());
    const report = {
      ...result,
      projections: {
        checkpoints: { credits: '', keyUsage: '', budgets: '' },
        mismatches: [{ table: 'credit_accounts' as const, row: A, message: 'credit_accounts row for acc1: used_nano 436 but the log says 435' }],
      },
    };
    const text = formatLedgerAudit(report).join('\n');
    expect(text).toContain('account acc1 (revision 14)');
    expect(text).toContain('credits $0.000001  charged $0.000000435  open holds 1 ($0.0000001)  available $0.000000465');
    expect(text).toContain('over-hold charges 1 ($0.00000001 above their holds)');
    expect(text).toContain('Invariants 1-5: no violations');
    expect(text).toContain('MISMATCH credit_accounts row for acc1: used_nano 436 but the log says 435');
    const json = JSON.parse(ledgerAuditJson(report));
    expect(json.accounts[0]).toMatchObject({ creditsNano: '1000', revision: '14', keys: [{ keyId: 'k1', spend: { lifetime: '375' } }, { keyId: 'k2' }] });
    expect(json.captured).toBeUndefined();
  });

  // Issue 23: corrections are in the auditor's own sums, so an audit after them stays clean.
  describe('credit notes and adjustments', () => {
    const adjusted = (adjustment_id: string, amount: bigint, kind: 'credit_note' | 'adjustment' = 'adjustment'): AccountEvent => ({
      type: 'BalanceAdjusted',
      data: { account_id: A, adjustment_id, amount_nano: amount.toString(), kind, reason: 'r', operator: 'ana' },
    });

    it('counts them in the available balance, finds no violation, and compares adjusted_nano with the projection', async () => {
      const log = cleanLog()
        .add('2026-11-03T10:00:00.000Z', adjusted('adj1', 40n, 'credit_note'))
        .add('2026-11-03T10:01:00.000Z', adjusted('adj2', -5n));
      const result = await audit(log, { captureAt: [log.last.position] });
      expect(result.violations).toEqual([]);
      expect(result.accounts[0]).toMatchObject({ creditsNano: 1000n, chargedNano: 435n, adjustedNano: 35n, availableNano: 500n });
      expect(formatLedgerAudit({ ...result, projections: null }).join('\n')).toContain('  adjustments $0.000000035');
      const figures = result.captured.get(log.last.position)!;
      const rows: CreditRows = {
        accounts: [{ accountId: A, purchasedNano: 1000n, usedNano: 435n, adjustedNano: 35n, heldNano: 100n, openHolds: 1 }],
        holds: [{ holdId: 'h5', accountId: A, amountNano: 100n }],
      };
      expect(compareCredits(figures, rows)).toEqual([]);
      rows.accounts[0].adjustedNano = 40n;
      expect(compareCredits(figures, rows).map((m) => m.message)).toEqual(['credit_accounts row for acc1: adjusted_nano 40 but the log says 35']);
    });

    it('reports an adjustment that took the available balance below zero (invariant 2), and a negative credit note', async () => {
      const log = cleanLog()
        .add('2026-11-03T10:00:00.000Z', adjusted('adj1', -466n))
        .add('2026-11-03T10:01:00.000Z', adjusted('adj2', -1n, 'credit_note'));
      const { violations } = await audit(log);
      expect(violations.map((v) => [v.invariant, v.revision, v.message])).toEqual([
        [2, 15n, 'adjustment adj1 of -466 took the available balance to -1'],
        [2, 16n, 'adjustment adj2 of -1 took the available balance to -2'],
        [2, 16n, 'adjustment adj2 is a credit_note of -1'],
      ]);
    });

    it('catches a replay that drops adjustments', async () => {
      const replay: AccountReplay = {
        initialState: accountDecider.initialState,
        evolve: (state, event) => (event.type === 'BalanceAdjusted' ? state : accountDecider.evolve(state, event)),
      };
      const { violations } = await audit(cleanLog().add('2026-11-03T10:00:00.000Z', adjusted('adj1', 7n)), { replay });
      expect(violations.map((v) => v.message)).toEqual(['the adjustments in the log sum to 7 but the replayed state holds 0']);
    });
  });
});
