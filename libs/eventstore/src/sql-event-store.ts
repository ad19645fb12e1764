import type { Pool, PoolClient } from 'pg';
import { PgSqlRunner, checkOut, SCHEMA_LOCK, type SqlExecutor, type SqlRunner } from '@svc/platform';
import { checkExpected, checkedForAppend, eventFilter, storeUnavailable } from './common';
import {
  asRecorded,
  DEFAULT_MAX_APPEND_BYTES,
  WrongExpectedVersionError,
  type AppendHint,
  type AppendResult,
  type EventMetadata,
  type EventStore,
  type ExclusiveAppendResult,
  type ExpectedRevision,
  type NewEvent,
  type Position,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type SubscribeOptions,
  type Upcaster,
  type Subscription,
} from './port';
import { START, decodePosition, encodePosition } from './position';

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
 * One: every append that comes while a group is on its way goes in the next. With two, the
 * first append after each dispatch took the free place alone, so half the groups were a single
 * append with a NOTIFY transaction of its own; measured in one run against two (bench
 * `--ab-only`), one group gave 1.10x the requests/s at 64 connections and 1.06x at 4, 13% less
 * CPU per request, and no worse p99. A lone append on a quiet process still goes at once.
 */
const DEFAULT_GROUPS_IN_FLIGHT = 1;
/** Bounds of one group: a statement of a few MB at most, whatever the appends weigh. */
const MAX_GROUP_APPENDS = 256;
const MAX_GROUP_CHARS = 4 * 1024 * 1024;

interface PreparedAppend {
  stream: string;
  expected: ExpectedRevision;
  ids: string[];
  /** The append as the group function reads it. */
  json: string;
}

interface QueuedAppend extends PreparedAppend {
  resolve(result: AppendResult): void;
  reject(err: unknown): void;
}

/** NOTIFY channel shared by every store of the database; a wake-up hint, never data. */
const NOTIFY_CHANNEL = 'eventstore_appended';
/** The payload of a NOTIFY on that channel sent by requestCatchUp; an append's is empty. */
const CATCH_UP = 'catch-up';
/**
 * At most one catch-up request leaves a process per this many milliseconds; those made meanwhile
 * go with the next. Readers that keep coming cannot then turn the runners' gathering off: a
 * runner still gathers this long at least, and a reader waits at most this long more.
 */
const CATCH_UP_GAP_MS = 20;
/**
 * At most one append NOTIFY leaves a process per this many milliseconds; the appends that
 * commit meanwhile are covered by one at the gap's end. Each NOTIFY is a transaction and wakes
 * every listening process: one request's hold and charge, a few milliseconds apart, sent two,
 * and the worker's runners gather appends for at least this long after a wake-up anyway.
 */
const NOTIFY_GAP_MS = 20;
/** Events a subscription reads per round trip. */
const SUBSCRIPTION_BATCH = 256;
/**
 * Delay before a lost LISTEN connection is re-established, doubled after each attempt that
 * fails up to the maximum: a server that stays down is not asked every second by every process.
 */
const LISTEN_RETRY_MS = 1000;
const LISTEN_RETRY_MAX_MS = 30_000;

// `tx` orders global reads, so it must keep growing: a logical copy (pg_dump/restore) into
// another cluster must first move that cluster's transaction counter past max(tx)
// (pg_resetwal -e/-x), or new events would sort before, and hide behind, the copied ones.
const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS events (
  stream     text        NOT NULL,
  revision   bigint      NOT NULL,
  id         uuid        NOT NULL,
  seq        bigserial   NOT NULL,
  tx         xid8        NOT NULL DEFAULT pg_current_xact_id(),
  type       text        NOT NULL,
  data       jsonb       NOT NULL,
  metadata   jsonb       NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (stream, revision),
  UNIQUE (stream, id)
)`,
  `CREATE INDEX IF NOT EXISTS events_tx_seq ON events (tx, seq)`,
  // Appends in one round trip and one transaction, one or many streams (group commit: the
  // appends that queue while others are on their way share a commit and its WAL flush). Every
  // stream's lock is taken FIRST, before anything of the group is written, in one order for
  // every group so that two groups never wait on each other in a cycle. Then each append keeps
  // its own rules (see appendGroup), as if alone. Each statement of a plpgsql function takes a
  // fresh snapshot under READ COMMITTED, so the revision read after the lock sees the append
  // that held it, and an append later in a group sees those before it in the same group.
  `CREATE OR REPLACE FUNCTION eventstore_append_group(p_appends text, p_notify boolean)
  RETURNS TABLE (xid_assigned boolean, isolation text, revision text, tx text, seq text, existing jsonb, appended boolean)
  LANGUAGE plpgsql AS $fn$
