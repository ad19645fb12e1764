import { PgSqlRunner, SCHEMA_LOCK, type SqlExecutor, type SqlRunner } from '@svc/platform';
import {
  asRecorded,
  DEFAULT_MAX_APPEND_BYTES,
  type AppendHint,
  type AppendResult,
  type EventStore,
  type ExclusiveAppendResult,
  type ExpectedRevision,
  type NewEvent,
  type Position,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type StreamSnapshot,
  type SubscribeOptions,
  type Upcaster,
  type Subscription,
} from './port';
import { START } from './position';
import { SqlAppender } from './sql/append';
import { DEFAULT_GROUPS_IN_FLIGHT, GroupCommit } from './sql/group-commit';
import { PgAppendListener } from './sql/listener';
import { AppendNotifier } from './sql/notify';
import { COLUMNS, VISIBLE_AFTER, afterParams, toPosition, toRecorded, type EventRow } from './sql/rows';
import { SCHEMA } from './sql/schema';
import { pollingSubscription } from './sql/subscription';

export interface SqlEventStoreOptions {
  /** What every read hands out for an event as recorded (see Upcaster). Default: the event as recorded. */
  upcast?: Upcaster;
  /** Appends whose events weigh more (see common.ts appendBytes) are refused. */
  maxAppendBytes?: number;
  /** How often a live subscription polls when nothing wakes it. */
  pollIntervalMs?: number;
  /** Append groups on their way at once; the appends that arrive meanwhile wait and go together. */
  maxGroupsInFlight?: number;
}

/**
 * The event store on PostgreSQL (node-postgres pool) or PGlite, one implementation for
 * both: the SQL is the same, only the wake-up of other processes differs (LISTEN/NOTIFY on a
 * server; PGlite's data directory belongs to one process, so in-process signals suffice).
 *
 * `close()` stops this store's subscriptions and its LISTEN connection; the runner belongs
 * to the caller (it is shared with the read models) and stays open.
 */
export class SqlEventStore implements EventStore {
  readonly name: 'postgres' | 'pglite';
  private readonly pollIntervalMs: number;
  private readonly listeners = new Set<{ listener: (hint: AppendHint) => void }>();
  private readonly subscriptions = new Set<Subscription>();
  private pgListener?: PgAppendListener;
  private readonly stoppingListeners = new Set<Promise<void>>();
  private readonly appender: SqlAppender;
  private readonly groups: GroupCommit;
  private readonly notifier: AppendNotifier;
  private closed = false;
  private readonly upcast: Upcaster;

  constructor(
    private readonly runner: SqlRunner,
    options: SqlEventStoreOptions = {},
  ) {
    this.name = runner.dialect;
    this.pollIntervalMs = options.pollIntervalMs ?? 200;
    this.upcast = options.upcast ?? asRecorded;
    this.appender = new SqlAppender(runner, options.maxAppendBytes ?? DEFAULT_MAX_APPEND_BYTES, this.upcast);
    this.notifier = new AppendNotifier(runner, (hint) => this.signalAppend(hint));
    this.groups = new GroupCommit(runner, this.appender, options.maxGroupsInFlight ?? DEFAULT_GROUPS_IN_FLIGHT, (notified) => {
      this.signalAppend();
      if (!notified) this.notifier.notifyOthers();
    });
  }

  async init(): Promise<void> {
    // Two processes starting together could both attempt CREATE ... IF NOT EXISTS and one
    // would fail on the catalog's unique index; a transaction-scoped lock serialises them.
    await this.runner.transaction(async (tx) => {
      await tx.query(SCHEMA_LOCK);
      for (const statement of SCHEMA) await tx.query(statement);
    });
  }

  /**
   * Empty `events`: the expectation is checked and the stream's current state returned
   * ({ nextRevision: -1n, position: START } for a missing stream); nothing is written. This
   * gives callers a cheap "assert the stream is still at revision N".
   *
   * Appends go by group commit (see GroupCommit): a quiet process pays no wait; a busy one pays
   * a commit per group, not per append.
   */
  append(stream: string, events: NewEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    return this.groups.append(stream, events, expected);
  }

  /** See SqlAppender.appendInTransaction. */
  appendInTransaction(tx: SqlExecutor, stream: string, events: NewEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    return this.appender.appendInTransaction(tx, stream, events, expected);
  }

  async appendExclusive(stream: string, after: bigint, decide: (newer: RecordedEvent[]) => NewEvent[]): Promise<ExclusiveAppendResult> {
    const done = await this.appender.appendExclusive(stream, after, decide);
    if (done.appended) this.signalAppend();
    return done;
  }

