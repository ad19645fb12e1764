import type { Clock } from '../clock';

/*
 * Issue 41 E: a concurrency slot is a short lease its process renews while the request lives,
 * not one long lease sized for the longest request. A slot whose holder is gone (a crashed
 * process, a release lost in a Redis freeze, an admission whose reply never came) then frees
 * itself within one short lease instead of the request's longest life (minutes).
 */

/** A held concurrency slot; the lease behind it is renewed until it is released. */
export interface Slot {
  release(): Promise<void>;
}

export interface SlotLeaseTimings {
  /** How long a slot outlives its holder's last renewal. */
  leaseMs: number;
  /** How often a process renews every slot it holds, in one batch. Well under `leaseMs`, so a late or lost renewal is survived. */
  renewMs: number;
}

/** Spec 8 concurrency: the values docs/api/endpoints.md documents (rate limits). */
export const SLOT_LEASE: SlotLeaseTimings = { leaseMs: 30_000, renewMs: 10_000 };

/** A failed release is tried again after 250 ms, doubling up to 4 s, until it lands or its lease is over. */
const RELEASE_RETRY_FIRST_MS = 250;
const RELEASE_RETRY_MAX_MS = 4_000;
/** Releases waiting for the store to come back; beyond this the oldest are left to their lease. */
const MAX_PENDING_RELEASES = 10_000;

export interface LeaseRef {
  /** The store's key of the bucket (Redis: the slots' sorted set; memory: the bucket). */
  key: string;
  id: string;
}

export interface RenewedLease extends LeaseRef {
  /** The lease's new end (ms, injected clock). */
  until: number;
}

/** Where leases live: the slots' sorted sets in Redis, or the process's own map. */
export interface LeaseBackend {
  /**
   * Moves each lease still held at `now` to its `until` in one call; a lease that lapsed or was
   * released stays gone (a renewal never revives a slot someone else may have taken since).
   * Replies, in order, whether each was still held.
   */
  renew(leases: readonly RenewedLease[], now: number): Promise<boolean[]>;
  /** Removes every lease given, in one call; one already gone is no error. */
  release(leases: readonly LeaseRef[]): Promise<void>;
}

interface Held extends LeaseRef {
  /** The latest lease end sent to the store. */
  until: number;
  /** When renewals stop: the longest the request may hold it. */
  lastUntil: number;
}

interface Releasing extends LeaseRef {
  /** Past this the lease is over anyway: nothing left to release. */
  until: number;
}

interface ReleaseTurn {
  entries: Releasing[];
  /** Settles once the store has answered the turn's one call. */
  landed: Promise<void>;
}

/**
 * The slots one process holds, on one store: it renews them all in one batch every
 * `renewMs` while their requests live, and keeps retrying a release the store did not take
 * until it lands or the lease it frees would have ended anyway. Lease ends read the injected
 * clock; only the pacing of renewals and retries uses real timers.
 */
export class SlotLeases {
  private readonly held = new Map<string, Held>();
  private readonly releasing = new Map<string, Releasing>();
  private renewTimer: NodeJS.Timeout | undefined;
  private renewing: Promise<void> | null = null;
  private retryTimer: NodeJS.Timeout | undefined;
  private retries = 0;
  private closed = false;
  /** The releases asked for in this turn of the event loop, sent together once it is over. */
  private turn: ReleaseTurn | null = null;

  constructor(
    private readonly backend: LeaseBackend,
    private readonly clock: Clock,
    readonly timings: SlotLeaseTimings = SLOT_LEASE,
  ) {
    if (!(timings.leaseMs > 0 && timings.renewMs > 0 && timings.renewMs < timings.leaseMs)) {
      throw new RangeError(`slot lease timings must have 0 < renewMs < leaseMs, got ${JSON.stringify(timings)}`);
    }
  }

  /** The first lease end of a slot granted at `now` for at most `maxHoldMs`. */
  firstUntil(now: number, maxHoldMs: number): number {
    return now + Math.min(this.timings.leaseMs, maxHoldMs);
  }

  /** Slots held and renewed, for tests and metrics. */
  get size(): number {
    return this.held.size;
  }

  /** Releases the store has not taken yet. */
  get pendingReleases(): number {
    return this.releasing.size;
  }

  /** A slot the store granted at `now`: renewed from now on until released, or for `maxHoldMs` at most. */
  hold(ref: LeaseRef, now: number, maxHoldMs: number): Slot {
    const entry: Held = { ...ref, until: this.firstUntil(now, maxHoldMs), lastUntil: now + maxHoldMs };
    this.held.set(ref.id, entry);
    this.startRenewing();
    return {
      release: async () => {
        if (this.held.get(ref.id) !== entry) return;
        this.held.delete(ref.id);
        await this.releaseThisTurn({ ...ref, until: entry.until });
      },
    };
  }

