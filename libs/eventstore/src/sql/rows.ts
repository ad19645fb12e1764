import type { EventMetadata, Position, RecordedEvent } from '../port';
import { decodePosition, encodePosition } from '../position';

/**
 * Global reads only see events whose writing transaction is older than every transaction
 * still running (`tx < xmin` of a fresh snapshot). A transaction that took its id (and its
 * `seq` numbers) early but commits late is still running while later ones are committed;
 * a reader that took "everything committed, ordered by seq" would move its checkpoint past
 * it and never see it. Below xmin nothing can appear any more, so ordering by (tx, seq) and
 * resuming strictly after the last (tx, seq) read never skips an event. The price: a long
 * transaction anywhere on the server delays (never loses) delivery until it ends.
 */
export const VISIBLE_AFTER = `tx < pg_snapshot_xmin(pg_current_snapshot()) AND (tx, seq) > ($1::text::xid8, $2::text::bigint)`;

// Numbers are read as text (exact in JavaScript), under their own names: an ORDER BY must
// therefore name the table's column (`events.revision`), or it would sort the text.
export const COLUMNS = `stream, revision::text AS revision, id::text AS id, type, data, metadata,
  tx::text AS tx, seq::text AS seq`;

export interface EventRow {
  stream: string;
  revision: string;
  id: string;
  type: string;
  data: unknown;
  metadata: EventMetadata;
  tx: string;
  seq: string;
}

export interface StoredRef {
  revision: string;
  tx: string;
  seq: string;
}

export interface ExistingRef extends StoredRef {
  id: string;
}

export function afterParams(after: Position | undefined): [string, string] {
  if (!after) return ['0', '0']; // below every real (tx, seq): xid 0 is never assigned, seq starts at 1
  const { major, minor } = decodePosition(after);
  return [major.toString(), minor.toString()];
}

export function toPosition(tx: string, seq: string): Position {
  return encodePosition(BigInt(tx), BigInt(seq));
}

export function toRecorded(row: EventRow): RecordedEvent {
  return {
    id: row.id,
    type: row.type,
    data: row.data,
    metadata: row.metadata,
    stream: row.stream,
    revision: BigInt(row.revision),
    position: toPosition(row.tx, row.seq),
  };
}
