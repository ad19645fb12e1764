import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqlEventStore } from '@svc/eventstore';
import { nanoToUsd9, type PgSqlRunner } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects } from 'hyparquet';
import { EXPORT_COLUMNS, LedgerOptionError, parsePeriod, type ExportFormat } from './export';
import { checkpointFile, exportLedger, positionFile, type LedgerExportOptions } from './export-writer';
import { readStatement } from './statement';
import { parseCsv } from './testing/csv';
import { appendedInstant, appendMoneyLog, moneyLog, type AppendedEvent } from './testing/money-log';

const MONEY = new Set(['CreditsAdded', 'UsageCharged', 'BalanceAdjusted']);

/** What the export must hold, by the test's own arithmetic on what was appended. */
function expected(groups: AppendedEvent[][], from: Date, to: Date) {
  const events = groups.flat().filter((e) => MONEY.has(e.type) && e.stream.startsWith('account-'));
  const inside = events.filter((e) => appendedInstant(e) >= from.getTime() && appendedInstant(e) < to.getTime());
  const sums = new Map<string, bigint>();
  for (const e of inside) {
    const amount = BigInt(e.data.amount_nano as string);
    const effect = e.type === 'UsageCharged' ? -amount : amount;
    sums.set(e.data.account_id as string, (sums.get(e.data.account_id as string) ?? 0n) + effect);
  }
  return { count: inside.length, sums };
}

