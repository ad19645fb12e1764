import { DomainError, encodePosition, type RecordedEvent } from '@svc/eventstore';
import { accountStream, upcastAccountEvent, type AccountEvent } from './account';
import { auditLedger } from './auditor';
import { buildStatement, parseStatementPeriod, statementCsv, statementJson, statementSeenFrom, type StatementPeriod } from './statement';
import { A, charged, credited, expired, held, opened, released, stats } from './testing/account-fixtures';

/** A hand-built stream: each event with its revision, a global position and metadata.at. */
/** The account's events as the store hands them out: through the ledger's upcaster. */
class Log {
  readonly events: RecordedEvent[] = [];

  add(at: string, event: AccountEvent): this {
    const n = this.events.length;
    this.events.push(
      upcastAccountEvent({
        id: `e${n}`,
        type: event.type,
        data: event.data,
        metadata: { at },
        stream: accountStream(A),
        revision: BigInt(n),
        position: encodePosition(BigInt(n + 1), 0n),
      }),
    );
    return this;
  }

  get last(): RecordedEvent {
    return this.events[this.events.length - 1];
  }
}

const adjusted = (adjustment_id: string, amount: bigint, kind: 'credit_note' | 'adjustment' = 'adjustment', reason = 'duplicate charge'): AccountEvent => ({
  type: 'BalanceAdjusted',
  data: { account_id: A, adjustment_id, amount_nano: amount.toString(), kind, reason, operator: 'ana' },
});
const period = (from: string, to: string): StatementPeriod => ({ from: new Date(from), to: new Date(to) });
const sim = (completion_tokens: number, model = 'sim/echo') => ({ stats: stats({ completion_tokens, model }) });

/**
 * Saturday 31 October to Wednesday 4 November 2026: the month turns on Sunday the 1st, the week
 * on Monday the 2nd. Two keys, two models, every way a hold ends, a credit note and an
 * adjustment; a hold placed before the period and released in it.
 */
const history = () =>
  new Log()
    .add('2026-10-30T09:00:00.000Z', opened)
    .add('2026-10-30T09:00:00.000Z', credited(10_000n))
    .add('2026-10-30T10:00:00.000Z', held('h0', 500n))
    .add('2026-10-30T10:01:00.000Z', charged('h0', 300n, '2026-10-30T10:01:00.000Z')) // before the period
    .add('2026-10-31T23:59:00.000Z', held('h1', 900n, { key: 'k2' })) // placed before, released inside
    .add('2026-11-01T00:00:00.000Z', released('h1', 'k2'))
    .add('2026-11-01T12:00:00.000Z', held('h2', 400n))
    .add('2026-11-01T12:01:00.000Z', charged('h2', 200n, '2026-11-01T12:01:00.000Z', sim(5)))
    .add('2026-11-01T13:00:00.000Z', held('h3', 400n))
    .add('2026-11-01T13:01:00.000Z', charged('h3', 150n, '2026-11-01T13:01:00.000Z', sim(7)))
    .add('2026-11-02T08:00:00.000Z', held('h4', 300n, { key: 'k2' }))
    .add('2026-11-02T08:01:00.000Z', charged('h4', 120n, '2026-11-02T08:01:00.000Z', { key: 'k2', ...sim(3, 'sim/small-8k') }))
    .add('2026-11-02T09:00:00.000Z', held('h5', 100n, { expires: '2026-11-02T09:15:00.000Z' }))
    .add('2026-11-02T09:20:00.000Z', expired('h5', 100n, '2026-11-02T09:15:00.000Z'))
    .add('2026-11-02T10:00:00.000Z', adjusted('adj1', 200n, 'credit_note', 'refund: duplicate charge'))
    .add('2026-11-03T10:00:00.000Z', credited(1_000n))
    .add('2026-11-03T11:00:00.000Z', adjusted('adj2', -50n, 'adjustment', 'late fee, "manual"'))
    .add('2026-11-03T12:00:00.000Z', held('h6', 300n))
    .add('2026-11-03T12:01:00.000Z', charged('h6', 80n, '2026-11-03T12:01:00.000Z', sim(2)));

const PERIOD = period('2026-10-31T00:00:00.000Z', '2026-11-04T00:00:00.000Z');

