import type { SqlRunner } from '@svc/platform';
import type { AppendHint } from '../port';

/** NOTIFY channel shared by every store of the database; a wake-up hint, never data. */
export const NOTIFY_CHANNEL = 'eventstore_appended';
/** The hint word of a NOTIFY on that channel sent by requestCatchUp. */
export const CATCH_UP = 'catch-up';
/** The hint word of an append's NOTIFY. */
const APPENDED = 'appended';

/**
 * The payload of a NOTIFY: the hint word, a space, then the schema of the store that sent it.
 * The channel is the database's, and stores in other schemas of it (other deployments, other
 * suites of a test run) must not be woken, nor have their runners' gathering cut short, by
 * appends and catch-up requests that are not theirs. This is its SQL, in the sender's session.
 */
export const noticePayload = (hint: AppendHint): string => `'${hint === 'catch-up' ? CATCH_UP : APPENDED} ' || coalesce(current_schema(), '')`;

/**
 * What a NOTIFY tells the store of `schema`: its hint, or null when another schema's store sent
 * it. A payload without a schema (a word alone, or empty) came from an older version, which
 * woke every store of the database: it still does.
 */
export function readNotice(payload: string | undefined, schema: string): AppendHint | null {
  const text = payload ?? '';
  const space = text.indexOf(' ');
  const word = space < 0 ? text : text.slice(0, space);
  if (space >= 0 && text.slice(space + 1) !== schema) return null;
  return word === CATCH_UP ? 'catch-up' : 'appended';
}
/**
 * At most one catch-up request leaves a process per this many milliseconds; those made meanwhile
 * go with the next. Readers that keep coming cannot then turn the runners' gathering off: a
 * runner still gathers this long at least, and a reader waits at most this long more.
 */
const CATCH_UP_GAP_MS = 20;
/**
 * At most one append NOTIFY leaves a process per this many milliseconds; the appends that
 * commit meanwhile are covered by one at the gap's end. A NOTIFY costs more than its own
 * transaction: PostgreSQL (15 here) signals every backend LISTENing in the database, on any
 * channel, and each reads the queue in a transaction of its own. With four connections
 * LISTENing on another channel, 200 NOTIFYs made 1,004 commits. Every gateway LISTENs (its
 * auth cache) and so does the worker, so N gateways' appends cost about N x (N + 2) such
 * transactions per gap: at 20 ms, four gateways made 3.4 transactions per request, at 100 ms
 * 1.5 (docs/BENCHMARKS.md, thirty-first round). Only other processes wait on this
 * wake-up: the worker's projection runners, which under load gather appends for 250 ms between
 * batches anyway, and its queues. A reader of its own write asks for a catch-up instead
 * (requestCatchUp, spaced on its own), and the first append after a quiet spell still wakes the
 * others at once.
 */
export const NOTIFY_GAP_MS = 100;

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
 * The wake-ups a store sends to other processes: after its appends commit (NOTIFY with an
 * empty payload) and when a reader asks the runners to catch up (NOTIFY with CATCH_UP). On
 * PGlite, one process, a catch-up request only tells this process's watchers (`signal`).
 */
export class AppendNotifier {
  private notifying: Promise<void> | null = null;
  private notifyAgain = false;
  private readonly notifySpacing = new Spaced(NOTIFY_GAP_MS, () => this.sendNotify());
  /** The last catch-up request sent, awaited by close(). */
  private catchingUp: Promise<void> | null = null;
  private readonly catchUpSpacing = new Spaced(CATCH_UP_GAP_MS, () => this.sendCatchUp());
  private closed = false;

  constructor(
    private readonly runner: SqlRunner,
    private readonly signal: (hint: AppendHint) => void,
  ) {}

  /**
   * On a server, a NOTIFY with its own payload: every process's watchers hear it (this one's
   * through its LISTEN connection, as for an append). PGlite has one process: its watchers are
   * told. Spaced by CATCH_UP_GAP_MS: a request within the gap is sent at its end, once for all.
   */
  requestCatchUp(): void {
    if (!this.closed) this.catchUpSpacing.request();
  }

  private sendCatchUp(): void {
    if (this.runner.dialect !== 'postgres') return this.signal('catch-up');
    // The gap spaces the requests: none is dropped for one still on its way. A lost one costs
    // its readers latency only.
    this.catchingUp = this.runner.query(`SELECT pg_notify($1, ${noticePayload('catch-up')})`, [NOTIFY_CHANNEL], { prepare: 'eventstore_catch_up' }).then(
      () => undefined,
      () => undefined,
    );
  }

  /**
   * Wakes the readers of other processes once an append has committed. Not inside the append:
   * PostgreSQL serialises the commits of notifying transactions, WAL flush included (one client
   * commits ~1,450 plain transactions/s here but ~970 notifying ones; 16 clients ~5,100 against
   * ~2,400). A NOTIFY of its own writes nothing, so its commit waits for no flush. One at a time,
   * and at most one per NOTIFY_GAP_MS: appends that commit while one is on its way, or within
   * the gap after it, are covered by the next, sent when it returns or at the gap's end.
   */
  notifyOthers(): void {
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
      .query(`SELECT pg_notify($1, ${noticePayload('appended')})`, [NOTIFY_CHANNEL], { prepare: 'eventstore_notify' })
      .then(
        () => undefined,
        () => undefined,
      )
      .finally(() => {
        this.notifying = null;
        if (this.notifyAgain) this.notifyOthers();
      });
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
  }
}
