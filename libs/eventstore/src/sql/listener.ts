import type { Pool, PoolClient } from 'pg';
import { checkOut } from '@svc/platform';
import type { AppendHint } from '../port';
import { NOTIFY_CHANNEL, readNotice } from './notify';

/**
 * Delay before a lost LISTEN connection is re-established, doubled after each attempt that
 * fails up to the maximum: a server that stays down is not asked every second by every process.
 */
const LISTEN_RETRY_MS = 1000;
const LISTEN_RETRY_MAX_MS = 30_000;

/**
 * One connection kept in LISTEN, so appends by other processes wake this one's readers. It is
 * taken from the runner's session pool (PgSqlRunner.sessions, DATABASE_SESSION_URL), never from
 * the statements' pool: behind a pooler in transaction mode a LISTEN there would be made on
 * whatever server connection ran it and hear nothing once that went to someone else.
 * Losing it only costs latency (subscriptions keep polling), so it is re-opened
 * in the background; its timers are unref'd and `stop()` hands the connection back
 * destroyed (a LISTENing session must not return to the pool), so neither the process nor
 * `pool.end()` is kept waiting.
 */
export class PgAppendListener {
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
        const { rows } = await own.query<{ schema: string }>("SELECT coalesce(current_schema(), '') AS schema");
        const schema = rows[0].schema;
        own.on('notification', (n) => {
          const hint = n.channel === NOTIFY_CHANNEL ? readNotice(n.payload, schema) : null;
          if (hint) this.onNotify(hint);
        });
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
