import type { Client } from 'pg';
import type { QueryOptions, SqlExecutor, SqlRunner, TransactionOptions } from '../sql';

/**
 * A SqlRunner in front of a real one that counts the statements matching `counted` it runs,
 * and can hold back the result of the next such statement (it has run, its answer has not
 * reached the caller yet) until the test lets it through.
 */
export class CountingSqlRunner implements SqlRunner {
  readonly dialect: SqlRunner['dialect'];
  count = 0;
  private held: { reached: () => void; release: Promise<void> } | null = null;

  constructor(
    private readonly inner: SqlRunner,
    private readonly counted: RegExp,
  ) {
    this.dialect = inner.dialect;
    if (inner.session) this.session = (name, options) => inner.session!(name, options);
  }

  session?: (applicationName: string, options?: { timeoutMs?: number }) => Client;

  /**
   * The next counted statement's result waits for `release()`; `reached` resolves once that
   * statement has run.
   */
  holdNext(): { reached: Promise<void>; release: () => void } {
    let release!: () => void;
    let reached!: () => void;
    const reachedPromise = new Promise<void>((resolve) => (reached = resolve));
    this.held = { reached, release: new Promise<void>((resolve) => (release = resolve)) };
    return { reached: reachedPromise, release };
  }

  async query<T>(sql: string, params?: unknown[], options?: QueryOptions): Promise<{ rows: T[] }> {
    if (!this.counted.test(sql)) return this.inner.query<T>(sql, params, options);
    this.count++;
    const held = this.held;
    this.held = null;
    const result = await this.inner.query<T>(sql, params, options);
    if (held) {
      held.reached();
      await held.release;
    }
    return result;
  }

  exec(sql: string): Promise<void> {
    return this.inner.exec(sql);
  }

  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>, options?: TransactionOptions): Promise<T> {
    return this.inner.transaction(fn, options);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
