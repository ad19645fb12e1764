import type { SqlExecutor, SqlRunner } from '@svc/platform';
import { checkExpected, checkedForAppend, storeUnavailable, type SerializedEvent } from '../common';
import {
  WrongExpectedVersionError,
  type AppendResult,
  type ExclusiveAppendResult,
  type ExpectedRevision,
  type NewEvent,
  type RecordedEvent,
  type Upcaster,
} from '../port';
import { START } from '../position';
import { COLUMNS, toPosition, toRecorded, type EventRow, type ExistingRef, type StoredRef } from './rows';

export interface PreparedAppend {
  stream: string;
  expected: ExpectedRevision;
  ids: string[];
  /** The length of its events' serialised text, which bounds a group's statement (GroupCommit). */
  chars: number;
  /** The append as the group function reads it, built when first read: most appends go by INSERT (appendDirect). */
  readonly json: string;
  /** Its event, when it has exactly one (see SqlAppender.appendDirect). */
  single?: SerializedEvent;
}

/**
 * A class, not an object literal with a getter of its own: each object such a literal makes is a
 * dictionary with an accessor pair of its own (`%HasFastProperties` false), and made so on every
 * append it sent the getter's closure, with the append's text, to the old generation: some 0.5
 * KB of every append, and a full collection every second or two at 64 connections
 * (docs/BENCHMARKS.md, twenty-fourth round).
 */
class Prepared implements PreparedAppend {
  readonly single: SerializedEvent | undefined;
  private built: string | undefined;

  constructor(
    readonly stream: string,
    readonly expected: ExpectedRevision,
    readonly ids: string[],
    readonly chars: number,
    private readonly checked: SerializedEvent[],
  ) {
    this.single = checked.length === 1 ? checked[0] : undefined;
  }

  get json(): string {
    // The events' own text (the size rule's), so that a group is the concatenation of its appends.
    return (this.built ??= `{"stream":${JSON.stringify(this.stream)},"expected":${JSON.stringify(String(this.expected))},"ids":${JSON.stringify(this.ids)},"events":[${this.checked
      .map((e) => `{"id":${JSON.stringify(e.id)},"type":${JSON.stringify(e.type)},"data":${e.data},"metadata":${e.metadata}}`)
      .join(',')}]}`);
  }
}

/**
 * The most events a refused append brings back (WrongExpectedVersionError.newer): a writer
 * further behind reads the stream itself. A gap of a few appends from other processes is the
 * common case of a stream written from several gateways.
 */
const MAX_NEWER_ON_CONFLICT = 64;

/**
 * A lone append of one event at an exact revision, or to a new stream: one INSERT under the
 * stream's lock, the lock taken before the row is written (so before the transaction takes its
 * id, as in the group function: within a stream, (tx, seq) order stays revision order). The
 * primary key (stream, revision) refuses a revision another append took, the unique (stream, id)
 * a retry, and the EXISTS an expected revision the stream has not reached: no row, or error
 * 23505, and the group function answers instead, with what it found.
 */
const LONE_APPEND = `WITH lock AS MATERIALIZED (SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0)))
INSERT INTO events (stream, revision, id, type, data, metadata)
SELECT $1::text, $2::text::bigint + 1, $3::text::uuid, $4::text, $5::text::jsonb, $6::text::jsonb FROM lock
WHERE $2::text::bigint < 0 OR EXISTS (SELECT 1 FROM events p WHERE p.stream = $1 AND p.revision = $2::text::bigint)
RETURNING revision::text AS revision, tx::text AS tx, seq::text AS seq`;

/**
 * Several such appends, of distinct streams, as one INSERT: every stream's lock first, in one
 * order (an aggregate over the sorted hashes takes them all before the first row is written),
 * then the rows in the order the appends were made, each under the same rules as LONE_APPEND.
 * An append whose EXISTS fails is not written and returns no row: the group function answers it
 * after. A row the constraints refuse fails the whole statement, nothing written. The EXISTS is
 * one index probe per append: without OFFSET 0 the planner may hash the whole events table
 * instead, which it prefers while the table is small and keeps in a cached plan as it grows.
 *
 * The appends come as one JSON array whose events' data and metadata are their own JSON text,
 * not strings: as text arrays, node-postgres escaped every quote and backslash of every event
 * into an array literal, the largest allocation of a loaded gateway's requests.
 */