describe('ledger export, written from the PostgreSQL event store', () => {
  let sql: PgSqlRunner;
  let store: SqlEventStore;
  let dir: string;
  const groups = moneyLog(1200);
  const period = parsePeriod({ from: '2026-11-01T12:00:00Z', to: '2026-11-02T12:00:00Z' });
  const want = expected(groups, period.from!, period.to!);
  const file = (name: string) => join(dir, name);
  const run = (over: Partial<LedgerExportOptions> & { format: ExportFormat }) => exportLedger(store, { period, pageSize: 97, rowGroupRows: 150, ...over });

  beforeAll(async () => {
    sql = await freshPgRunner('ledger_export');
    store = new SqlEventStore(sql);
    await store.init();
    await appendMoneyLog(store, groups);
    dir = mkdtempSync(join(tmpdir(), 'ledger-export-'));
  }, 60_000);

  afterAll(async () => {
    await store?.close();
    await sql?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("writes one CSV row per money event of the period, in log order, whose sums per account are the statements'", async () => {
    expect(want.count).toBeGreaterThan(300); // the period is a real slice of the log, with every kind of event
    const result = await run({ format: 'csv', out: file('all.csv') });
    const [header, ...rows] = parseCsv(readFileSync(file('all.csv'), 'utf8'));
    expect(header).toEqual([...EXPORT_COLUMNS]);
    expect(rows).toHaveLength(want.count);
    expect(result).toMatchObject({ rows: want.count, rowsThisRun: want.count, resumed: false });
    const col = (name: string) => EXPORT_COLUMNS.indexOf(name as never);
    const positions = rows.map((r) => r[col('position')]);
    expect([...positions].sort()).toEqual(positions);
    expect(new Set(positions).size).toBe(positions.length);
    expect(new Set(rows.map((r) => r[col('type')]))).toEqual(MONEY);

    const sums = new Map<string, bigint>();
    for (const r of rows) {
      const nano = BigInt(r[col('balance_effect_usd')].replace('.', ''));
      sums.set(r[col('account_id')], (sums.get(r[col('account_id')]) ?? 0n) + nano);
    }
    expect(sums).toEqual(want.sums);
    // Each account's statement for the same period.
    for (const [account, sum] of sums) {
      const statement = await readStatement(store, account, { from: period.from!, to: period.to! });
      expect(nanoToUsd9(statement.closingNano - statement.openingNano)).toBe(nanoToUsd9(sum));
    }
    expect(readFileSync(positionFile(file('all.csv')), 'utf8')).toBe(result.position);
  });

  it('writes the same rows as JSON lines and as a Parquet file that reads back with its values', async () => {
    await run({ format: 'csv', out: file('ref.csv') });
    const csv = parseCsv(readFileSync(file('ref.csv'), 'utf8')).slice(1);
    await run({ format: 'jsonl', out: file('all.jsonl') });
    const lines = readFileSync(file('all.jsonl'), 'utf8')
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.position)).toEqual(csv.map((r) => r[0]));
    expect(lines.map((l) => l.balance_effect_usd)).toEqual(csv.map((r) => r[EXPORT_COLUMNS.indexOf('balance_effect_usd')]));

    await run({ format: 'parquet', out: file('all.parquet') });
    const buffer = await asyncBufferFromFile(file('all.parquet'));
    const metadata = await parquetMetadataAsync(buffer);
    expect(Number(metadata.num_rows)).toBe(want.count);
    // Row groups were written as the rows came (150 rows each here), not all at the end.
    expect(metadata.row_groups.length).toBeGreaterThan(2);
    const rows = await parquetReadObjects({ file: buffer });
    expect(rows.map((r) => r.position)).toEqual(lines.map((l) => l.position));
    rows.forEach((r, i) => {
      const l = lines[i];
      expect([r.type, r.account_id, r.generation_id ?? null, r.provider ?? null, r.byok ?? null, r.batch ?? null, r.reason ?? null]).toEqual([
        l.type,
        l.account_id,
        l.generation_id,
        l.provider,
        l.byok,
        l.batch,
        l.reason,
      ]);
      expect(r.meters ?? null).toEqual(l.meters);
      // DECIMAL(18, 9): the reader hands back a float; its nanos are the exact amount.
      expect(Math.round(r.amount_usd * 1e9)).toBe(Number(l.amount_usd.replace('.', '')));
      expect(r.provider_cost_usd === null || r.provider_cost_usd === undefined ? null : Math.round(r.provider_cost_usd * 1e9)).toBe(
        l.provider_cost_usd === null ? null : Number(l.provider_cost_usd.replace('.', '')),
      );
    });
    const decimal = metadata.schema.find((s) => s.name === 'balance_effect_usd')!;
    expect(decimal).toMatchObject({ type: 'INT64', converted_type: 'DECIMAL', scale: 9, precision: 18 });
  });

  /** A run that dies once `flushes` checkpoints holding rows are written, leaving whatever it wrote: as a killed process would. */
  async function crash(options: Partial<LedgerExportOptions> & { format: ExportFormat }, flushes: number) {
    let seen = '';
    let count = 0;
    await expect(
      run({
        ...options,
        progress: ({ flushed, rows }) => {
          if (flushed !== seen && rows > 0 && ++count > flushes) throw new Error('killed');
          seen = flushed;
        },
      }),
    ).rejects.toThrow('killed');
  }

  it.each(['csv', 'jsonl', 'parquet'] as const)(
    '%s: a run killed mid-export, with rows written past its last checkpoint, resumed --after its position file, is the uninterrupted file byte for byte',
    async (format) => {
      await run({ format, out: file(`whole.${format}`) });
      const out = file(`killed.${format}`);
      await crash({ format, out }, format === 'parquet' ? 1 : 4);
      const position = readFileSync(positionFile(out), 'utf8');
      // What a process killed between a write and its checkpoint leaves: bytes after the checkpoint.
      appendFileSync(out, format === 'parquet' ? Buffer.from([1, 2, 3, 4, 5]) : '00000000000000000999/00000000000000000001,doubled\r\n');
      const resumed = await run({ format, out, after: position });
      expect(resumed.resumed).toBe(true);
      expect(resumed.rowsThisRun).toBeGreaterThan(0);
      expect(resumed.rowsThisRun).toBeLessThan(want.count);
      expect(resumed.rows).toBe(want.count);
      expect(readFileSync(out).equals(readFileSync(file(`whole.${format}`)))).toBe(true);
    },
  );

  it('resumes from the previous checkpoint too: the position file is renamed after the checkpoint, so it may lag it by one', async () => {
    const out = file('lag.parquet');
    await crash({ format: 'parquet', out }, 2);
    const checkpoint = JSON.parse(readFileSync(checkpointFile(out), 'utf8'));
    expect(checkpoint.entries).toHaveLength(2);
    writeFileSync(positionFile(out), checkpoint.entries[1].position);
    await run({ format: 'parquet', out, after: checkpoint.entries[1].position });
    expect(readFileSync(out).equals(readFileSync(file('whole.parquet')))).toBe(true);
  });

  it('continues a finished file with what was appended since: --after its last position', async () => {
    const out = file('grow.jsonl');
    const first = await run({ format: 'jsonl', out, period: {} });
    await appendMoneyLog(store, [
      [
        {
          stream: 'account-acct-0',
          type: 'CreditsAdded',
          data: { account_id: 'acct-0', amount_nano: '7', reason: 'late' },
          metadata: { at: '2026-12-01T00:00:00.000Z' },
        },
      ],
    ]);
    const next = await run({ format: 'jsonl', out, period: {}, after: first.position });
    expect(next.rowsThisRun).toBe(1);
    const lines = readFileSync(out, 'utf8').trimEnd().split('\n');
    expect(lines).toHaveLength(first.rows + 1);
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ reason: 'late', amount_usd: '0.000000007' });
  });

  it('refuses to resume a file it cannot vouch for, naming --after, and leaves the file as it was', async () => {
    const out = file('refuse.csv');
    await crash({ format: 'csv', out }, 2);
    const before = readFileSync(out);
    const refused = (options: Partial<LedgerExportOptions> & { format: ExportFormat }) => expect(run({ out, ...options })).rejects.toThrow(LedgerOptionError);
    await refused({ format: 'csv', after: '00000000000000000000/00000000000000000001' });
    await refused({ format: 'jsonl', after: readFileSync(positionFile(out), 'utf8') });
    await refused({ format: 'csv', after: readFileSync(positionFile(out), 'utf8'), period: parsePeriod({ from: '2026-11-01' }) });
    rmSync(checkpointFile(out));
    await expect(run({ format: 'csv', out, after: readFileSync(positionFile(out), 'utf8') })).rejects.toThrow(/exists but .*\.checkpoint does not/);
    expect(readFileSync(out).equals(before)).toBe(true);
  });
});
