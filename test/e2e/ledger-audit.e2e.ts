import { AggregateStore, SqlEventStore } from '@svc/eventstore';
import { type AccountCommand, accountDecider, accountStream, LedgerAuditFailedError, getCredits } from '@svc/ledger';
import { stats } from '@svc/ledger/testing/account-fixtures';
import { ManualClock, PgSqlRunner } from '@svc/platform';
import { ProjectionRunner } from '@svc/projections';
import { ALL_PROJECTIONS } from '@svc/runtime';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { cliHarness } from '../support/cli';
import { ROOT } from '../support/server-process';

const USD = 1_000_000_000n;

/** `cli ledger audit` against PostgreSQL, in a schema of its own, on a history written by the real decider. */
describe('operator CLI: ledger audit', () => {
  const harness = cliHarness('ledger_audit');
  let sql: PgSqlRunner;
  let store: SqlEventStore;
  let aggregates: AggregateStore;

  const cli = (...args: string[]) => harness.run('ledger', 'audit', ...args);
  /** The output of a run that fails, and the error it fails with (runMain turns it into exit status 1). */
  const failing = async (...args: string[]) => {
    const error = await cli(...args).then(
      () => null,
      (err: Error) => err,
    );
    expect(error).toBeInstanceOf(Error);
    return { out: harness.output.join('\n'), error: error! };
  };

  beforeAll(async () => {
    sql = await PgSqlRunner.connect({ connectionString: harness.url, max: 2 });
    store = new SqlEventStore(sql);
    await store.init();
    const clock = new ManualClock(new Date('2026-11-02T10:00:00.000Z')); // a Monday
    aggregates = new AggregateStore(store, clock);
    const run = (account: string, at: string, ...commands: AccountCommand[]) => {
      clock.set(at);
      return commands.reduce<Promise<unknown>>(
        (done, command) => done.then(() => aggregates.handle(accountDecider, accountStream(account), command)),
        Promise.resolve(),
      );
    };
    const hold = (holdId: string, keyId: string, amountNano: bigint, ttlMs = 15 * 60_000): AccountCommand => ({
      type: 'PlaceHold',
      holdId,
      keyId,
      amountNano,
      model: 'sim/echo',
      endpoint: '/v1/chat/completions',
      ttlMs,
    });
    const charge = (holdId: string, amountNano: bigint, completion_tokens = 5): AccountCommand => ({
      type: 'ChargeUsage',
      holdId,
      amountNano,
      stats: stats({ completion_tokens }),
    });

    // acme, two keys: every way a hold ends, an over-hold charge, one hold left open, a top-up.
    await run(
      'acme',
      '2026-11-02T10:00:00.000Z',
      { type: 'OpenAccount', accountId: 'acme' },
      { type: 'AddCredits', amountNano: 10n * USD, reason: 'purchase' },
    );
    await run('acme', '2026-11-02T10:01:00.000Z', hold('h1', 'k1', USD), charge('h1', (3n * USD) / 10n));
    await run('acme', '2026-11-02T10:03:00.000Z', hold('h2', 'k2', USD / 2n), { type: 'ReleaseHold', holdId: 'h2', errorCode: 'upstream_503' });
    await run('acme', '2026-11-02T10:04:00.000Z', hold('h3', 'k1', USD / 5n, 60_000));
    await run('acme', '2026-11-02T10:05:00.000Z', hold('h4', 'k2', (4n * USD) / 10n), charge('h4', 0n, 0)); // zero completion: released
    await run('acme', '2026-11-02T10:10:00.000Z', { type: 'ExpireHolds' }); // h3
    await run('acme', '2026-11-03T09:00:00.000Z', hold('h5', 'k2', (4n * USD) / 10n));
    await run('acme', '2026-11-03T09:01:00.000Z', charge('h5', (45n * USD) / 100n)); // 0.05 above its hold
    await run('acme', '2026-11-03T09:02:00.000Z', hold('h6', 'k1', USD / 10n), { type: 'AddCredits', amountNano: 5n * USD, reason: 'purchase' });
    // beta, one key; its charge takes the balance under $1, which records BalanceLow.
    await run('beta', '2026-11-02T11:00:00.000Z', { type: 'OpenAccount', accountId: 'beta' }, { type: 'AddCredits', amountNano: USD, reason: 'signup' });
    await run('beta', '2026-11-02T11:01:00.000Z', hold('h7', 'k3', USD / 2n), charge('h7', USD / 4n));

    const projections = new ProjectionRunner(sql, store, ALL_PROJECTIONS);
    await projections.init();
    await projections.catchUpAll();
  }, 30_000);

  afterAll(async () => {
    await store?.close();
    await sql?.close();
  });

  it('replays the log, finds no violation, and agrees with the caught-up projections', async () => {
    const out = await cli();
    expect(out).toMatch(/^Ledger audit at .* \(whole log\): 2 accounts, 19 events replayed$/m);
    expect(out).toContain(
      [
        'account acme (revision 13)',
        '  credits $15  charged $0.75  open holds 1 ($0.1)  available $14.15',
        '  over-hold charges 1 ($0.05 above their holds)',
      ].join('\n'),
    );
    expect(out).toContain('account beta (revision 4)\n  credits $1  charged $0.25  open holds 0 ($0)  available $0.75');
    expect(out).toContain('Invariants 1-5: no violations');
    expect(out).toMatch(/^Projections compared at their checkpoints: credits \d{20}\/\d{20}, key_usage \d{20}\/\d{20}, guardrail_budgets \d{20}\/\d{20}$/m);
    expect(out).toContain('Projections: no mismatches');
  });

  it('audits one account as JSON, with its per-key lifetime usage equal to the key usage projection', async () => {
    const report = JSON.parse(await cli('--account', 'acme', '--json'));
    expect(report.accounts).toHaveLength(1);
    expect(report.accounts[0]).toMatchObject({ accountId: 'acme', chargedNano: '750000000', availableNano: '14150000000', openHolds: 1 });
    expect(report.accounts[0].keys.map((k: { keyId: string; spend: { lifetime: string } }) => [k.keyId, k.spend.lifetime])).toEqual([
      ['k1', '300000000'],
      ['k2', '450000000'],
    ]);
    expect(report.violations).toEqual([]);
    expect(report.projections.mismatches).toEqual([]);
    const { rows } = await sql.query<{ key_id: string; total: string }>(
      `SELECT key_id, SUM(cost_nano)::text AS total FROM key_usage_daily WHERE key_id IN ('k1', 'k2') GROUP BY key_id ORDER BY key_id`,
    );
    expect(rows).toEqual([
      { key_id: 'k1', total: '300000000' },
      { key_id: 'k2', total: '450000000' },
    ]);
  });

  it('--at before the last events reports the earlier balance: a hold placed then and charged since is open', async () => {
    const out = await cli('--account', 'acme', '--at', '2026-11-03T09:00:30Z');
    expect(out).toContain('Ledger audit at 2026-11-03T09:00:30.000Z (history up to that instant): 1 account, 11 events replayed');
    expect(out).toContain('credits $10  charged $0.3  open holds 1 ($0.4)  available $9.3');
    // Tuesday: k2's only charge so far is none; k1's $0.30 was Monday, this week.
    expect(out).toMatch(/^ {2}key k1 {2}daily \$0 {2}weekly \$0\.3 {2}monthly \$0\.3 {2}lifetime \$0\.3 {2}held \$0$/m);
    expect(out).toMatch(/^ {2}key k2 {2}daily \$0 {2}weekly \$0 {2}monthly \$0 {2}lifetime \$0 {2}held \$0\.4$/m);
    expect(out).toContain('Projections: not compared');
  });

  it('refuses an account without events and an --at that is not a time', async () => {
    await expect(cli('--account', 'nobody')).rejects.toThrow('account nobody has no events');
    await expect(cli('--account', 'beta', '--at', '2026-11-02T10:59:00Z')).rejects.toThrow('account beta has no events at or before 2026-11-02T10:59:00.000Z');
    await expect(cli('--at', 'yesterday-ish')).rejects.toThrow('--at is not an ISO 8601 date or date-time');
  });

  it('issue 41 item 16: reads an --at without an offset as UTC in a process whose zone is not UTC, like statements and exports', async () => {
    // The built CLI in a process of its own, since the zone is read once when a process starts.
    const run = (at: string, tz: string) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [join(ROOT, 'dist', 'src', 'cli.js'), 'ledger', 'audit', '--account', 'acme', '--at', at], {
          env: { ...process.env, TZ: tz, DATABASE_URL: harness.url, EVENTSTORE_URL: '' },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        child.on('close', (code) => resolve({ code, stdout, stderr }));
      });
    // Three processes of their own that only read: started together.
    const [kolkata, utc, date] = await Promise.all([
      run('2026-11-03T09:00:30', 'Asia/Kolkata'),
      run('2026-11-03T09:00:30Z', 'America/New_York'),
      run('2026-11-03', 'America/New_York'),
    ]);
    expect(kolkata.stderr).toBe('');
    expect(kolkata.stdout).toContain('Ledger audit at 2026-11-03T09:00:30.000Z (history up to that instant): 1 account, 11 events replayed');
    // The same instant as with the offset written out, whatever the zone.
    expect(kolkata.stdout).toBe(utc.stdout);
    // A date alone is its 00:00 UTC, as a statement's from and to.
    expect(date.stdout).toContain('Ledger audit at 2026-11-03T00:00:00.000Z');
  }, 60_000);

  it('reports exactly the corrupt projection row and fails', async () => {
    await sql.query(`UPDATE credit_accounts SET used_nano = used_nano + 1 WHERE account_id = 'acme'`);
    try {
      const { out, error } = await failing();
      expect(error).toBeInstanceOf(LedgerAuditFailedError);
      expect(error.message).toBe('0 violations, 1 projection mismatch');
      expect(out.split('\n').filter((l) => /^(MISMATCH|VIOLATION)/.test(l))).toEqual([
        'MISMATCH credit_accounts row for acme: used_nano 750000001 but the log says 750000000',
      ]);
      // The report of the log itself is unchanged: the projection is wrong, not the ledger.
      expect(out).toContain('credits $15  charged $0.75  open holds 1 ($0.1)  available $14.15');
    } finally {
      await sql.query(`UPDATE credit_accounts SET used_nano = used_nano - 1 WHERE account_id = 'acme'`);
    }
    await cli();
  });

  it('compares a projection that is behind the log at its own checkpoint: lag is not a mismatch', async () => {
    await aggregates.handle(accountDecider, accountStream('beta'), { type: 'AddCredits', amountNano: USD, reason: 'purchase' });
    expect((await getCredits(sql, 'beta'))?.purchasedNano).toBe(USD); // no runner: the projection is one event behind
    const out = await cli('--account', 'beta');
    expect(out).toContain('credits $2  charged $0.25');
    expect(out).toContain('Projections: no mismatches');
  });
});
