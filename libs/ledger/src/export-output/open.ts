import { closeSync, existsSync, ftruncateSync, openSync, rmSync } from 'node:fs';
import type { Position } from '@svc/eventstore';
import { START } from '@svc/eventstore';
import { csvHeader, LedgerOptionError, type ExportFormat, type ExportPeriod } from '../export';
import { checkpointFile, checkpointWriter, parquetStateAt, positionFile, readResume, type Resume } from './checkpoint';
import { DEFAULT_ROW_GROUP_ROWS, ParquetSink } from './parquet';
import { StreamSink, TextFileSink, writeAll, type Sink } from './sinks';

/** Where the rows go and how (the part of LedgerExportOptions that says so). */
export interface OutputOptions {
  format: ExportFormat;
  period: ExportPeriod;
  out?: string;
  stdout?: NodeJS.WritableStream;
  rowGroupRows?: number;
}

export interface Opened {
  sink: Sink;
  rows: number;
  resumed: boolean;
  close: () => void;
  checkpoint: ((position: Position, rows: number) => void) | null;
}

const isoOrNull = (d: Date | undefined) => (d ? d.toISOString() : null);

/** The output of an export: `stdout`, a fresh file, or a file resumed at its checkpoint at `after`. */
export async function openOutput(options: OutputOptions, after: Position): Promise<Opened> {
  const { format, out, period } = options;
  if (out === undefined) return openStream(options, after);
  const header = { format, from: isoOrNull(period.from), to: isoOrNull(period.to) };
  const resume = after !== START && existsSync(out) ? readResume(out, after, header) : null;
  const { fd, sink, rows } = resume ? reopenFile(out, options, resume) : createFile(out, options);
  const checkpoint = checkpointWriter(fd, sink, out, header, resume?.entry);
  if (!resume) checkpoint(after, 0);
  return { sink, rows, resumed: resume !== null, close: () => closeSync(fd), checkpoint };
}

async function openStream({ format, stdout }: OutputOptions, after: Position): Promise<Opened> {
  if (format === 'parquet')
    throw new LedgerOptionError('--out', '--format parquet needs --out <file> (a Parquet file is not a stream, and is resumed from its checkpoint)');
  const stream = stdout ?? process.stdout;
  const sink = new StreamSink(stream, format);
  // A continuation (--after) appends to what an earlier run printed: no second header.
  if (format === 'csv' && after === START) await sink.write(csvHeader());
  return { sink, rows: 0, resumed: false, close: () => {}, checkpoint: null };
}

function reopenFile(out: string, { format, rowGroupRows }: OutputOptions, { entry, checkpoint }: Resume): { fd: number; sink: Sink; rows: number } {
  let fd = openSync(out, 'r+');
  // What a killed run wrote after its last checkpoint is cut, then written again from the log.
  ftruncateSync(fd, entry.bytes);
  closeSync(fd);
  fd = openSync(out, 'a');
  const sink =
    format === 'parquet'
      ? new ParquetSink(fd, rowGroupRows ?? DEFAULT_ROW_GROUP_ROWS, {
          bytes: entry.bytes,
          state: parquetStateAt(checkpoint.parquet!, entry.rowGroups ?? 0),
        })
      : new TextFileSink(fd, format, entry.bytes);
  return { fd, sink, rows: entry.rows };
}

function createFile(out: string, { format, rowGroupRows }: OutputOptions): { fd: number; sink: Sink; rows: number } {
  // A fresh file: checkpoints of an earlier export to it no longer describe it.
  rmSync(checkpointFile(out), { force: true });
  rmSync(positionFile(out), { force: true });
  const fd = openSync(out, 'w');
  if (format === 'parquet') return { fd, sink: new ParquetSink(fd, rowGroupRows ?? DEFAULT_ROW_GROUP_ROWS, null), rows: 0 };
  const header = format === 'csv' ? writeAll(fd, Buffer.from(csvHeader(), 'utf8')) : 0;
  return { fd, sink: new TextFileSink(fd, format, header), rows: 0 };
}
