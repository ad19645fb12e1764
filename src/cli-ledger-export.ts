import { Presets, SingleBar } from 'cli-progress';
import type { Command } from 'commander';
import {
  DEFAULT_EXPORT_PAGE,
  DEFAULT_ROW_GROUP_ROWS,
  exportLedger,
  formatReconciliation,
  LedgerOptionError,
  parseAfter,
  parseFormat,
  parsePeriod,
  positionFile,
  reconcileLedger,
  reconciliationJson,
} from '@svc/ledger';
import type { Runtime } from '@svc/runtime';

type WithRuntime = <T>(fn: (runtime: Runtime) => Promise<T>) => Promise<T>;

function positiveInt(option: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 1) throw new LedgerOptionError(option, `${option} must be a whole number above 0: ${JSON.stringify(text)}`);
  return n;
}

/**
 * `ledger export` and `ledger reconcile` (issue 23). Options are checked before the database is
 * opened, so a refused command reads and writes nothing; the work is libs/ledger's.
 */
export function ledgerExportCommands(ledger: Command, withRuntime: WithRuntime): void {
  ledger
    .command('export')
    .description(
      'every money event (CreditsAdded, UsageCharged, BalanceAdjusted) of [from, to) as one row, in log order, amounts in USD with 9 decimals; restartable from a log position (--after $(cat <file>.position))',
    )
    .option('--from <time>', 'ISO 8601 date or date-time, UTC when no offset: rows from this instant (inclusive)')
    .option('--to <time>', 'ISO 8601 date or date-time, UTC when no offset: rows before this instant (exclusive)')
    .option('--format <format>', 'csv, jsonl or parquet', 'csv')
    .option('--out <file>', 'write to this file, with <file>.position and <file>.checkpoint after each flushed chunk (default: stdout; parquet needs a file)')
    .option('--after <position>', 'start after this log position: resume a killed export into the same --out, or export what was appended since')
    .option('--chunk <events>', `events read and flushed at a time (default ${DEFAULT_EXPORT_PAGE})`)
    .option('--row-group <rows>', `parquet: rows per row group (default ${DEFAULT_ROW_GROUP_ROWS})`)
    .action((options: { from?: string; to?: string; format?: string; out?: string; after?: string; chunk?: string; rowGroup?: string }) => {
      const period = parsePeriod(options);
      const format = parseFormat(options.format);
      const after = parseAfter(options.after);
      const pageSize = positiveInt('--chunk', options.chunk, DEFAULT_EXPORT_PAGE);
      const rowGroupRows = positiveInt('--row-group', options.rowGroup, DEFAULT_ROW_GROUP_ROWS);
      if (format === 'parquet' && options.out === undefined) throw new LedgerOptionError('--out', '--format parquet needs --out <file>');
      return withRuntime(async (runtime) => {
        // On stderr, so rows on stdout stay clean; without a terminal it prints a line every 2 s.
        const bar = new SingleBar(
          {
            stream: process.stderr,
            format: 'export [{bar}] {value}/{total} events | {rows} rows | flushed at {flushed}',
            noTTYOutput: true,
            notTTYSchedule: 2000,
            etaBuffer: 50,
          },
          Presets.shades_classic,
        );
        let started = false;
        const result = await exportLedger(runtime.store, {
          format,
          period,
          after,
          out: options.out,
          pageSize,
          rowGroupRows,
          progress: ({ scanned, total, rows, flushed }) => {
            const payload = { rows, flushed: flushed || '(start)' };
            if (!started) {
              bar.start(total, scanned, payload);
              started = true;
            } else {
              bar.setTotal(total);
              bar.update(scanned, payload);
            }
          },
        });
        if (started) bar.stop();
        const where = options.out ? `${options.out} (${format}; last position also in ${positionFile(options.out)})` : `stdout (${format})`;
        process.stderr.write(
          `exported ${result.rowsThisRun} rows${result.resumed ? ` (resumed: ${result.rows} in the file)` : ''} from ${result.scanned} events read to ${where}; last position ${result.position || '(start)'}\n`,
        );
      });
    });

  ledger
    .command('reconcile')
    .description(
      'per provider and model over [from, to): charged to accounts against the provider cost recorded on each generation, the margin, charges whose provider cost is unknown (listed), BYOK fees apart',
    )
    .option('--from <time>', 'ISO 8601 date or date-time, UTC when no offset (inclusive)')
    .option('--to <time>', 'ISO 8601 date or date-time, UTC when no offset (exclusive)')
    .option('--json', 'print the report as JSON, with every generation whose cost is unknown')
    .option('--unknown-limit <n>', 'generation ids listed in the text report', '20')
    .action((options: { from?: string; to?: string; json?: boolean; unknownLimit?: string }) => {
      const period = parsePeriod(options);
      const limit = positiveInt('--unknown-limit', options.unknownLimit, 20);
      return withRuntime(async (runtime) => {
        const report = await reconcileLedger(runtime.store, period);
        console.log(options.json ? reconciliationJson(report) : formatReconciliation(report, limit).join('\n'));
      });
    });
}