export const SINGLES_APPEND = `WITH input AS (
  SELECT a->>'stream' AS stream, (a->>'expected')::bigint AS expected, (a->>'id')::uuid AS id, a->>'type' AS type,
    a->'data' AS data, a->'metadata' AS metadata, ord
  FROM jsonb_array_elements($1::text::jsonb) WITH ORDINALITY AS g(a, ord)),
locked AS MATERIALIZED (
  SELECT count(*) AS n FROM (SELECT pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtextextended(stream, 0) AS h FROM input ORDER BY 1) l) t)
INSERT INTO events (stream, revision, id, type, data, metadata)
SELECT i.stream, i.expected + 1, i.id, i.type, i.data, i.metadata FROM locked, input i
WHERE i.expected < 0 OR EXISTS (SELECT 1 FROM events p WHERE p.stream = i.stream AND p.revision = i.expected OFFSET 0)
ORDER BY i.ord
RETURNING stream, revision::text AS revision, tx::text AS tx, seq::text AS seq`;

/**
 * After an INSERT of a stream's append was refused (another process took the revision), its
 * next appends go straight to the group function: on a stream several processes write, the
 * INSERT would often be refused first, one round trip more each time. How many: 1 after a first
 * refusal, doubled by each refusal that follows while the stream is remembered, up to 64; each
 * append the INSERT then writes takes one doubling off, and the last forgets it. A stream written once
 * by another process (a gateway joining, a key moved between gateways) is refused once and goes
 * back to the INSERT after one append; with 64 skips for every refusal, every account a new
 * gateway had touched sent its next 64 appends, and whole groups with them, to the function.
 */
const MAX_CONTENDED_LEVEL = 6;
/** Streams remembered as contended, the oldest forgotten first. */
const MAX_CONTENDED_STREAMS = 1024;

/**
 * The append path: an append checked and serialised (prepare), then written by the
 * `eventstore_append_group` function (see schema.ts) under each stream's advisory lock.
 */
export class SqlAppender {
  /** Streams whose append's INSERT was refused: how many more of theirs skip it, and the level that set it (see MAX_CONTENDED_LEVEL). */
  private readonly contended = new Map<string, { skips: number; level: number }>();

  constructor(
    private readonly runner: SqlRunner,
    private readonly maxAppendBytes: number,
    private readonly upcast: Upcaster,
  ) {}

  /**
   * The append's statements on a transaction the caller opened and will commit (the
   * events are visible, and NOTIFY is sent, only then; in-process watchers are not called).
   * The transaction must be READ COMMITTED and must not have written anything yet: both are
   * checked. For callers that must hold an append's transaction open (the late-commit test).
   */
  async appendInTransaction(tx: SqlExecutor, stream: string, events: NewEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    const [outcome] = (await this.appendGroup(tx, [this.prepare(stream, events, expected)], { notify: true }))!;
    if (outcome instanceof Error) throw outcome;
    return outcome;
  }

