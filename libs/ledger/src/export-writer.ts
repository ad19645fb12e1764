import { closeSync, existsSync, fsyncSync, ftruncateSync, openSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import type { EventStore, Position, RecordedEvent } from '@svc/eventstore';
import { START } from '@svc/eventstore';
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import type { Nano } from '@svc/platform';
import {
  csvHeader,
  csvLine,
  EXPORT_COLUMNS,
  type ExportFormat,
  type ExportPeriod,
  inPeriod,
  jsonlLine,
  LedgerOptionError,
  type MoneyRow,
  moneyRow,
} from './export';

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
export const DEFAULT_ROW_GROUP_ROWS = 50_000;

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

// ---- Sinks ------------------------------------------------------------------------------------

interface Sink {
  /** Takes a page's rows; true when every row taken so far is written out. */
  add(rows: MoneyRow[]): Promise<boolean>;
  /** Bytes of the file written out (what a checkpoint records). */
  readonly bytes: number;
  /** What a checkpoint needs besides the length (Parquet: the row groups' metadata). */
  state(): unknown;
  /** Writes out what is buffered (Parquet: the last row group). */
  drain(): Promise<void>;
  /** Ends the file (Parquet: the footer). */
  finish(): Promise<void>;
}

const lineOf = (format: 'csv' | 'jsonl') => (format === 'csv' ? csvLine : jsonlLine);

/** CSV or JSON lines into a file descriptor: a page is one write. */
class TextFileSink implements Sink {
  constructor(
    private readonly fd: number,
    private readonly format: 'csv' | 'jsonl',
    public bytes: number,
  ) {}

  async add(rows: MoneyRow[]): Promise<boolean> {
    if (rows.length === 0) return true;
    const line = lineOf(this.format);
    let text = '';
    for (const row of rows) text += line(row);
    this.bytes += writeAll(this.fd, Buffer.from(text, 'utf8'));
    return true;
  }

  state(): unknown {
    return null;
  }

  async drain(): Promise<void> {}

  async finish(): Promise<void> {}
}

class StreamSink implements Sink {
  bytes = 0;
  constructor(
    private readonly stream: NodeJS.WritableStream,
    private readonly format: 'csv' | 'jsonl',
  ) {}

  async add(rows: MoneyRow[]): Promise<boolean> {
    if (rows.length === 0) return true;
    const line = lineOf(this.format);
    let text = '';
    for (const row of rows) text += line(row);
    await this.write(text);
    return true;
  }

  async write(text: string): Promise<void> {
    this.bytes += Buffer.byteLength(text);
    // Resolves once the chunk is handed to the OS, which is what "flushed" means for a pipe.
    await new Promise<void>((resolve, reject) => this.stream.write(text, (err) => (err ? reject(err) : resolve())));
  }

  state(): unknown {
    return null;
  }

  async drain(): Promise<void> {}

  async finish(): Promise<void> {}
}

function writeAll(fd: number, buffer: Uint8Array): number {
  for (let done = 0; done < buffer.length;) done += writeSync(fd, buffer, done, buffer.length - done);
  return buffer.length;
}

/** hyparquet-writer's byte writer, emptied into the file as it fills (not the whole file in memory). */
class FdByteWriter extends ByteWriter {
  private static readonly FLUSH_AT = 1 << 20;

  constructor(private readonly fd: number) {
    super(FdByteWriter.FLUSH_AT * 2);
  }

  override ensure(size: number): void {
    // Everything before `index` is complete output: it can go to the file before more is appended.
    if (this.index > FdByteWriter.FLUSH_AT) this.flush();
    super.ensure(size);
  }

  flush(): void {
    if (this.index === 0) return;
    writeAll(this.fd, new Uint8Array(this.buffer, 0, this.index));
    this.index = 0;
  }

  override finish(): void {
    this.flush();
  }
}

const utf8 = (name: string, required = false) => ({
  name,
  type: 'BYTE_ARRAY' as const,
  converted_type: 'UTF8' as const,
  repetition_type: required ? ('REQUIRED' as const) : ('OPTIONAL' as const),
});
/** Exact money: nano-USD as an INT64 DECIMAL(18, 9), which Spark, DuckDB, pandas and BigQuery read as decimal USD. */
const usdDecimal = (name: string, required: boolean) => ({
  name,
  type: 'INT64' as const,
  converted_type: 'DECIMAL' as const,
  scale: 9,
  precision: 18,
  logical_type: { type: 'DECIMAL' as const, scale: 9, precision: 18 },
  repetition_type: required ? ('REQUIRED' as const) : ('OPTIONAL' as const),
});

/** The Parquet schema: the export's columns, amounts as decimals, meters as a JSON column. */
export const PARQUET_SCHEMA = [
  { name: 'root', num_children: EXPORT_COLUMNS.length },
  ...EXPORT_COLUMNS.map((column) => {
    switch (column) {
      case 'position':
      case 'type':
      case 'account_id':
        return utf8(column, true);
      case 'amount_usd':
      case 'balance_effect_usd':
        return usdDecimal(column, true);
      case 'provider_cost_usd':
        return usdDecimal(column, false);
      case 'byok':
      case 'batch':
        return { name: column, type: 'BOOLEAN' as const, repetition_type: 'OPTIONAL' as const };
      case 'meters':
        return { name: column, type: 'BYTE_ARRAY' as const, converted_type: 'JSON' as const, repetition_type: 'OPTIONAL' as const };
      default:
        return utf8(column);
    }
  }),
];

const NANO_COLUMN: Partial<Record<(typeof EXPORT_COLUMNS)[number], keyof MoneyRow>> = {
  amount_usd: 'amount_nano',
  balance_effect_usd: 'balance_effect_nano',
  provider_cost_usd: 'provider_cost_nano',
};

/** What hyparquet-writer keeps between row groups; restored on a resume. */
type ParquetState = { row_groups: unknown[]; pendingIndexes: unknown[]; num_rows: bigint };

class ParquetSink implements Sink {
  private readonly bytesWriter: FdByteWriter;
  private readonly parquet: ParquetWriter;
  private buffered: MoneyRow[] = [];

  constructor(
    fd: number,
    private readonly rowGroupRows: number,
    resume: { bytes: number; state: ParquetState } | null,
  ) {
    this.bytesWriter = new FdByteWriter(fd);
    this.parquet = new ParquetWriter({ writer: this.bytesWriter, schema: PARQUET_SCHEMA as never, createdBy: 'svc-gateway ledger export' });
    if (resume) {
      // The constructor appended the "PAR1" magic, which the file already has.
      this.bytesWriter.index = 0;
      this.bytesWriter.offset = resume.bytes;
      const internals = this.parquet as unknown as ParquetState;
      internals.row_groups = resume.state.row_groups;
      internals.pendingIndexes = resume.state.pendingIndexes;
      internals.num_rows = resume.state.num_rows;
    } else this.bytesWriter.flush();
  }

  get bytes(): number {
    return this.bytesWriter.offset;
  }

  async add(rows: MoneyRow[]): Promise<boolean> {
    for (const row of rows) this.buffered.push(row);
    if (this.buffered.length < this.rowGroupRows) return this.buffered.length === 0;
    await this.writeGroup();
    return true;
  }

  private async writeGroup(): Promise<void> {
    const rows = this.buffered;
    if (rows.length === 0) return;
    this.buffered = [];
    const columnData = EXPORT_COLUMNS.map((column) => {
      const nanoField = NANO_COLUMN[column];
      const data = nanoField ? rows.map((r) => r[nanoField]) : rows.map((r) => r[column]);
      // min/max of a JSON document prune nothing, and are kept whole (no truncation): skip them.
      return { name: column, data, ...(column === 'meters' ? { statistics: false } : {}) };
    });
    await this.parquet.write({ columnData: columnData as never, rowGroupSize: rows.length });
    this.bytesWriter.flush();
  }

  state(): ParquetState {
    const internals = this.parquet as unknown as ParquetState;
    return { row_groups: internals.row_groups, pendingIndexes: internals.pendingIndexes, num_rows: internals.num_rows };
  }

  async drain(): Promise<void> {
    await this.writeGroup();
  }

  async finish(): Promise<void> {
    await this.writeGroup();
    await this.parquet.finish();
  }
}

// ---- Checkpoints ------------------------------------------------------------------------------

interface CheckpointEntry {
  position: Position;
  bytes: number;
  rows: number;
  /** Parquet: row groups written at that point. */
  rowGroups?: number;
}

interface Checkpoint {
  version: 1;
  format: ExportFormat;
  from: string | null;
  to: string | null;
  /** Newest first, two kept: `<file>.position` is renamed after this file, so it may name the previous one. */
  entries: CheckpointEntry[];
  /** Parquet: hyparquet-writer's state at the newest entry (an older entry is a prefix of it). */
  parquet?: ParquetState;
}

export const positionFile = (out: string) => `${out}.position`;
export const checkpointFile = (out: string) => `${out}.checkpoint`;

/** JSON that keeps bigints and byte arrays (the row groups' metadata has both). */
function encodeState(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === 'bigint') return { $bigint: v.toString() };
    if (v instanceof Uint8Array) return { $bytes: Buffer.from(v).toString('base64') };
    return v;
  });
}

