import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqlEventStore } from '@svc/eventstore';
import { checkpointFile, EXPORT_COLUMNS, positionFile } from '@svc/ledger';
import { appendedInstant, appendMoneyLog, moneyLog } from '@svc/ledger/testing/money-log';
import { parseCsv } from '@svc/ledger/testing/csv';
import { PgSqlRunner } from '@svc/platform';
import { asyncBufferFromFile, parquetReadObjects } from 'hyparquet';
import { freshPgSchemaUrl } from '../support/gateway';
import { ROOT } from '../support/server-process';

const CLI = join(ROOT, 'dist', 'src', 'cli.js');

interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * `ledger export` and `ledger reconcile` as an operator runs them: the built CLI in a process of
 * its own, against PostgreSQL in a schema of this suite's.
 */
describe('operator CLI: ledger export and reconcile (built CLI, real processes)', () => {
  let url: string;
  let sql: PgSqlRunner;
  let dir: string;
  const children: ChildProcess[] = [];
  const groups = moneyLog(1500, 7);
  const appended = groups.flat();
  const FROM = '2026-11-01T12:00:00Z';
  const TO = '2026-11-02T12:00';

  const inPeriod = (e: (typeof appended)[number]) => appendedInstant(e) >= Date.parse(FROM) && appendedInstant(e) < Date.parse(`${TO}Z`);
  const moneyInPeriod = appended.filter(
    (e) => ['CreditsAdded', 'UsageCharged', 'BalanceAdjusted'].includes(e.type) && e.stream.startsWith('account-') && inPeriod(e),
  );

  function start(...args: string[]): { child: ChildProcess; done: Promise<Finished> } {
    const child = spawn(process.execPath, [CLI, 'ledger', ...args], {
      cwd: dir,
      env: { ...process.env, DATABASE_URL: url, EVENTSTORE_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const done = new Promise<Finished>((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
    return { child, done };
  }
  const cli = (...args: string[]) => start(...args).done;

  beforeAll(async () => {
    url = await freshPgSchemaUrl('ledger_export_cli');
    sql = await PgSqlRunner.connect({ connectionString: url, max: 2 });
    const store = new SqlEventStore(sql);
    await store.init();
    await appendMoneyLog(store, groups);
    dir = mkdtempSync(join(tmpdir(), 'ledger-export-cli-'));
  }, 60_000);

  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await sql?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses from after to, a malformed date and a bad option with a message naming it, exit status 1, and writes nothing', async () => {
    const cases: [string[], RegExp][] = [
      [
        ['export', '--from', '2026-11-03', '--to', '2026-11-01', '--out', 'bad.csv'],
        /--from \(2026-11-03T00:00:00\.000Z\) must be before --to \(2026-11-01T00:00:00\.000Z\)/,
      ],
      [['export', '--from', '2026-11-01', '--to', '2026-13-45', '--out', 'bad.csv'], /--to is not an ISO 8601 date or date-time .*"2026-13-45"/],
      [['export', '--from', 'last tuesday', '--format', 'jsonl'], /--from is not an ISO 8601 date/],
      [['export', '--format', 'xlsx', '--out', 'bad.csv'], /--format must be one of csv, jsonl, parquet/],
      [['export', '--after', 'yesterday', '--out', 'bad.csv'], /--after is not a log position/],
      [['export', '--format', 'parquet'], /--format parquet needs --out/],
      [['reconcile', '--from', '2026-11-02', '--to', '2026-11-02'], /--from .* must be before --to/],
      [['reconcile', '--to', '2026-02-30'], /--to is not an ISO 8601 date/],
    ];
    // Independent processes: run at once, as each start-up is most of a case's time.
    const results = await Promise.all(cases.map(([args]) => cli(...args)));
    for (const [i, [args, message]] of cases.entries()) {
      const result = results[i];
      expect({ args, code: result.code }).toEqual({ args, code: 1 });
      expect(result.stderr).toMatch(message);
      // One line, no stack trace: the operator's input is wrong, not the program.
      expect(result.stderr).not.toMatch(/\n\s+at /);
      expect(result.stdout).toBe('');
    }
    expect(readdirSync(dir)).toEqual([]);
  }, 60_000);

  it('streams CSV to stdout, one row per money event of [from, to), with the progress bar on stderr only', async () => {
    const { code, stdout, stderr } = await cli('export', '--from', FROM, '--to', TO, '--chunk', '250');
    expect(code).toBe(0);
    const [header, ...rows] = parseCsv(stdout);
    expect(header).toEqual([...EXPORT_COLUMNS]);
    expect(rows).toHaveLength(moneyInPeriod.length);
    expect(stderr).toMatch(/export \[.*\] \d+\/\d+ events \| \d+ rows \| flushed at /);
    expect(stderr).toContain(`exported ${moneyInPeriod.length} rows from ${appended.length} events read to stdout (csv); last position `);
    // Every charge of the period is there once, by generation id.
    const generations = rows.map((r) => r[EXPORT_COLUMNS.indexOf('generation_id')]).filter(Boolean);
    expect(new Set(generations)).toEqual(new Set(moneyInPeriod.filter((e) => e.type === 'UsageCharged').map((e) => e.data.hold_id)));
  }, 60_000);

  /**
   * Kills the export with SIGKILL mid-way: once it has flushed some rows, the test takes an
   * exclusive lock on the events table so that the export blocks on its next read, and kills it
   * there; then restarts it with `--after $(cat <file>.position)`.
   */
  async function killMidway(args: string[], out: string): Promise<string> {
    const { child, done } = start(...args);
    // Until a checkpoint vouches for some rows of the period (the log before `from` has none).
    const flushedRows = () => {
      try {
        return JSON.parse(readFileSync(checkpointFile(out), 'utf8')).entries[0].rows as number;
      } catch {
        return 0;
      }
    };
    while (flushedRows() === 0) {
      if (child.exitCode !== null) throw new Error('the export finished before it could be killed');
      await new Promise((r) => setTimeout(r, 2));
    }
    const killed = await sql.transaction(async (tx) => {
      await tx.query('LOCK TABLE events IN ACCESS EXCLUSIVE MODE');
      await new Promise((r) => setTimeout(r, 300));
      child.kill('SIGKILL');
      return done;
    });
    expect(killed.signal).toBe('SIGKILL');
    return readFileSync(positionFile(out), 'utf8');
  }

  it.each([
    ['csv', []],
    ['parquet', ['--row-group', '60']],
  ] as const)(
    '%s: an export killed with SIGKILL and restarted --after its position file has every row once: the file of an uninterrupted run',
    async (format, extra) => {
      const whole = join(dir, `whole.${format}`);
      const out = join(dir, `killed.${format}`);
      const args = (file: string) => ['export', '--from', FROM, '--to', TO, '--format', format, '--chunk', '20', ...extra, '--out', file];
      expect((await cli(...args(whole))).code).toBe(0);

      const position = await killMidway(args(out), out);
      const restarted = await cli(...args(out), '--after', position);
      expect(restarted.code).toBe(0);
      const m = /exported (\d+) rows \(resumed: (\d+) in the file\)/.exec(restarted.stderr)!;
      expect(m).not.toBeNull();
      const [thisRun, inFile] = [Number(m[1]), Number(m[2])];
      expect(thisRun).toBeGreaterThan(0);
      expect(thisRun).toBeLessThan(moneyInPeriod.length); // it was killed mid-way, after some rows
      expect(inFile).toBe(moneyInPeriod.length);

      expect(readFileSync(out).equals(readFileSync(whole))).toBe(true);
      const positions =
        format === 'csv'
          ? parseCsv(readFileSync(out, 'utf8'))
              .slice(1)
              .map((r) => r[0])
          : (await parquetReadObjects({ file: await asyncBufferFromFile(out) })).map((r) => r.position as string);
      expect(positions).toHaveLength(moneyInPeriod.length);
      expect(new Set(positions).size).toBe(positions.length);
    },
    60_000,
  );

  it('reconciles per provider and model: charged, provider cost where known, margin, unknown costs listed, BYOK apart', async () => {
    const charges = moneyInPeriod.filter((e) => e.type === 'UsageCharged');
    const { code, stdout } = await cli('reconcile', '--from', FROM, '--to', TO, '--json');
    expect(code).toBe(0);
    const report = JSON.parse(stdout);
    const sum = (events: typeof charges, field: string) => events.reduce((n, e) => n + BigInt((e.data[field] as string) ?? '0'), 0n);
    const operatorPaid = charges.filter((e) => !(e.data.provider as string).endsWith(':byok'));
    const known = operatorPaid.filter((e) => e.data.provider_cost_nano !== undefined);
    const nano = (usd: string) => BigInt(usd.replace('.', ''));
    expect(report.totals.requests).toBe(operatorPaid.length);
    expect(nano(report.totals.charged_usd)).toBe(sum(operatorPaid, 'amount_nano'));
    expect(nano(report.totals.provider_cost_usd)).toBe(sum(known, 'provider_cost_nano'));
    expect(nano(report.totals.margin_usd)).toBe(sum(known, 'amount_nano') - sum(known, 'provider_cost_nano'));
    expect(report.unknown_provider_cost.map((u: { generation_id: string }) => u.generation_id).sort()).toEqual(
      operatorPaid
        .filter((e) => e.data.provider_cost_nano === undefined)
        .map((e) => e.data.hold_id)
        .sort(),
    );
    expect(report.byok).toEqual([
      { provider: 'anthropic', model: 'anthropic/claude-haiku', requests: charges.length - operatorPaid.length, fees_usd: expect.any(String) },
    ]);
    expect(report.providers.map((p: { provider: string; model: string }) => `${p.provider} ${p.model}`)).toEqual([
      'openai openai/gpt-4o-mini',
      'sim sim/echo',
      'sim sim/small-8k',
    ]);

    const text = await cli('reconcile', '--from', FROM, '--to', TO, '--unknown-limit', '3');
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`Generations with an unknown provider cost: ${report.unknown_provider_cost.length} (first 3; all of them with --json)`);
    expect(text.stdout).toMatch(/^sim\s+sim\/echo\s+\d+\s+\$\d+\.\d{9}\s+\d+\s+\$\d+\.\d{9}\s+\$\d+\.\d{9}\s+\$\d+\.\d{9}\s+\d+\.\d\d%/m);
  }, 60_000);
});