describe('account statement (issue 23)', () => {
  it('states the opening balance, every credit, charge (per day, model and key), release, expiry and adjustment, and the closing balance', () => {
    const s = statementJson(buildStatement(A, history().events, PERIOD));
    expect(s).toEqual({
      account_id: A,
      from: '2026-10-31T00:00:00.000Z',
      to: '2026-11-04T00:00:00.000Z',
      built_at_position: encodePosition(19n, 0n),
      currency: 'USD',
      opening_balance: 0.0000097,
      closing_balance: 0.0000103,
      credits: [{ at: '2026-11-03T10:00:00.000Z', amount: 0.000001, reason: 'signup' }],
      charges: [
        { date: '2026-11-01', model: 'sim/echo', key_id: 'k1', requests: 2, amount: 0.00000035, meters: { input: 20, output: 12 } },
        { date: '2026-11-02', model: 'sim/small-8k', key_id: 'k2', requests: 1, amount: 0.00000012, meters: { input: 10, output: 3 } },
        { date: '2026-11-03', model: 'sim/echo', key_id: 'k1', requests: 1, amount: 0.00000008, meters: { input: 10, output: 2 } },
      ],
      totals: { credits: 0.000001, charges: 0.00000055, adjustments: 0.00000015, by_meter: { input: 40, output: 17 } },
      releases: [{ at: '2026-11-01T00:00:00.000Z', hold_id: 'h1', key_id: 'k2', held_amount: 0.0000009, reason: 'error' }],
      expiries: [{ at: '2026-11-02T09:20:00.000Z', hold_id: 'h5', key_id: 'k1', held_amount: 0.0000001 }],
      adjustments: [
        { at: '2026-11-02T10:00:00.000Z', adjustment_id: 'adj1', kind: 'credit_note', amount: 0.0000002, reason: 'refund: duplicate charge', operator: 'ana' },
        { at: '2026-11-03T11:00:00.000Z', adjustment_id: 'adj2', kind: 'adjustment', amount: -0.00000005, reason: 'late fee, "manual"', operator: 'ana' },
      ],
    });
  });

  it('its lines sum exactly to the movement, and its closing balance is the replayed balance at `to`', async () => {
    const log = history();
    for (const [from, to] of [
      ['2026-10-30T00:00:00.000Z', '2026-11-01T12:01:00.000Z'],
      ['2026-11-01T12:01:00.000Z', '2026-11-03T11:00:00.001Z'],
      ['2026-11-02T00:00:00.000Z', '2026-11-05T00:00:00.000Z'],
    ]) {
      const s = buildStatement(A, log.events, period(from, to));
      expect(s.closingNano - s.openingNano).toBe(s.totals.creditsNano - s.totals.chargesNano + s.totals.adjustmentsNano);
      let lines = 0n;
      for (const c of s.credits) lines += c.amountNano;
      for (const c of s.charges) lines -= c.amountNano;
      for (const a of s.adjustments) lines += a.amountNano;
      expect(lines).toBe(s.closingNano - s.openingNano);
      // The auditor, replaying the stream through the decider's evolve, agrees at the instant before `to`.
      const audit = await auditLedger(log.events, { at: new Date(Date.parse(to) - 1) });
      const a = audit.accounts[0];
      expect(s.closingNano).toBe(a.creditsNano - a.chargedNano + a.adjustedNano);
    }
  });

  it('is byte-identical when built again after later events: it names the last event it includes, not the log head', () => {
    const log = history();
    const first = JSON.stringify(statementJson(buildStatement(A, log.events, PERIOD)));
    const firstCsv = statementCsv(buildStatement(A, log.events, PERIOD));
    log
      .add('2026-11-04T00:00:00.000Z', credited(5n)) // exactly at `to`: the next period's
      .add('2026-11-05T08:00:00.000Z', held('h7', 100n))
      .add('2026-11-05T08:01:00.000Z', charged('h7', 60n, '2026-11-05T08:01:00.000Z'))
      .add('2026-11-05T09:00:00.000Z', adjusted('adj3', -10n));
    expect(JSON.stringify(statementJson(buildStatement(A, log.events, PERIOD)))).toBe(first);
    expect(statementCsv(buildStatement(A, log.events, PERIOD))).toBe(firstCsv);
    expect(buildStatement(A, log.events, period('2026-11-04T00:00:00.000Z', '2026-11-06T00:00:00.000Z')).builtAtPosition).toBe(log.last.position);
  });

  it('counts a charge at its charged_at, and an event decided at `from` in the period, at `to` in the next', () => {
    const log = new Log()
      .add('2026-11-02T00:00:00.000Z', opened)
      .add('2026-11-02T00:00:00.000Z', credited(1000n))
      .add('2026-11-02T23:59:00.000Z', held('h1', 100n))
      // Recorded a moment later than it was decided (metadata.at past midnight): it counts on the 2nd.
      .add('2026-11-03T00:00:00.500Z', charged('h1', 40n, '2026-11-02T23:59:59.900Z'));
    const s = buildStatement(A, log.events, period('2026-11-02T00:00:00.000Z', '2026-11-03T00:00:00.000Z'));
    expect(s.charges.map((c) => [c.date, c.amountNano])).toEqual([['2026-11-02', 40n]]);
    expect(s).toMatchObject({ openingNano: 0n, closingNano: 960n });
    expect(buildStatement(A, log.events, period('2026-11-02T23:59:59.900Z', '2026-11-03T00:00:00.000Z')).charges).toHaveLength(1);
    expect(buildStatement(A, log.events, period('2026-11-01T00:00:00.000Z', '2026-11-02T23:59:59.900Z')).charges).toHaveLength(0);
  });

  it("agrees with the spend windows across a weekly and a monthly reset: a key's charges from the window start to `to` are its window spend", async () => {
    const log = history();
    const to = new Date('2026-11-04T00:00:00.000Z');
    const audit = await auditLedger(log.events, { at: new Date(to.getTime() - 1) });
    const keys = new Map(audit.accounts[0].keys.map((k) => [k.keyId, k.spend]));
    const keyCharges = (from: string, keyId: string) =>
      buildStatement(A, log.events, { from: new Date(from), to })
        .charges.filter((c) => c.keyId === keyId)
        .reduce((sum, c) => sum + c.amountNano, 0n);
    for (const keyId of ['k1', 'k2']) {
      expect(keyCharges('2026-11-01T00:00:00.000Z', keyId)).toBe(keys.get(keyId)!.monthly); // month from Sunday the 1st
      expect(keyCharges('2026-11-02T00:00:00.000Z', keyId)).toBe(keys.get(keyId)!.weekly); // week from Monday the 2nd
      expect(keyCharges('2026-11-03T00:00:00.000Z', keyId)).toBe(keys.get(keyId)!.daily);
    }
    // The statement spanning both resets holds more than either window: October's charge is before them.
    expect(keyCharges('2026-10-31T00:00:00.000Z', 'k1')).toBe(430n);
    expect(keys.get('k1')).toMatchObject({ monthly: 430n, weekly: 80n, daily: 80n });
  });

  it('writes CSV: one row per line with its section, amounts with 9 decimals, text quoted where it must be', () => {
    const csv = statementCsv(buildStatement(A, history().events, PERIOD)).split('\n');
    expect(csv[0]).toBe('section,at,date,key_id,model,requests,hold_id,adjustment_id,kind,amount,held_amount,meters,reason,operator');
    expect(csv.slice(1)).toEqual([
      'opening_balance,2026-10-31T00:00:00.000Z,,,,,,,,0.000009700,,,account acc1,',
      'credit,2026-11-03T10:00:00.000Z,,,,,,,,0.000001000,,,signup,',
      'charge,,2026-11-01,k1,sim/echo,2,,,,0.000000350,,input=20;output=12,,',
      'charge,,2026-11-02,k2,sim/small-8k,1,,,,0.000000120,,input=10;output=3,,',
      'charge,,2026-11-03,k1,sim/echo,1,,,,0.000000080,,input=10;output=2,,',
      'adjustment,2026-11-02T10:00:00.000Z,,,,,,adj1,credit_note,0.000000200,,,refund: duplicate charge,ana',
      'adjustment,2026-11-03T11:00:00.000Z,,,,,,adj2,adjustment,-0.000000050,,,"late fee, ""manual""",ana',
      'release,2026-11-01T00:00:00.000Z,,k2,,,h1,,,,0.000000900,,error,',
      'expiry,2026-11-02T09:20:00.000Z,,k1,,,h5,,,,0.000000100,,,',
      `closing_balance,2026-11-04T00:00:00.000Z,,,,,,,,0.000010300,,,built_at_position ${encodePosition(19n, 0n)},`,
      '',
    ]);
  });

  describe('the period asked for', () => {
    const NOW = new Date('2026-11-20T12:00:00.000Z');
    const refusal = (from: unknown, to: unknown) => {
      try {
        parseStatementPeriod({ from, to }, NOW);
      } catch (err) {
        expect(err).toBeInstanceOf(DomainError);
        return { code: (err as DomainError).code, param: (err as DomainError).details.param };
      }
      throw new Error('accepted');
    };

    it('takes ISO 8601 dates (00:00 UTC) and date-times (UTC when no offset)', () => {
      expect(parseStatementPeriod({ from: '2026-11-01', to: '2026-11-02T12:30' }, NOW)).toEqual(period('2026-11-01T00:00:00.000Z', '2026-11-02T12:30:00.000Z'));
      expect(parseStatementPeriod({ from: '2026-11-01T02:00:00+02:00', to: '2026-11-02T00:00:00.250Z' }, NOW)).toEqual(
        period('2026-11-01T00:00:00.000Z', '2026-11-02T00:00:00.250Z'),
      );
      // A period that ended this very instant is stated; 366 days (a leap year) is the longest.
      expect(parseStatementPeriod({ from: '2025-11-19T12:00:00Z', to: '2026-11-20T12:00:00Z' }, NOW).to).toEqual(NOW);
    });

    it('refuses with 400 naming the parameter: malformed, missing, from not before to, to in the future, longer than 366 days', () => {
      expect(refusal('2026-11-31', '2026-12-01')).toEqual({ code: 'invalid_date', param: 'from' });
      expect(refusal('2026-11-01', 'yesterday')).toEqual({ code: 'invalid_date', param: 'to' });
      expect(refusal('2026-11-01T25:00:00Z', '2026-11-02')).toEqual({ code: 'invalid_date', param: 'from' });
      expect(refusal('2026-11-01', '2026-11-02T10:00:00+24:00')).toEqual({ code: 'invalid_date', param: 'to' });
      expect(refusal('1762000000', '2026-11-02')).toEqual({ code: 'invalid_date', param: 'from' });
      expect(refusal(['2026-11-01', '2026-11-02'], '2026-11-03')).toEqual({ code: 'invalid_date', param: 'from' });
      expect(refusal(undefined, '2026-11-03')).toEqual({ code: 'missing_parameter', param: 'from' });
      expect(refusal('2026-11-01', '')).toEqual({ code: 'missing_parameter', param: 'to' });
      expect(refusal('2026-11-05', '2026-11-04')).toEqual({ code: 'invalid_period', param: 'from' });
      expect(refusal('2026-11-05', '2026-11-05')).toEqual({ code: 'invalid_period', param: 'from' });
      expect(refusal('2026-11-01', '2026-11-20T12:00:00.001Z')).toEqual({ code: 'period_not_ended', param: 'to' });
      expect(refusal('2025-11-19T11:59:59.999Z', '2026-11-20T12:00:00Z')).toEqual({ code: 'period_too_long', param: 'to' });
    });
  });
});

