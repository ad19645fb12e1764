import type { PGlite, Transaction } from '@electric-sql/pglite';
import { Client, Pool, type PoolClient, type PoolConfig } from 'pg';
import { isConnectionFailure } from './errors';

/**
 * One SQL interface over node-postgres and PGlite, so the event store and the read models
 * run the same statements on a real server and on the embedded default.
 */
export interface SqlExecutor {
  /**
   * `prepare`: a name for a statement run on every request; PostgreSQL then parses and plans
   * it once per connection. Only for fixed statement texts: each name is kept per connection.
   */
  query<T = Record<string, unknown>>(sql: string, params?: unknown[], options?: QueryOptions): Promise<{ rows: T[] }>;
}

export interface QueryOptions {
  prepare?: string;
}

export interface SqlRunner extends SqlExecutor {
  readonly dialect: 'postgres' | 'pglite';
  /** Runs several statements separated by semicolons (schema DDL); no parameters. */
  exec(sql: string): Promise<void>;
  /** `readCommitted`: whatever the server's or role's default isolation, this transaction is READ COMMITTED. */
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>, options?: TransactionOptions): Promise<T>;
  close(): Promise<void>;
  /** PostgreSQL only: see PgSqlRunner.session. */
  session?(applicationName: string, options?: { timeoutMs?: number }): Client;
}

// int8 and numeric come back as strings from both drivers: money and revisions are bigint,
// and a JavaScript number would silently round them.
const INT8 = 20;
const NUMERIC = 1700;

function pgQuery(text: string, values: unknown[] | undefined, options: QueryOptions, named: boolean) {
  return { text, values: values as unknown[], ...(named && options.prepare ? { name: options.prepare } : {}) };
}

export interface PgSqlRunnerOptions {
  /**
   * Where the connections that must stay sessions go (LISTEN, the authentication cache's lease):
   * by default the statements' server. Behind a pooler in transaction mode (PgBouncer) the
   * statements go through it and these past it, straight to PostgreSQL.
   */
  session?: PoolConfig;
  /**
   * Whether `prepare` names its statements (default true). A named statement lives in one
   * server session: behind a pooler in transaction mode the next use may land on another,
   * where it does not exist (or was prepared by someone else), so there each is parsed anew.
   */
  namedStatements?: boolean;
}

export interface TransactionOptions {
  readCommitted?: boolean;
  /**
   * The commit returns before its WAL is flushed: a server crash may lose the last few
   * milliseconds of such transactions, never half of one. Only for data rebuilt from elsewhere.
   */
  asyncCommit?: boolean;
}

/** Statement connections per process unless the pool's `max` says otherwise (DATABASE_POOL_MAX). */
export const DEFAULT_POOL_MAX = 10;

export class PgSqlRunner implements SqlRunner {
  readonly dialect = 'postgres' as const;
  private constructor(
    readonly pool: Pool,
    /**
     * Connections handed out for good, each a session of its own (the event store's LISTEN):
     * outside `pool`, so they never take a statement connection, and destroyed when given back.
     */
    readonly sessions: Pool,
    private readonly sessionConfig: PoolConfig,
    private readonly namedStatements: boolean,
  ) {}

  static async connect(config: PoolConfig, options: PgSqlRunnerOptions = {}): Promise<PgSqlRunner> {
    const pool = new Pool({ max: DEFAULT_POOL_MAX, ...config });
    const sessionConfig = options.session ?? config;
    // Bounded only so that a leak shows; a process holds one or two.
    const sessions = new Pool({ ...sessionConfig, max: 10 });
    // An idle client that loses its connection must not crash the process.
    pool.on('error', () => undefined);
    sessions.on('error', () => undefined);
    return new PgSqlRunner(pool, sessions, sessionConfig, options.namedStatements ?? true);
  }

  /**
   * A connection outside the pool, on the session server and settings (search_path included),
   * not yet connected: for a session that stays open, such as one that LISTENs. The application
   * name tells it apart in pg_stat_activity; `timeoutMs` bounds the connect and each query.
   */
  session(applicationName: string, options: { timeoutMs?: number } = {}): Client {
    return new Client({
      ...this.sessionConfig,
      application_name: applicationName,
      query_timeout: options.timeoutMs,
      connectionTimeoutMillis: options.timeoutMs,
    });
  }