  /** The events after `after` read and `decide`d on, and its events appended, under the stream's lock; the caller signals the append. */
  appendExclusive(stream: string, after: bigint, decide: (newer: RecordedEvent[]) => NewEvent[]): Promise<ExclusiveAppendResult> {
    return this.runner.transaction(
      async (tx) => {
        // The append function's own lock, taken first and held to the commit: the read below
        // sees every append that came before, and none can come after it until this one is in.
        await tx.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [stream]);
        const newer: RecordedEvent[] = [];
        for (let from = after + 1n; ;) {
          const { rows } = await tx.query<EventRow>(
            `SELECT ${COLUMNS} FROM events WHERE stream = $1 AND revision >= $2::text::bigint ORDER BY events.revision LIMIT 1000`,
            [stream, from.toString()],
          );
          for (const row of rows) newer.push(this.upcast(toRecorded(row)));
          if (rows.length < 1000) break;
          from = newer[newer.length - 1].revision + 1n;
        }
        const revision = newer.length > 0 ? newer[newer.length - 1].revision : after;
        const events = decide(newer);
        if (events.length === 0) return { revision, appended: null };
        const [outcome] = (await this.appendGroup(tx, [this.prepare(stream, events, revision < 0n ? 'no_stream' : revision)], {
          notify: this.runner.dialect === 'postgres',
        }))!;
        if (outcome instanceof Error) throw outcome;
        return { revision: outcome.nextRevision, appended: outcome };
      },
      { readCommitted: true },
    );
  }

  prepare(stream: string, events: NewEvent[], expected: ExpectedRevision): PreparedAppend {
    const checked = checkedForAppend(stream, events, this.maxAppendBytes);
    const ids = events.map((e) => e.id.toLowerCase());
    if (ids.length > 1 && new Set(ids).size !== ids.length) throw new TypeError(`Append to ${stream} repeats an event id`);
    let chars = stream.length;
    for (const e of checked) chars += e.id.length + e.type.length + e.data.length + e.metadata.length;
    return new Prepared(stream, expected, ids, chars, checked);
  }

  /**
   * A group of appends written as one INSERT (LONE_APPEND for one, SINGLES_APPEND for several)
   * where each qualifies (one event, an exact revision or a new stream, streams distinct, none
   * refused lately), instead of the group function: its JSON, loops and checks cost the server
   * about 0.12 ms for a lone append, paid twice by a request that comes alone (its hold and its
   * charge), and about 0.04 ms per append in a group of ten (`pgbench`: 0.80 against 0.42 ms).
   * Each entry: the append's result, or null where the INSERT wrote nothing for it (a revision
   * taken, an id already there, a revision the stream has not reached: the group function is to
   * answer those); null for the whole group when it does not qualify. A store that cannot be
   * reached throws.
   */
  async appendDirect(tx: SqlExecutor, group: PreparedAppend[]): Promise<Array<AppendResult | null> | null> {
    const streams = new Set<string>();
    for (const { stream, expected, single } of group) {
      if (!single || !(expected === 'no_stream' || typeof expected === 'bigint') || streams.has(stream)) return null;
      streams.add(stream);
    }
    // Every stream counted, so that a contended one's skips run down in groups as when alone.
    const contended = group.filter(({ stream }) => this.skipsContended(stream)).length > 0;
    return contended ? null : this.appendSingles(tx, group);
  }

  /** The INSERT of appends that qualify; see appendDirect. */
  private async appendSingles(tx: SqlExecutor, group: PreparedAppend[]): Promise<Array<AppendResult | null>> {
    const revisionOf = (expected: ExpectedRevision) => (expected === 'no_stream' ? '-1' : String(expected));
    let rows: Array<StoredRef & { stream?: string }>;
    try {
      if (group.length === 1) {
        const [{ stream, expected, single }] = group;
        ({ rows } = await tx.query<StoredRef>(LONE_APPEND, [stream, revisionOf(expected), single!.id, single!.type, single!.data, single!.metadata], {
          prepare: 'eventstore_append_lone',
        }));
        return [rows.length > 0 ? this.written(stream, rows[0]) : null];
      }
      const appends = group.map(
        ({ stream, expected, single }) =>
          `{"stream":${JSON.stringify(stream)},"expected":${revisionOf(expected)},"id":${JSON.stringify(single!.id)},"type":${JSON.stringify(single!.type)},"data":${single!.data},"metadata":${single!.metadata}}`,
      );
      ({ rows } = await tx.query<StoredRef & { stream: string }>(SINGLES_APPEND, [`[${appends.join(',')}]`], { prepare: 'eventstore_append_singles' }));
    } catch (err) {
      if (storeUnavailable(err)) throw err;
      if ((err as { code?: unknown }).code === '23505') for (const { stream } of group) this.markContended(stream);
      // Anything else (a serialization failure under a stricter isolation, a value refused, a
      // deadlock) the group function meets again, and answers as it always has.
      return group.map(() => null);
    }
    const byStream = new Map(rows.map((row) => [row.stream!, row]));
    return group.map(({ stream }) => {
      const row = byStream.get(stream);
      return row ? this.written(stream, row) : null;
    });
  }

  /** The result of an append the INSERT wrote as `row`; one level less to remember its stream by (see MAX_CONTENDED_LEVEL). */
  private written(stream: string, row: StoredRef): AppendResult {
    const entry = this.contended.get(stream);
    if (entry !== undefined && entry.skips === 0) {
      if (entry.level === 0) this.contended.delete(stream);
      else entry.level--;
    }
    return { nextRevision: BigInt(row.revision), position: toPosition(row.tx, row.seq) };
  }

  private skipsContended(stream: string): boolean {
    const entry = this.contended.get(stream);
    if (entry === undefined || entry.skips === 0) return false;
    entry.skips--;
    return true;
  }

  private markContended(stream: string): void {
    const level = Math.min((this.contended.get(stream)?.level ?? -1) + 1, MAX_CONTENDED_LEVEL);
    this.contended.delete(stream);
    this.contended.set(stream, { skips: 2 ** level, level });
    if (this.contended.size > MAX_CONTENDED_STREAMS) this.contended.delete(this.contended.keys().next().value as string);
  }

  /**
   * The appends themselves, one call of `eventstore_append_group`: every stream's lock FIRST
   * (a transaction id is assigned at the first write, so the append that waited gets a higher
   * xid than the one it waited for: within a stream, (tx, seq) order is revision order, and
   * global readers ordered by tx see each stream's events in revision order), then per append
   * the revision and idempotency read and the insert, and (`notify`) NOTIFY. On a transaction
   * that has written already, or is not READ COMMITTED, it throws; with `requireReadCommitted:
   * false` a statement that is not READ COMMITTED returns null instead (nothing written).
   * An append whose expectation fails gets its WrongExpectedVersionError; the others stand.
   */
  async appendGroup(
    tx: SqlExecutor,
    group: PreparedAppend[],
    { requireReadCommitted = true, notify = true } = {},
  ): Promise<Array<AppendResult | Error> | null> {
    const rows = (
      await tx.query<
        StoredRef & {
          xid_assigned: boolean;
          isolation: string;
          revision: string | null;
          existing: ExistingRef[] | null;
          appended: boolean;
          newer: EventRow[] | null;
        }
      >(
        'SELECT * FROM eventstore_append_group($1, $2, $3)',
        [`[${group.map((a) => a.json).join(',')}]`, notify && this.runner.dialect === 'postgres', MAX_NEWER_ON_CONFLICT],
        { prepare: 'eventstore_append_group3' },
      )
    ).rows;
    const [first] = rows;
    if (first.xid_assigned) throw new Error('append: the transaction has already written');
    if (first.isolation !== 'read committed') {
      if (!requireReadCommitted) return null;
      throw new Error(`append: needs READ COMMITTED, not ${first.isolation}`);
    }
    return group.map(({ stream, ids, expected }, i) => {
      const state = rows[i];
      const current = state.revision === null ? -1n : BigInt(state.revision);
      try {
        if (state.appended) return { nextRevision: current, position: toPosition(state.tx, state.seq) };
        if (state.existing && state.existing.length > 0) return this.originalResult(stream, ids, expected, current, state.existing);
        if (state.newer)
          throw new WrongExpectedVersionError(
            stream,
            expected,
            current,
            state.newer.map((row) => this.upcast(toRecorded(row))),
          );
        checkExpected(stream, expected, current);
        // Nothing to write, and the expectation holds: the stream's state.
        return { nextRevision: current, position: state.tx && state.seq ? toPosition(state.tx, state.seq) : START };
      } catch (err) {
        return err as Error;
      }
    });
  }

  /**
   * Some of the ids are already in the stream. It is a retry of an append that succeeded
   * when all of them are there, contiguous and in order, and (for an exact expected
   * revision) right after that revision; 'any', 'stream_exists' and 'no_stream' accept the
   * run wherever it is. Then the original result is returned and nothing is written.
   * Anything else is a conflict.
   */
  private originalResult(stream: string, ids: string[], expected: ExpectedRevision, current: bigint, existing: ExistingRef[]): AppendResult {
    const byId = new Map(existing.map((row) => [row.id, row]));
    const first = byId.get(ids[0]);
    const isOriginal =
      first !== undefined &&
      (typeof expected !== 'bigint' || BigInt(first.revision) === expected + 1n) &&
      ids.every((id, i) => byId.get(id)?.revision === (BigInt(first.revision) + BigInt(i)).toString());
    if (!isOriginal) throw new WrongExpectedVersionError(stream, expected, current);
    const last = byId.get(ids[ids.length - 1])!;
    return { nextRevision: BigInt(last.revision), position: toPosition(last.tx, last.seq) };
  }
}