describe("a statement seen from an organization's workspace (issue 41 item 13)", () => {
  const whole = buildStatement(A, history().events, PERIOD);
  const seen = statementJson(statementSeenFrom(whole, new Set(['k2'])));

  it("given a workspace with key k2, when stated, then only k2's charges, releases and expiries are listed, with their meters", () => {
    expect(seen.charges.map((c) => c.key_id)).toEqual(['k2']);
    expect(seen.releases.map((r) => r.key_id)).toEqual(['k2']);
    expect(seen.expiries).toEqual([]);
    expect(seen.totals.charges).toBe(seen.charges[0].amount);
    expect(seen.totals.by_meter).toEqual(seen.charges[0].meters);
  });

  it("then the other keys' charges are one sum, and the balances still add up", () => {
    const all = statementJson(whole);
    expect(seen.opening_balance).toBe(all.opening_balance);
    expect(seen.closing_balance).toBe(all.closing_balance);
    const nano = (usd: number) => Math.round(usd * 1e9);
    expect(nano(seen.totals.charges) + nano(seen.totals.other_keys_charges!)).toBe(nano(all.totals.charges));
  });

  it("then the adjustments keep their amount and kind, not the operator's reason nor name", () => {
    expect(seen.adjustments.map((a) => [a.adjustment_id, a.kind, a.amount, a.reason, a.operator])).toEqual([
      ['adj1', 'credit_note', 0.0000002, null, null],
      ['adj2', 'adjustment', -0.00000005, null, null],
    ]);
  });
});