  /**
   * The database and schema a statement connection and a session reach. They must be the same:
   * a NOTIFY sent through one is heard on the other only in the same database, and the
   * authentication cache ignores one for another schema.
   */
  async targets(): Promise<{ statements: string; session: string }> {
    const sql = `SELECT current_database() || '.' || current_schema() AS target`;
    const client = this.session('svc-target-check', { timeoutMs: 10_000 });
    client.on('error', () => undefined);
    await client.connect();
    try {
      const statements = (await this.pool.query<{ target: string }>(sql)).rows[0].target;
      const session = (await client.query<{ target: string }>(sql)).rows[0].target;
      return { statements, session };
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  async query<T>(sql: string, params?: unknown[], options: QueryOptions = {}): Promise<{ rows: T[] }> {
    const r = await this.pool.query(pgQuery(sql, params, options, this.namedStatements));
    return { rows: r.rows as T[] };
  }

  async exec(sql: string): Promise<void> {
    await this.pool.query(sql);
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    // A checked-out client whose connection dies emits 'error' on itself, not on the pool: with
    // no listener that is an uncaught exception, and the process (the worker) dies with it.
    // The query in flight fails on its own; the client is then destroyed, not pooled again.
    let broken: Error | undefined;
    const onError = (err: Error) => {
      broken = err;
    };
    const client = await checkOut(this.pool, onError);
    try {
      // One round trip: the isolation goes with BEGIN rather than in a statement of its own.
      const begin = options.readCommitted ? 'BEGIN ISOLATION LEVEL READ COMMITTED' : 'BEGIN';
      // Parameterless statements: the simple protocol sends both in one round trip.
      await client.query(options.asyncCommit ? `${begin}; SET LOCAL synchronous_commit = off` : begin);
      const result = await fn({
        query: async <R>(sql: string, params?: unknown[], queryOptions: QueryOptions = {}) => ({
          rows: (await client.query(pgQuery(sql, params, queryOptions, this.namedStatements))).rows as R[],
        }),
      });
      await client.query('COMMIT');
      return result;
    } catch (err) {
      if (isConnectionFailure(err)) broken ??= err as Error;
      if (!broken) await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      // A broken client keeps the listener: it may still report its end while being destroyed.
      if (!broken) client.off('error', onError);
      client.release(broken);
    }
  }

  async close(): Promise<void> {
    await Promise.all([this.pool.end(), this.sessions.end()]);
  }
}

/**
 * A pooled client with `onError` already listening for its errors. Not `await pool.connect()`:
 * its promise hands the client over a microtask after the pool stopped listening, and a server
 * message read in the same chunk as the previous answer (the FATAL of a terminated backend right
 * behind a ReadyForQuery) is emitted in between, on a client nobody listens to: an uncaught
 * exception. The callback runs inside the pool's hand-over, before any further input is parsed.
 */
export function checkOut(pool: Pool, onError: (err: Error) => void): Promise<PoolClient> {
  return new Promise((resolve, reject) => {
    pool.connect((err, client) => {
      if (err || !client) return reject(err ?? new Error('pool.connect returned no client'));
      client.on('error', onError);
      resolve(client);
    });
  });
}

export class PgliteSqlRunner implements SqlRunner {
  readonly dialect = 'pglite' as const;
  private constructor(readonly db: PGlite) {}

  /**
   * `dataDir` undefined means in memory. `image`, a cluster as PGlite's dumpDataDir() wrote it,
   * is started from instead of a new one: initdb takes seconds under WASM, loading an image a
   * fraction of that.
   */
  static async open(dataDir?: string, image?: Blob): Promise<PgliteSqlRunner> {
    const keepText = (x: string) => x;
    // Required here: half a megabyte of WASM glue that a process on PostgreSQL never needs.
    const { PGlite } = require('@electric-sql/pglite') as typeof import('@electric-sql/pglite');
    const db = await PGlite.create({ dataDir, loadDataDir: image, parsers: { [INT8]: keepText, [NUMERIC]: keepText } });
    return new PgliteSqlRunner(db);
  }

  async query<T>(sql: string, params?: unknown[]): Promise<{ rows: T[] }> {
    const r = await this.db.query<T>(sql, params as unknown[]);
    return { rows: r.rows };
  }

  async exec(sql: string): Promise<void> {
    await this.db.exec(sql);
  }

  // PGlite has one backend session: a statement issued on `db` while a transaction is open
  // waits for it, so everything inside `fn` must go through `tx`.
  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    return this.db.transaction(async (tx: Transaction) => {
      if (options.readCommitted) await tx.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
      if (options.asyncCommit) await tx.query('SET LOCAL synchronous_commit = off');
      return fn({
        query: async <R>(sql: string, params?: unknown[]) => ({
          rows: (await tx.query<R>(sql, params as unknown[])).rows,
        }),
      });
    });
  }

  async close(): Promise<void> {
    await this.db.close();
  }
}