  /**
   * The releases of one turn of the event loop (the requests that ended together) go to the
   * store in one call, after the turn's I/O: under load several requests end per turn, and each
   * call is a script Redis runs and a reply this process reads. The store's socket is corked
   * until a turn's end anyway (TurnBatchedRedis): a release leaves at most one turn later than
   * it did alone, and still ahead of every command of a later turn (a client's next request
   * comes in one). A call that fails leaves each of its releases to the retries.
   */
  private releaseThisTurn(entry: Releasing): Promise<void> {
    if (!this.turn) {
      const entries: Releasing[] = [];
      const landed = new Promise<void>((resolve, reject) => {
        setImmediate(() => {
          this.turn = null;
          this.backend.release(entries.map(({ key, id }) => ({ key, id }))).then(resolve, (err: unknown) => {
            for (const failed of entries) this.retryRelease(failed);
            reject(err);
          });
        });
      });
      this.turn = { entries, landed };
    }
    this.turn.entries.push(entry);
    return this.turn.landed;
  }

  /**
   * A grant whose answer never came (timed out while Redis was frozen, say): the store may still
   * run it later and hold the slot with nobody to release it. Sent now, the release lands right
   * after it on the same connection; retried until the lease would have ended.
   */
  lost(ref: LeaseRef, until: number): void {
    const entry: Releasing = { ...ref, until };
    this.remember(entry);
    this.backend.release([ref]).then(
      () => {
        if (this.releasing.get(ref.id) === entry) this.releasing.delete(ref.id);
      },
      () => this.scheduleRetry(this.retryDelayMs()),
    );
  }

  /** Renews every held slot now, in one call to the store (the timer does this every `renewMs`). */
  async renew(): Promise<void> {
    while (this.renewing) await this.renewing.catch(() => undefined);
    this.renewing = this.renewHeld().finally(() => {
      this.renewing = null;
    });
    return this.renewing;
  }

  private async renewHeld(): Promise<void> {
    const now = this.clock.now().getTime();
    const batch: Held[] = [];
    for (const entry of this.held.values()) {
      // Its longest life is over: the store lets it lapse, a later release finds nothing.
      if (entry.lastUntil <= now) {
        this.held.delete(entry.id);
        continue;
      }
      entry.until = Math.min(now + this.timings.leaseMs, entry.lastUntil);
      batch.push(entry);
    }
    if (batch.length === 0) return;
    const stillHeld = await this.backend.renew(
      batch.map(({ key, id, until }) => ({ key, id, until })),
      now,
    );
    // Lapsed meanwhile (a store outage longer than the lease): not renewed again, not retaken.
    stillHeld.forEach((kept, i) => {
      if (!kept && this.held.get(batch[i].id) === batch[i]) this.held.delete(batch[i].id);
    });
  }

  private startRenewing(): void {
    if (this.renewTimer || this.closed) return;
    this.renewTimer = setInterval(() => {
      if (this.held.size === 0) {
        clearInterval(this.renewTimer);
        this.renewTimer = undefined;
        return;
      }
      // A failed renewal is retried by the next tick; the lease outlasts two of them.
      if (!this.renewing) void this.renew().catch(() => undefined);
    }, this.timings.renewMs);
    this.renewTimer.unref();
  }

  private remember(entry: Releasing): void {
    this.releasing.set(entry.id, entry);
    if (this.releasing.size > MAX_PENDING_RELEASES) this.releasing.delete(this.releasing.keys().next().value!);
  }

  private retryRelease(entry: Releasing): void {
    this.remember(entry);
    this.scheduleRetry(this.retryDelayMs());
  }

  private retryDelayMs(): number {
    return Math.min(RELEASE_RETRY_FIRST_MS * 2 ** this.retries, RELEASE_RETRY_MAX_MS);
  }

  private scheduleRetry(delayMs: number): void {
    if (this.retryTimer || this.closed) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.retryReleases();
    }, delayMs);
    this.retryTimer.unref();
  }

  /** Sends every pending release in one call; what the store did not take is tried again later. */
  async retryReleases(): Promise<void> {
    const now = this.clock.now().getTime();
    for (const [id, entry] of this.releasing) if (entry.until <= now) this.releasing.delete(id);
    const batch = [...this.releasing.values()];
    if (batch.length === 0) {
      this.retries = 0;
      return;
    }
    try {
      await this.backend.release(batch.map(({ key, id }) => ({ key, id })));
      for (const entry of batch) if (this.releasing.get(entry.id) === entry) this.releasing.delete(entry.id);
      this.retries = 0;
    } catch {
      this.retries++;
    }
    if (this.releasing.size > 0) this.scheduleRetry(this.retryDelayMs());
  }

  /** Stops the timers after one last try at the pending releases (the process is going away). */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.renewTimer);
    clearTimeout(this.retryTimer);
    this.renewTimer = this.retryTimer = undefined;
    // This turn's releases leave before the store's connection closes; a failed one is retried below.
    await this.turn?.landed.catch(() => undefined);
    if (this.releasing.size > 0) await this.retryReleases().catch(() => undefined);
  }
}