DECLARE
  v_lock bigint;
  v_append jsonb;
  v_stream text;
  v_expected text;
  v_current bigint;
  v_written boolean := false;
  -- Parsed once: the group's text is read by both loops below.
  v_appends jsonb := p_appends::jsonb;
BEGIN
  FOR v_lock IN
    SELECT DISTINCT hashtextextended(a.value->>'stream', 0) FROM jsonb_array_elements(v_appends) AS a(value) ORDER BY 1
  LOOP
    PERFORM pg_advisory_xact_lock(v_lock);
  END LOOP;
  xid_assigned := pg_current_xact_id_if_assigned() IS NOT NULL;
  isolation := current_setting('transaction_isolation');
  appended := false;
  IF xid_assigned OR isolation <> 'read committed' THEN
    RETURN NEXT;
    RETURN;
  END IF;
  FOR v_append IN SELECT a.value FROM jsonb_array_elements(v_appends) WITH ORDINALITY AS a(value, ord) ORDER BY a.ord LOOP
    v_stream := v_append->>'stream';
    v_expected := v_append->>'expected';
    revision := NULL;
    tx := NULL;
    seq := NULL;
    appended := false;
    SELECT e.revision::text, e.tx::text, e.seq::text INTO revision, tx, seq
      FROM events e WHERE e.stream = v_stream ORDER BY e.revision DESC LIMIT 1;
    -- One (stream, id) lookup per id: the LIMIT keeps the planner from flattening the lateral
    -- subquery into a join, which it may plan as a scan of every event of the stream.
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', e.id, 'revision', e.revision::text, 'tx', e.tx::text, 'seq', e.seq::text)
                              ORDER BY e.revision), '[]')
      INTO existing
      FROM jsonb_array_elements_text(v_append->'ids') AS i(id)
      CROSS JOIN LATERAL (SELECT ev.id, ev.revision, ev.tx, ev.seq FROM events ev WHERE ev.stream = v_stream AND ev.id = i.id::uuid LIMIT 1) e;
    v_current := coalesce(revision::bigint, -1);
    IF jsonb_array_length(existing) = 0 AND jsonb_array_length(v_append->'events') > 0
       AND (v_expected = 'any'
            OR (v_expected = 'no_stream' AND v_current = -1)
            OR (v_expected = 'stream_exists' AND v_current >= 0)
            OR (v_expected ~ '^-?[0-9]+$' AND v_expected::bigint = v_current)) THEN
      WITH inserted AS (
        INSERT INTO events (stream, revision, id, type, data, metadata)
        SELECT v_stream, v_current + e.ordinality, (e.value->>'id')::uuid, e.value->>'type', e.value->'data', e.value->'metadata'
          FROM jsonb_array_elements(v_append->'events') WITH ORDINALITY AS e(value, ordinality)
        RETURNING events.revision, events.tx, events.seq)
      SELECT i.revision::text, i.tx::text, i.seq::text INTO revision, tx, seq
        FROM inserted i ORDER BY i.revision DESC LIMIT 1;
      appended := true;
      v_written := true;
    END IF;
    RETURN NEXT;
  END LOOP;
  IF p_notify AND v_written THEN
    PERFORM pg_notify('${NOTIFY_CHANNEL}', '');
  END IF;