function decodeState<T>(text: string): T {
  return JSON.parse(text, (_key, v: unknown) => {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const o = v as Record<string, unknown>;
      if (typeof o.$bigint === 'string') return BigInt(o.$bigint);
      if (typeof o.$bytes === 'string') return new Uint8Array(Buffer.from(o.$bytes, 'base64'));
    }
    return v;
  }) as T;
}

/** A file replaced whole or not at all: a kill never leaves half a checkpoint. */
function writeAtomically(path: string, text: string): void {
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

/** The parquet state at an older entry: its row groups are a prefix, and each has one index entry per column chunk. */
function parquetStateAt(state: ParquetState, rowGroups: number): ParquetState {
  const groups = state.row_groups.slice(0, rowGroups) as { columns: unknown[]; num_rows: bigint }[];
  const chunks = groups.flatMap((g) => g.columns);
  const indexes = (state.pendingIndexes as Record<string, unknown>[]).slice(0, chunks.length);
  // The writer sets each chunk's index offsets when it writes the footer: the index entry and
  // the row group's column must be one object, as they were when written.
  const pendingIndexes = indexes.map((entry, i) => ({ ...entry, chunk: chunks[i] }));
  return { row_groups: groups, pendingIndexes, num_rows: groups.reduce((n, g) => n + g.num_rows, 0n) };
}

function stateForCheckpoint(state: ParquetState): ParquetState {
  // The chunks are in row_groups already; parquetStateAt links them back.
  return { ...state, pendingIndexes: (state.pendingIndexes as Record<string, unknown>[]).map(({ chunk: _chunk, ...rest }) => rest) };
}

// ---- The export -------------------------------------------------------------------------------

const isoOrNull = (d: Date | undefined) => (d ? d.toISOString() : null);

interface Opened {
  sink: Sink;
  rows: number;
  resumed: boolean;
  close: () => void;
  checkpoint: ((position: Position, rows: number) => void) | null;
}

async function openOutput(options: LedgerExportOptions, after: Position): Promise<Opened> {
  const { format, out, period } = options;
  if (out === undefined) {
    if (format === 'parquet')
      throw new LedgerOptionError('--out', '--format parquet needs --out <file> (a Parquet file is not a stream, and is resumed from its checkpoint)');
    const stream = options.stdout ?? process.stdout;
    const sink = new StreamSink(stream, format);
    // A continuation (--after) appends to what an earlier run printed: no second header.
    if (format === 'csv' && after === START) await sink.write(csvHeader());
    return { sink, rows: 0, resumed: false, close: () => {}, checkpoint: null };
  }

  const from = isoOrNull(period.from);
  const to = isoOrNull(period.to);
  let resume: { entry: CheckpointEntry; checkpoint: Checkpoint } | null = null;
  if (after !== START && existsSync(out)) {
    const path = checkpointFile(out);
    if (!existsSync(path)) {
      throw new LedgerOptionError(
        '--after',
        `--after ${after}: ${out} exists but ${path} does not, so where its rows end is unknown; export to a new file, or without --after to overwrite it`,
      );
    }
    const checkpoint = decodeState<Checkpoint>(readFileSync(path, 'utf8'));
    const mismatch =
      checkpoint.format !== format
        ? `--format ${checkpoint.format}`
        : checkpoint.from !== from
          ? `--from ${checkpoint.from ?? '(none)'}`
          : checkpoint.to !== to
            ? `--to ${checkpoint.to ?? '(none)'}`
            : null;
    if (mismatch) throw new LedgerOptionError('--after', `${out} was exported with ${mismatch}: resume it with the same options`);
    const entry = checkpoint.entries.find((e) => e.position === after);
    if (!entry) {
      throw new LedgerOptionError(
        '--after',
        `--after ${after}: ${out} was last flushed at ${checkpoint.entries[0]?.position || '(start)'}; resume with --after $(cat ${positionFile(out)})`,
      );
    }
    if (statSync(out).size < entry.bytes)
      throw new Error(`${out} is shorter (${statSync(out).size} bytes) than its checkpoint at ${after} (${entry.bytes} bytes): it was changed since`);
    resume = { entry, checkpoint };
  }

  let fd: number;
  let sink: Sink;
  let rows = 0;
  if (resume) {
    const { entry, checkpoint } = resume;
    fd = openSync(out, 'r+');
    // What a killed run wrote after its last checkpoint is cut, then written again from the log.
    ftruncateSync(fd, entry.bytes);
    closeSync(fd);
    fd = openSync(out, 'a');
    rows = entry.rows;
    sink =
      format === 'parquet'
        ? new ParquetSink(fd, options.rowGroupRows ?? DEFAULT_ROW_GROUP_ROWS, {
            bytes: entry.bytes,
            state: parquetStateAt(checkpoint.parquet!, entry.rowGroups ?? 0),
          })
        : new TextFileSink(fd, format, entry.bytes);
  } else {
    // A fresh file: checkpoints of an earlier export to it no longer describe it.
    rmSync(checkpointFile(out), { force: true });
    rmSync(positionFile(out), { force: true });
    fd = openSync(out, 'w');
    if (format === 'parquet') sink = new ParquetSink(fd, options.rowGroupRows ?? DEFAULT_ROW_GROUP_ROWS, null);
    else {
      const header = format === 'csv' ? writeAll(fd, Buffer.from(csvHeader(), 'utf8')) : 0;
      sink = new TextFileSink(fd, format, header);
    }
  }

  let entries: CheckpointEntry[] = resume ? [resume.entry] : [];
  const checkpoint = (position: Position, rowCount: number) => {
    // Data first, on disk; then the checkpoint that vouches for it; then the position.
    fsyncSync(fd);
    const state = sink.state() as ParquetState | null;
    const entry: CheckpointEntry = { position, bytes: sink.bytes, rows: rowCount, ...(state ? { rowGroups: state.row_groups.length } : {}) };
    entries = [entry, ...entries.filter((e) => e.position !== position)].slice(0, 2);
    const body: Checkpoint = { version: 1, format, from, to, entries, ...(state ? { parquet: stateForCheckpoint(state) } : {}) };
    writeAtomically(checkpointFile(out), encodeState(body));
    if (position !== START) writeAtomically(positionFile(out), position);
  };
  if (!resume) checkpoint(after, 0);
  return { sink, rows, resumed: resume !== null, close: () => closeSync(fd), checkpoint };
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
