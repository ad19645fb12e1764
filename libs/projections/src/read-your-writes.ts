import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { START, type Position } from '@svc/eventstore';
import type { SqlExecutor } from '@svc/platform';
import { chooseReadSource, type ReadSource } from './read-source';
import { ProjectionTimeoutError, type ProjectionRunner } from './runner';
import { ACCOUNT_WRITES, PROJECTIONS, REPLICA_READS } from './tokens';

/** A read waits this long at most for the standby to replay the reader's own write, then asks the primary. */
export const DEFAULT_REPLICA_WAIT_MS = 200;
/** How often a waiting read looks at the standby's checkpoint again. */
const REPLICA_POLL_MS = 10;
/**
 * A standby that did not answer is left alone this long: reads go to the primary meanwhile
 * rather than each paying a connect timeout, and the log gets one warning, not one per read.
 */
const STANDBY_RETRY_MS = 5_000;

/** What reading from a hot standby takes; the runtime builds it when DATABASE_READ_URL is set. */
export interface ReplicaReads {
  /** The standby, where the projections' checkpoints are read as it has replayed them. */
  readonly replica: SqlExecutor;
  /** Asks the process applying the projections to read the log now: a reader is waiting. */
  nudge(): void;
  /** Told where each read was sent (the metrics). */
  answered(source: ReadSource): void;
  /** Default DEFAULT_REPLICA_WAIT_MS. */
  readonly maxWaitMs?: number;
  /** A monotonic clock in ms (default performance.now): the wait's bound and the pause after a standby failed read it. */
  readonly elapsed?: () => number;
}

/** The position of an account's last event in the log, whichever process wrote it. */
export interface AccountWrites {
  lastWrite(accountId: string): Promise<Position | undefined>;
}

/**
 * ARCHITECTURE section 6: a read that must see the caller's own write waits for the
 * projection to reach that write's position. This remembers, per account, the position of
 * the last write this process made for it.
 */
@Injectable()
export class ReadYourWrites {
  private readonly last = new Map<string, Position>();
  private readonly logger = new Logger('read-your-writes');
  /** On the `elapsed` clock: until when the standby is not asked. */
  private standbyDownUntil = -Infinity;

  constructor(
    @Inject(PROJECTIONS) private readonly projections: Pick<ProjectionRunner, 'waitFor'>,
    @Optional() @Inject(REPLICA_READS) private readonly replica: ReplicaReads | null = null,
    @Optional() @Inject(ACCOUNT_WRITES) private readonly log: AccountWrites | null = null,
  ) {}

  wrote(accountId: string, position: Position | undefined): void {
    if (position === undefined) return;
    const known = this.last.get(accountId);
    if (known === undefined || position > known) this.last.set(accountId, position);
  }

  /** Waits until `projection` on the primary has this process's last write for the account. */
  async settle(accountId: string, projection: string): Promise<void> {
    await this.onPrimary(this.last.get(accountId), projection);
  }

  /**
   * For a pure read of `projection`: where to read it so that the account's own writes are in
   * the answer, whichever gateway made them (the later of this process's last write for the
   * account and the account's last event in the log: a client's requests may go through several
   * gateways). The standby once its copy of the projection has reached that write (waiting up
   * to maxWaitMs for it), else the primary, after its projection has. Without a standby, always
   * the primary.
   */
  async readFrom(accountId: string, projection: string): Promise<ReadSource> {
    const needed = later(this.last.get(accountId), await this.log?.lastWrite(accountId));
    const replica = this.replica;
    if (!replica) {
      await this.onPrimary(needed, projection);
      return 'primary';
    }
    const elapsed = replica.elapsed ?? (() => performance.now());
    const started = elapsed();
    let nudged = false;
    for (;;) {
      const standbyAt = elapsed() < this.standbyDownUntil ? null : await this.standbyCheckpoint(replica, projection, elapsed);
      const source = chooseReadSource({ needed, standbyAt, waitedMs: elapsed() - started, maxWaitMs: replica.maxWaitMs ?? DEFAULT_REPLICA_WAIT_MS });
      if (source !== 'wait') {
        if (source === 'primary') await this.onPrimary(needed, projection);
        replica.answered(source);
        return source;
      }
      // The standby is behind because the projection is: the worker may be gathering appends.
      if (!nudged) replica.nudge();
      nudged = true;
      await new Promise((resolve) => setTimeout(resolve, REPLICA_POLL_MS));
    }
  }

  /** The projection's checkpoint as the standby has replayed it (what its copy holds); null when it did not answer. */
  private async standbyCheckpoint(replica: ReplicaReads, projection: string, elapsed: () => number): Promise<Position | null> {
    try {
      const { rows } = await replica.replica.query<{ position: string }>('SELECT position FROM projection_checkpoints WHERE name = $1', [projection]);
      return rows[0]?.position ?? START;
    } catch (err) {
      this.standbyDownUntil = elapsed() + STANDBY_RETRY_MS;
      this.logger.warn(
        `the standby did not answer (${err instanceof Error ? err.message : String(err)}); reading from the primary for ${STANDBY_RETRY_MS / 1000} s`,
      );
      return null;
    }
  }

  private async onPrimary(position: Position | undefined, projection: string): Promise<void> {
    if (position === undefined) return;
    try {
      await this.projections.waitFor(position, [projection]);
    } catch (err) {
      // A projection that lags (worker down) makes the answer stale, not an error.
      if (!(err instanceof ProjectionTimeoutError)) throw err;
      this.logger.warn(`${projection} did not reach ${position} in time; answering from older state`);
    }
  }
}

function later(a: Position | undefined, b: Position | undefined): Position | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return a > b ? a : b;
}