  async readStream(stream: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const backwards = options.direction === 'backwards';
    const from = options.fromRevision === undefined ? '' : `AND revision ${backwards ? '<=' : '>='} $3::text::bigint`;
    const { rows } = await this.runner.query<EventRow>(
      `SELECT ${COLUMNS} FROM events WHERE stream = $1 ${from}
        ORDER BY events.revision ${backwards ? 'DESC' : 'ASC'} LIMIT $2`,
      options.fromRevision === undefined ? [stream, options.maxCount ?? null] : [stream, options.maxCount ?? null, options.fromRevision.toString()],
    );
    return rows.map((row) => this.upcast(toRecorded(row)));
  }

  async readSnapshot(stream: string): Promise<StreamSnapshot | null> {
    const { rows } = await this.runner.query<{ revision: string; event_id: string; version: string; state: string }>(
      'SELECT revision::text AS revision, event_id::text AS event_id, version, state::text AS state FROM stream_snapshots WHERE stream = $1',
      [stream],
    );
    if (rows.length === 0) return null;
    const [row] = rows;
    return { revision: BigInt(row.revision), eventId: row.event_id, version: row.version, state: JSON.parse(row.state) as unknown };
  }

  async writeSnapshot(stream: string, snapshot: StreamSnapshot): Promise<void> {
    // Another version replaces the kept one whatever its revision: after an upgrade the old
    // shape is of no use to the processes that write, and one a rolling upgrade's older
    // processes write back is replaced again by the next newer one.
    await this.runner.query(
      `INSERT INTO stream_snapshots (stream, revision, event_id, version, state) VALUES ($1, $2::text::bigint, $3::text::uuid, $4, $5::text::json)
       ON CONFLICT (stream) DO UPDATE
       SET revision = EXCLUDED.revision, event_id = EXCLUDED.event_id, version = EXCLUDED.version, state = EXCLUDED.state, written_at = now()
       WHERE stream_snapshots.revision < EXCLUDED.revision OR stream_snapshots.version <> EXCLUDED.version`,
      [stream, snapshot.revision.toString(), snapshot.eventId, snapshot.version, JSON.stringify(snapshot.state)],
    );
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const { rows } = await this.runner.query<EventRow>(
      `SELECT ${COLUMNS} FROM events WHERE ${VISIBLE_AFTER} ORDER BY events.tx, events.seq LIMIT $3`,
      [...afterParams(options.after), options.maxCount ?? null],
      { prepare: 'eventstore_read_all' },
    );
    return rows.map((row) => this.upcast(toRecorded(row)));
  }

  async countEventsAfter(after?: Position): Promise<number> {
    const { rows } = await this.runner.query<{ n: string }>(`SELECT count(*)::text AS n FROM events WHERE ${VISIBLE_AFTER}`, afterParams(after));
    return Number(rows[0].n);
  }

  async lastCommittedPosition(): Promise<Position> {
    // Every committed row, visible to global reads or not: the index on (tx, seq) read backwards.
    const { rows } = await this.runner.query<{ tx: string; seq: string }>(
      'SELECT tx::text AS tx, seq::text AS seq FROM events ORDER BY tx DESC, seq DESC LIMIT 1',
    );
    return rows.length === 0 ? START : toPosition(rows[0].tx, rows[0].seq);
  }

  /** See pollingSubscription. */
  subscribeToAll(
    options: SubscribeOptions,
    handler: (event: RecordedEvent) => Promise<void> | void,
    onError: (err: unknown) => void = (err) => console.error('event store subscription stopped', err),
  ): Subscription {
    if (this.closed) throw new Error('SqlEventStore is closed');
    return pollingSubscription(this, this.pollIntervalMs, this.subscriptions, options, handler, onError);
  }

  watchAppends(listener: (hint: AppendHint) => void): () => void {
    const entry = { listener };
    this.listeners.add(entry);
    if (!this.closed && !this.pgListener && this.runner instanceof PgSqlRunner) {
      this.pgListener = new PgAppendListener(this.runner.sessions, (hint) => this.signalAppend(hint));
    }
    return () => {
      if (!this.listeners.delete(entry) || this.listeners.size > 0 || !this.pgListener) return;
      const stopping = this.pgListener.stop();
      this.pgListener = undefined;
      this.stoppingListeners.add(stopping);
      void stopping.finally(() => this.stoppingListeners.delete(stopping));
    };
  }

  /** See AppendNotifier.requestCatchUp. */
  requestCatchUp(): void {
    this.notifier.requestCatchUp();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.notifier.close();
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    this.listeners.clear();
    await this.pgListener?.stop();
    this.pgListener = undefined;
    await Promise.all(this.stoppingListeners);
  }

  private signalAppend(hint: AppendHint = 'appended'): void {
    for (const { listener } of this.listeners) {
      try {
        listener(hint);
      } catch {
        // A watcher is only told to look again; its failure is not the append's concern.
      }
    }
  }
}