END
$fn$`,
];

/**
 * Global reads only see events whose writing transaction is older than every transaction
 * still running (`tx < xmin` of a fresh snapshot). A transaction that took its id (and its
 * `seq` numbers) early but commits late is still running while later ones are committed;
 * a reader that took "everything committed, ordered by seq" would move its checkpoint past
 * it and never see it. Below xmin nothing can appear any more, so ordering by (tx, seq) and
 * resuming strictly after the last (tx, seq) read never skips an event. The price: a long
 * transaction anywhere on the server delays (never loses) delivery until it ends.
 */
const VISIBLE_AFTER = `tx < pg_snapshot_xmin(pg_current_snapshot()) AND (tx, seq) > ($1::text::xid8, $2::text::bigint)`;

// Numbers are read as text (exact in JavaScript), under their own names: an ORDER BY must
// therefore name the table's column (`events.revision`), or it would sort the text.
const COLUMNS = `stream, revision::text AS revision, id::text AS id, type, data, metadata,
  tx::text AS tx, seq::text AS seq`;

interface EventRow {
  stream: string;
  revision: string;
  id: string;
  type: string;
  data: unknown;
  metadata: EventMetadata;
  tx: string;
  seq: string;
}

interface StoredRef {
  revision: string;
  tx: string;
  seq: string;
}

interface ExistingRef extends StoredRef {
  id: string;
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
  private readonly maxAppendBytes: number;
  private readonly pollIntervalMs: number;
  private readonly listeners = new Set<{ listener: (hint: AppendHint) => void }>();
  private readonly subscriptions = new Set<Subscription>();
  private pgListener?: PgAppendListener;
  private readonly stoppingListeners = new Set<Promise<void>>();
  private readonly maxGroupsInFlight: number;
  private readonly queued: QueuedAppend[] = [];
  private groupsInFlight = 0;
  private notifying: Promise<void> | null = null;
  private notifyAgain = false;
  private readonly notifySpacing = new Spaced(NOTIFY_GAP_MS, () => this.sendNotify());
  /** The last catch-up request sent, awaited by close(). */
  private catchingUp: Promise<void> | null = null;
  private readonly catchUpSpacing = new Spaced(CATCH_UP_GAP_MS, () => this.sendCatchUp());
  private closed = false;
  private readonly upcast: Upcaster;

  constructor(
    private readonly runner: SqlRunner,
    options: SqlEventStoreOptions = {},
  ) {
    this.name = runner.dialect;
    this.maxAppendBytes = options.maxAppendBytes ?? DEFAULT_MAX_APPEND_BYTES;
    this.pollIntervalMs = options.pollIntervalMs ?? 200;
    this.maxGroupsInFlight = options.maxGroupsInFlight ?? DEFAULT_GROUPS_IN_FLIGHT;
    this.upcast = options.upcast ?? asRecorded;
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
   * Group commit: an append is sent at once while fewer than `maxGroupsInFlight` groups are on
   * their way; otherwise it waits for one of them to return and goes with every append that
   * queued meanwhile, of any stream, in one statement and one transaction (one commit, one WAL
   * flush). A quiet process pays no wait; a busy one pays a commit per group, not per append.
   */
  append(stream: string, events: NewEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    return new Promise((resolve, reject) => {
      this.queued.push({ ...this.prepare(stream, events, expected), resolve, reject });
      this.sendGroups();
    });
  }

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

  async appendExclusive(stream: string, after: bigint, decide: (newer: RecordedEvent[]) => NewEvent[]): Promise<ExclusiveAppendResult> {
    const done = await this.runner.transaction(
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
    if (done.appended) this.signalAppend();
    return done;
  }

  private prepare(stream: string, events: NewEvent[], expected: ExpectedRevision): PreparedAppend {
    const checked = checkedForAppend(stream, events, this.maxAppendBytes);
    const ids = events.map((e) => e.id.toLowerCase());
    if (new Set(ids).size !== ids.length) throw new TypeError(`Append to ${stream} repeats an event id`);
    // Serialised once (the size rule's own text), so that a group is the concatenation of its appends.
    const payload = checked.map((e) => `{"id":${JSON.stringify(e.id)},"type":${JSON.stringify(e.type)},"data":${e.data},"metadata":${e.metadata}}`);
    const json = `{"stream":${JSON.stringify(stream)},"expected":${JSON.stringify(String(expected))},"ids":${JSON.stringify(ids)},"events":[${payload.join(',')}]}`;
    return { stream, expected, ids, json };
  }

  private sendGroups(): void {
    while (this.groupsInFlight < this.maxGroupsInFlight && this.queued.length > 0) {
      let bytes = 0;
      let size = 0;
      while (size < this.queued.length && size < MAX_GROUP_APPENDS && (size === 0 || bytes + this.queued[size].json.length <= MAX_GROUP_CHARS)) {
        bytes += this.queued[size].json.length;
        size++;
      }
      const group = this.queued.splice(0, size);
      this.groupsInFlight++;
      void this.commitGroup(group).finally(() => {
        this.groupsInFlight--;
        this.sendGroups();
      });
    }
  }

  /** Settles every append of the group; never throws. */
  private async commitGroup(group: QueuedAppend[]): Promise<void> {
    let outcomes: Array<AppendResult | Error>;
    const notifies = group.length > 1 && this.runner.dialect === 'postgres';
    try {
      // One statement, its own transaction, when the server runs statements READ COMMITTED (the
      // default). Under REPEATABLE READ or SERIALIZABLE the snapshot would be taken before the
      // lock wait and miss the append that held it: the function refuses, and the group runs
      // again in a transaction set to READ COMMITTED. A lone append wakes the other processes
      // after its commit (notifyOthers), off its latency; a group of several (a busy process)
      // wakes them from its own transaction: a NOTIFY's serialised commit weighs little beside
      // a group's, and it saves the NOTIFY transaction that would follow nearly every group.
      outcomes =
        (await this.appendGroup(this.runner, group, { requireReadCommitted: false, notify: notifies })) ??
        (await this.runner.transaction((tx) => this.appendGroup(tx, group, { notify: notifies }), { readCommitted: true }))!;
    } catch (err) {
      if (group.length > 1 && !storeUnavailable(err)) {
        // One append the database refuses (a value it cannot take) must not fail the others:
        // each goes again alone, and only the guilty one fails. A store that cannot be reached
        // fails the group as one: alone, each would only wait for the same failure.
        for (const one of group) await this.commitGroup([one]);
        return;
      }
      for (const append of group) append.reject(err);
      return;
    }
    // An empty append (no ids) only checks its expectation: nothing to signal.
    if (group.some((a) => a.ids.length > 0)) {
      this.signalAppend();
      if (!notifies) this.notifyOthers();
    }
    group.forEach((append, i) => {
      const outcome = outcomes[i];
      if (outcome instanceof Error) append.reject(outcome);
      else append.resolve(outcome);
    });
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
  private async appendGroup(
    tx: SqlExecutor,
    group: PreparedAppend[],
    { requireReadCommitted = true, notify = true } = {},
  ): Promise<Array<AppendResult | Error> | null> {
    const rows = (
      await tx.query<StoredRef & { xid_assigned: boolean; isolation: string; revision: string | null; existing: ExistingRef[] | null; appended: boolean }>(
        'SELECT * FROM eventstore_append_group($1, $2)',
        [`[${group.map((a) => a.json).join(',')}]`, notify && this.runner.dialect === 'postgres'],
        { prepare: 'eventstore_append_group' },
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

  /**
   * Catch-up and live are the same loop: read a batch after the last position, hand the
   * events over one by one, and when the batch was not full wait for a wake-up
   * (watchAppends) or the poll interval. Filtered-out events advance the position too.
   * Any error, the handler's or a read's, stops the subscription and goes to `onError`;
   * the caller resubscribes from its own checkpoint.
   */
  subscribeToAll(
    options: SubscribeOptions,
    handler: (event: RecordedEvent) => Promise<void> | void,
    onError: (err: unknown) => void = (err) => console.error('event store subscription stopped', err),
  ): Subscription {
    if (this.closed) throw new Error('SqlEventStore is closed');
    const matches = eventFilter(options.filter);
    let position = options.after ?? START;
    let stopped = false;
    let signalled = false; // an append was signalled since the last read began
    let wake: (() => void) | undefined;

    const unwatch = this.watchAppends(() => {
      signalled = true;
      wake?.();
    });
    const idle = () =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(done, this.pollIntervalMs);
        function done() {
          clearTimeout(timer);
          wake = undefined;
          resolve();
        }
        wake = done;
      });

    const run = async () => {
      while (!stopped) {
        signalled = false;
        const batch = await this.readAll({ after: position, maxCount: SUBSCRIPTION_BATCH });
        for (const event of batch) {
          if (stopped) return;
          if (matches(event)) await handler(event);
          position = event.position;
        }
        if (batch.length < SUBSCRIPTION_BATCH && !signalled && !stopped) await idle();
      }
    };
    const finished = run()
      .catch(onError)
      .finally(() => {
        stopped = true;
        unwatch();
        this.subscriptions.delete(subscription);
      });
    const subscription: Subscription = {
      stop: async () => {
        stopped = true;
        wake?.();
        await finished;
      },
    };
    this.subscriptions.add(subscription);
    return subscription;
  }

  watchAppends(listener: (hint: AppendHint) => void): () => void {
    const entry = { listener };
    this.listeners.add(entry);
    if (!this.closed && !this.pgListener && this.runner instanceof PgSqlRunner) {
      this.pgListener = new PgAppendListener(this.runner.pool, (hint) => this.signalAppend(hint));
    }
    return () => {
      if (!this.listeners.delete(entry) || this.listeners.size > 0 || !this.pgListener) return;
      const stopping = this.pgListener.stop();
      this.pgListener = undefined;
      this.stoppingListeners.add(stopping);
      void stopping.finally(() => this.stoppingListeners.delete(stopping));
    };
  }

  /**
   * On a server, a NOTIFY with its own payload: every process's watchers hear it (this one's
   * through its LISTEN connection, as for an append). PGlite has one process: its watchers are
   * told. Spaced by CATCH_UP_GAP_MS: a request within the gap is sent at its end, once for all.
   */
  requestCatchUp(): void {
    if (!this.closed) this.catchUpSpacing.request();
  }

  private sendCatchUp(): void {
    if (this.runner.dialect !== 'postgres') return this.signalAppend('catch-up');
    // The gap spaces the requests: none is dropped for one still on its way. A lost one costs
    // its readers latency only.
    this.catchingUp = this.runner.query('SELECT pg_notify($1, $2)', [NOTIFY_CHANNEL, CATCH_UP], { prepare: 'eventstore_catch_up' }).then(
      () => undefined,
      () => undefined,
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    this.catchUpSpacing.cancel();
    // An append still waiting for its NOTIFY (within the gap, or behind the one on its way) is
    // announced now: the wait was only there to spare the server, and the process will not be
    // here at its end.
    const due = this.notifySpacing.cancel();
    await this.notifying;
    if (due || this.notifyAgain) this.sendNotify();
    await this.notifying;
    await this.catchingUp;
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    this.listeners.clear();
    await this.pgListener?.stop();
    this.pgListener = undefined;
    await Promise.all(this.stoppingListeners);
  }

  /**
   * Wakes the readers of other processes once an append has committed. Not inside the append:
   * PostgreSQL serialises the commits of notifying transactions, WAL flush included (one client
   * commits ~1,450 plain transactions/s here but ~970 notifying ones; 16 clients ~5,100 against
   * ~2,400). A NOTIFY of its own writes nothing, so its commit waits for no flush. One at a time,
   * and at most one per NOTIFY_GAP_MS: appends that commit while one is on its way, or within
   * the gap after it, are covered by the next, sent when it returns or at the gap's end.
   */
  private notifyOthers(): void {
    if (this.runner.dialect !== 'postgres' || this.closed || this.notifySpacing.pending) return;
    if (this.notifying) {
      this.notifyAgain = true;
      return;
    }
    this.notifySpacing.request();
  }

  private sendNotify(): void {
    this.notifyAgain = false;
    // A lost wake-up costs latency only: readers poll as well.
    this.notifying = this.runner
      .query("SELECT pg_notify($1, '')", [NOTIFY_CHANNEL], { prepare: 'eventstore_notify' })
      .then(
        () => undefined,
        () => undefined,
      )
      .finally(() => {
        this.notifying = null;
        if (this.notifyAgain) this.notifyOthers();
      });
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

/**
 * Runs `send` at most once per `gapMs`: a request within the gap after the last send runs it
 * once at the gap's end, for every request made meanwhile.
 */
class Spaced {
  private timer: NodeJS.Timeout | undefined;
  private last = -Infinity;

  constructor(
    private readonly gapMs: number,
    private readonly send: () => void,
  ) {}

  /** A send is due at the gap's end. */
  get pending(): boolean {
    return this.timer !== undefined;
  }

  request(): void {
    if (this.timer) return;
    const wait = this.last + this.gapMs - performance.now();
    if (wait > 0) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.request();
      }, wait);
      return;
    }
    this.last = performance.now();
    this.send();
  }

  /** Drops the send due at the gap's end; true if there was one. */
  cancel(): boolean {
    if (!this.timer) return false;
    clearTimeout(this.timer);
    this.timer = undefined;
    return true;
  }
}

/**
 * One pooled connection kept in LISTEN, so appends by other processes wake this one's
 * readers. Losing it only costs latency (subscriptions keep polling), so it is re-opened
 * in the background; its timers are unref'd and `stop()` hands the connection back
 * destroyed (a LISTENing session must not return to the pool), so neither the process nor
 * `pool.end()` is kept waiting.
 */
class PgAppendListener {
  private client?: PoolClient;
  private readonly connecting: Promise<void>[] = [];
  private retry?: NodeJS.Timeout;
  /** Attempts that failed since the connection last LISTENed. */
  private failures = 0;
  private stopped = false;

  constructor(
    private readonly pool: Pool,
    private readonly onNotify: (hint: AppendHint) => void,
  ) {
    this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    await Promise.all(this.connecting);
    this.drop();
  }

  private connect(): void {
    const attempt = (async () => {
      let client: PoolClient | undefined;
      try {
        // Listening from the hand-over on (see checkOut): a connection lost before it LISTENs
        // is given back and tried again like one that could not be opened.
        let lost = false;
        client = await checkOut(this.pool, () => {
          lost = true;
          if (this.client && this.client === client) {
            this.drop();
            this.scheduleRetry();
          }
        });
        const own = client;
        own.on('notification', (n) => this.onNotify(n.payload === CATCH_UP ? 'catch-up' : 'appended'));
        await own.query(`LISTEN ${NOTIFY_CHANNEL}`);
        if (lost) throw new Error('the LISTEN connection was lost');
        if (this.stopped) {
          own.release(true);
          return;
        }
        this.client = own;
        this.failures = 0;
        // Appends committed before LISTEN took effect woke nobody: look once now.
        this.onNotify('appended');
      } catch {
        client?.release(true);
        this.scheduleRetry();
      }
    })();
    this.connecting.push(attempt);
    void attempt.finally(() => this.connecting.splice(this.connecting.indexOf(attempt), 1));
  }

  private drop(): void {
    this.client?.release(true);
    this.client = undefined;
  }

  private scheduleRetry(): void {
    if (this.stopped || this.pool.ending || this.pool.ended) return;
    const delay = Math.min(LISTEN_RETRY_MAX_MS, LISTEN_RETRY_MS * 2 ** this.failures);
    this.failures++;
    // Jittered, so the processes that lost their connections together do not return together.
    this.retry = setTimeout(() => this.connect(), delay * (0.8 + 0.4 * Math.random()));
    this.retry.unref();
  }
}

function afterParams(after: Position | undefined): [string, string] {
  if (!after) return ['0', '0']; // below every real (tx, seq): xid 0 is never assigned, seq starts at 1
  const { major, minor } = decodePosition(after);
  return [major.toString(), minor.toString()];
}

function toPosition(tx: string, seq: string): Position {
  return encodePosition(BigInt(tx), BigInt(seq));
}

function toRecorded(row: EventRow): RecordedEvent {
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
