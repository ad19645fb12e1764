import { encodePosition, type RecordedEvent } from '@svc/eventstore';
import { accountStream, budgetBucket, type AccountEvent, type BudgetData } from './account';
import { auditLedger, compareBudgets } from './auditor';
import { A, charged, credited, opened, released } from './testing/account-fixtures';

/** Issue 44 item 5: the ledger audit checks guardrail budgets on the log and against their projection. */
const budget = (limit: bigint, reset: BudgetData['reset'] = 'daily', subject = 'org1'): BudgetData => ({
  bucket: budgetBucket('g1', 'organization', subject),
  guardrail_id: 'g1',
  scope: 'organization',
  subject,
  limit_nano: limit.toString(),
  reset,
});
const heldUnder = (holdId: string, nano: bigint, budgets: BudgetData[]): AccountEvent => ({
  type: 'HoldPlaced',
  data: {
    account_id: A,
    hold_id: holdId,
    key_id: 'k1',
    amount_nano: nano.toString(),
    model: 'sim/echo',
    endpoint: '/v1/chat/completions',
    expires_at: '2026-11-05T00:00:00.000Z',
    key_limit: null,
    budgets,
  },
});

function log(entries: [string, AccountEvent][]): RecordedEvent[] {
  return entries.map(([at, event], i) => ({
    id: `e${i}`,
    type: event.type,
    data: event.data,
    metadata: { at },
    stream: accountStream(A),
    revision: BigInt(i),
    position: encodePosition(BigInt(i + 1), 0n),
  }));
}

const MON = '2026-11-02T10:00:00.000Z';
const TUE = '2026-11-03T10:00:00.000Z';

describe('ledger audit of guardrail budgets (issue 44)', () => {
  const b = budget(1000n);
  const clean = log([
    [MON, opened],
    [MON, credited(100_000n)],
    [MON, heldUnder('h1', 600n, [b])],
    [MON, charged('h1', 500n, MON)],
    [MON, heldUnder('h2', 500n, [b])],
    [MON, released('h2')],
    // A new day: the daily window starts again.
    [TUE, heldUnder('h3', 900n, [b])],
    [TUE, charged('h3', 900n, TUE)],
    [TUE, heldUnder('h4', 100n, [b])],
  ]);

  it('a log whose holds keep every budget within its limit has no violation, and says what the projection should hold', async () => {
    const audit = await auditLedger(clean, { now: new Date(TUE), captureAt: [clean.at(-1)!.position] });
    expect(audit.violations).toEqual([]);
    const figures = audit.captured.get(clean.at(-1)!.position)!;
    expect(figures.budgetUsage).toEqual(
      new Map([
        [
          b.bucket,
          new Map([
            ['2026-11-02', 500n],
            ['2026-11-03', 900n],
          ]),
        ],
      ]),
    );
    expect(figures.budgetHeld).toEqual(new Map([[b.bucket, 100n]]));
  });

  it('invariant 5: names a hold that took a budget past its limit in its window', async () => {
    const over = log([
      [MON, opened],
      [MON, credited(100_000n)],
      [MON, heldUnder('h1', 600n, [b])],
      [MON, charged('h1', 500n, MON)],
      [MON, heldUnder('h2', 501n, [b])],
    ]);
    expect((await auditLedger(over)).violations).toEqual([
      { invariant: 5, stream: accountStream(A), revision: 4n, message: `hold h2 took budget ${b.bucket} to 1001 in its daily window, past its limit of 1000` },
    ]);
    // A lifetime budget counts yesterday's charge too.
    const lifetime = budget(1000n, 'never');
    const later = log([
      [MON, opened],
      [MON, credited(100_000n)],
      [MON, heldUnder('h1', 600n, [lifetime])],
      [MON, charged('h1', 600n, MON)],
      [TUE, heldUnder('h2', 401n, [lifetime])],
    ]);
    expect((await auditLedger(later)).violations.map((v) => v.invariant)).toEqual([5]);
  });

  it('compares the projection row by row: a charge on the wrong day, or an open hold it lost, is a mismatch', async () => {
    const audit = await auditLedger(clean, { now: new Date(TUE), captureAt: [clean.at(-1)!.position] });
    const figures = audit.captured.get(clean.at(-1)!.position)!;
    const rows = {
      usage: [
        { bucket: b.bucket, day: '2026-11-02', costNano: 500n },
        { bucket: b.bucket, day: '2026-11-03', costNano: 900n },
      ],
      held: [{ bucket: b.bucket, heldNano: 100n }],
    };
    expect(compareBudgets(figures, rows)).toEqual([]);
    const wrong = { usage: [{ bucket: b.bucket, day: '2026-11-02', costNano: 1400n }], held: [] };
    expect(compareBudgets(figures, wrong).map((m) => m.message)).toEqual([
      `guardrail_budget_charges for ${b.bucket} 2026-11-02: 1400 but the log says 500`,
      `guardrail_budget_charges for ${b.bucket} 2026-11-03: 0 but the log says 900`,
      `open holds of budget ${b.bucket}: 0 but the log says 100`,
    ]);
  });
});
