import type { EventStore, Position, RecordedEvent } from '@svc/eventstore';
import { START } from '@svc/eventstore';
import type { Nano } from '@svc/platform';
import { type ExportFormat, type ExportPeriod, inPeriod, type MoneyRow, moneyRow } from './export';
import { openOutput } from './export-output/open';

/**
 * Writing the ledger export (issue 23): reads the global log a page at a time from a position,
 * keeps the money events of the period, and writes their rows.
 *
 * Restarting: with `--out <file>`, after each flushed chunk the command records the last log
 * position whose rows are all in the file, in `<file>.position` (just the position, for
 * `--after $(cat <file>.position)`) and, with the file's length at that point, in
 * `<file>.checkpoint`. A restart with `--after` cuts the file back to the length recorded for
 * that position, so rows written after the last checkpoint by a killed run are not doubled, then
 * appends from there: the result is the file an uninterrupted run writes, byte for byte. A
 * Parquet file is resumed the same way: the checkpoint keeps the metadata of the row groups
 * written (the footer is written once, at the end, from it).
 *
 * ./export-output/ holds the output: sinks.ts (CSV and JSON lines), parquet.ts, checkpoint.ts
 * (the checkpoint and position files) and open.ts (a fresh, resumed or streamed output).
 */

export interface ExportProgress {
  /** Events read from the log (all types) and an estimate of all there are to read. */
  scanned: number;
  total: number;
  rows: number;
  /** The last position whose rows are all written out: where a restart continues from. */
  flushed: Position;
}

export interface LedgerExportOptions {
  format: ExportFormat;
  period: ExportPeriod;
  /** Exclusive: start after this log position (a restart, or an incremental export). */
  after?: Position;
  /** The file to write; absent: rows go to `stdout` (CSV and JSON lines only). */
  out?: string;
  stdout?: NodeJS.WritableStream;
  /** Events read per page of the log; each page is written out (flushed) before the next is read. */
  pageSize?: number;
  /** Parquet: rows per row group (a row group is written once this many rows are buffered). */
  rowGroupRows?: number;
  progress?: (progress: ExportProgress) => void;
}

export interface LedgerExportResult {
  rows: number;
  /** Rows written by this run (a resumed run continues the count of the file). */
  rowsThisRun: number;
  scanned: number;
  /** The last position read: give it to `--after` to export what was appended since. */
  position: Position;
  /** The file was continued from a checkpoint. */
  resumed: boolean;
  /** Per account, the sum of `balance_effect_nano` of the rows of this run. */
  balanceEffect: Map<string, Nano>;
}

export const DEFAULT_EXPORT_PAGE = 5000;
export { DEFAULT_ROW_GROUP_ROWS, PARQUET_SCHEMA } from './export-output/parquet';
export { checkpointFile, positionFile } from './export-output/checkpoint';

/**
 * The log from a position, a page at a time, in position order. The next page is read while the
 * caller works on this one: the database's part of a read then runs beside our writing.
 */
export async function* readLogPages(store: EventStore, after: Position, pageSize: number): AsyncGenerator<RecordedEvent[]> {
  const read = (position: Position) => {
    const page = store.readAll({ after: position, maxCount: pageSize });
    // A caller that stops early (an error) never awaits the read ahead: its failure is not news.
    page.catch(() => {});
    return page;
  };
  let next = read(after);
  for (;;) {
    const page = await next;
    if (page.length === 0) return;
    next = read(page[page.length - 1].position);
    yield page;
  }
}

/**
 * Exports the money events of the period after `after`, in log position order. Filtering is by
 * each event's instant (a charge's `charged_at`, otherwise `metadata.at`), and those are not
 * monotonic in log order across processes, so the whole log after `after` is read: the period
 * selects rows, the position bounds the read.
 */
export async function exportLedger(store: EventStore, options: LedgerExportOptions): Promise<LedgerExportResult> {
  const after = options.after ?? START;
  const pageSize = options.pageSize ?? DEFAULT_EXPORT_PAGE;
  const opened = await openOutput(options, after);
  const { sink } = opened;
  let rows = opened.rows;
  let rowsThisRun = 0;
  let scanned = 0;
  let total = await store.countEventsAfter(after === START ? undefined : after);
  let position = after;
  let flushed = after;
  const balanceEffect = new Map<string, Nano>();
  try {
    options.progress?.({ scanned, total, rows, flushed });
    for await (const page of readLogPages(store, after, pageSize)) {
      const pageRows: MoneyRow[] = [];
      for (const event of page) {
        const row = inPeriod(event, options.period) ? moneyRow(event) : null;
        if (!row) continue;
        pageRows.push(row);
        balanceEffect.set(row.account_id, (balanceEffect.get(row.account_id) ?? 0n) + row.balance_effect_nano);
      }
      scanned += page.length;
      position = page[page.length - 1].position;
      rows += pageRows.length;
      rowsThisRun += pageRows.length;
      if (await sink.add(pageRows)) {
        flushed = position;
        opened.checkpoint?.(flushed, rows);
      }
      // The log grows while it is read: the total is an estimate that the count overtakes.
      if (scanned > total) total = scanned;
      options.progress?.({ scanned, total, rows, flushed });
    }
    await sink.drain();
    if (flushed !== position) {
      flushed = position;
      opened.checkpoint?.(flushed, rows);
    }
    // The checkpoint is before the footer: `--after` the last position later continues the
    // file (a Parquet file's footer is rewritten with the new row groups).
    await sink.finish();
    options.progress?.({ scanned, total, rows, flushed });
  } finally {
    opened.close();
  }
  return { rows, rowsThisRun, scanned, position, resumed: opened.resumed, balanceEffect };
}
