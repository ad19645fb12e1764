import { existsSync, fsyncSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import type { Position } from '@svc/eventstore';
import { START } from '@svc/eventstore';
import { LedgerOptionError, type ExportFormat } from '../export';
import type { ParquetState } from './parquet';
import type { Sink } from './sinks';

export interface CheckpointEntry {
  position: Position;
  bytes: number;
  rows: number;
  /** Parquet: row groups written at that point. */
  rowGroups?: number;
}

export interface Checkpoint {
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
export function parquetStateAt(state: ParquetState, rowGroups: number): ParquetState {
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

/** What a checkpoint says the file was exported with: a resume must use the same. */
export interface CheckpointHeader {
  format: ExportFormat;
  from: string | null;
  to: string | null;
}

/** Where a resumed file continues: its checkpoint, and the entry at `--after`. */
export interface Resume {
  entry: CheckpointEntry;
  checkpoint: Checkpoint;
}

/** The checkpoint of `out` at `after`, refused when it is missing, was exported otherwise, or no longer describes the file. */
export function readResume(out: string, after: Position, { format, from, to }: CheckpointHeader): Resume {
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
  return { entry, checkpoint };
}

/** Records, after each flush, the position whose rows are all in `out` (see export-writer.ts); `resumed`: the entry the file was resumed at. */
export function checkpointWriter(
  fd: number,
  sink: Sink,
  out: string,
  { format, from, to }: CheckpointHeader,
  resumed: CheckpointEntry | undefined,
): (position: Position, rows: number) => void {
  let entries: CheckpointEntry[] = resumed ? [resumed] : [];
  return (position: Position, rowCount: number) => {
    // Data first, on disk; then the checkpoint that vouches for it; then the position.
    fsyncSync(fd);
    const state = sink.state() as ParquetState | null;
    const entry: CheckpointEntry = { position, bytes: sink.bytes, rows: rowCount, ...(state ? { rowGroups: state.row_groups.length } : {}) };
    entries = [entry, ...entries.filter((e) => e.position !== position)].slice(0, 2);
    const body: Checkpoint = { version: 1, format, from, to, entries, ...(state ? { parquet: stateForCheckpoint(state) } : {}) };
    writeAtomically(checkpointFile(out), encodeState(body));
    if (position !== START) writeAtomically(positionFile(out), position);
  };
}
