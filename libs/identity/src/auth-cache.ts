import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Client, Notification } from 'pg';
import { START } from '@svc/eventstore';
import type { Position } from '@svc/eventstore';
import type { ProjectionCaches } from '@svc/projections';
import type { SecretMatch } from './authenticate';
import { SCHEMA_LOCK, type SqlExecutor, type SqlRunner } from '@svc/platform';
import { findKeyBySecretHash } from './read-models/identity';

/**
 * The gateway's authentication cache (ARCHITECTURE 5, step 1) and what keeps spec 5.5, "a
 * revoked key stops working immediately", true across processes with it:
 *
 * - each gateway process caches `findKeyBySecretHash` hits, and misses for MISS_TTL_MS apart from them, and serves them only
 *   while it holds a lease, a row of `auth_cache_leases` it renews every second on a connection
 *   of its own, which also LISTENs on `auth_cache_invalidate`: a session (SqlRunner.session, on
 *   DATABASE_SESSION_URL), never a statement connection that a pooler in transaction mode would
 *   hand to someone else between two statements;
 * - whoever applies the identity or provider_keys projection NOTIFYs that channel after a batch
 *   that changed them has committed, with the position both had then reached; a gateway empties
 *   its cache, then acknowledges that position in its lease row (positions compare as text);
 * - each renewal also reads the checkpoint and the projections' count of changes: a NOTIFY lost
 *   after its commit (or a rebuild that told nobody) shows as a count that moved, and the cache
 *   is emptied before the checkpoint is acknowledged;
 * - a write to those projections answers only once every unexpired lease has acknowledged its
 *   position (ProjectionRunner.waitUntilVisible). A gateway that cannot acknowledge (connection
 *   lost) stops serving from its cache before its lease expires in the database, so a write never
 *   waits longer than a lease.
 *
 * With embedded PGlite there is one process by construction (the data directory lock): the
 * runner empties the cache directly and nothing is leased, NOTIFYed or waited for.
 */

/** NOTIFY channel; the payload is `<schema> <position>`, so schemas sharing a database ignore each other. */
export const AUTH_CACHE_CHANNEL = 'auth_cache_invalidate';

/**
 * The read models a cached key lookup (`findKeyBySecretHash`) reads: the key, the account's
 * provider keys, its settings (prompt logging), the workspace's presets and the guardrails that
 * apply to the key (issue 44: a narrowed budget or allowlist holds on every gateway once its write answers).
 */
export const AUTH_CACHED_PROJECTIONS: ReadonlySet<string> = new Set(['identity', 'provider_keys', 'account_settings', 'presets', 'guardrails']);

/** Entries per process: bounded, since every key that authenticates may be cached. */
export const AUTH_CACHE_CAPACITY = 10_000;

export interface LeaseTimings {
  /** Lease length, in the database's clock (expires_at = now() + this). */
  leaseMs: number;
  /** How often the lease is renewed. */
  renewMs: number;
  /** Taken off the lease locally: the process stops serving this long before its row expires. */
  marginMs: number;
  /**
   * Delay before a lost lease connection is opened again; doubled after each attempt that fails,
   * up to `leaseMs`, so a server that stays down is not asked twice a second by every gateway.
   */
  retryMs: number;
}

export const LEASE_TIMINGS: LeaseTimings = { leaseMs: 5000, renewMs: 1000, marginMs: 1000, retryMs: 500 };

/**
 * How long a write waits for acknowledgements at most: by then a holder that did not
 * acknowledge has lost its lease, and it stopped serving from its cache before that. A holder
 * that keeps renewing has by then acknowledged them, its cache emptied first if they changed it (see renew).
 */
export const ACK_WAIT_MS = LEASE_TIMINGS.leaseMs + 1000;
const ACK_POLL_MS = 5;

const LEASES_SCHEMA = `CREATE TABLE IF NOT EXISTS auth_cache_leases (
  holder text PRIMARY KEY,
  expires_at timestamptz NOT NULL,
  acked_position text NOT NULL DEFAULT ''
)`;

/** Creates the lease table; like the read models, one process at a time (see ProjectionRunner.init). */
export async function initAuthCacheLeases(sql: SqlRunner): Promise<void> {
  await sql.transaction(async (tx) => {
    await tx.query(SCHEMA_LOCK);
    await tx.query(LEASES_SCHEMA);
  });
}

/**
 * The position up to which the cached projections have committed, read when the statement
 * runs, and their count of changes (projections schema.ts). A gateway that empties its cache after reading
 * them, or finds the count unmoved, may acknowledge the position: every change at or before it
 * was committed before the cache was emptied.
 */
const cachedCheckpoint = (names: string) =>
  `SELECT coalesce(min(position), '') AS position, coalesce(sum(changes), 0)::text AS changes FROM projection_checkpoints WHERE name = ANY(${names}::text[])`;

/** Tells every gateway's cache of the database's schema that the cached projections changed. */
export async function notifyAuthCaches(sql: SqlExecutor): Promise<void> {
  await sql.query(`SELECT pg_notify('${AUTH_CACHE_CHANNEL}', current_schema() || ' ' || c.position) FROM (${cachedCheckpoint('$1')}) c`, [
    [...AUTH_CACHED_PROJECTIONS],
  ]);
}

/**
 * Resolves true once no unexpired lease has acknowledged less than `position`; false after
 * `timeoutMs`, which ACK_WAIT_MS makes safe (see there) but slow.
 */
export async function waitForAuthCacheAcks(sql: SqlExecutor, position: Position, timeoutMs = ACK_WAIT_MS): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const { rows } = await sql.query<{ behind: boolean }>(
      'SELECT EXISTS (SELECT 1 FROM auth_cache_leases WHERE expires_at > now() AND acked_position < $1) AS behind',
      [position],
      { prepare: 'auth_cache_behind' },
    );
    if (!rows[0].behind) return true;
    if (performance.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, ACK_POLL_MS));
  }
}

/**
 * What the projection runner does for the authentication caches: on PostgreSQL, NOTIFY after a
 * change and wait for the leases' acknowledgements (whether or not this process caches: others
 * may); on PGlite, empty this process's cache, the only one there is.
 */
export function authCacheCoordination(sql: SqlRunner, local: () => AuthCache | null): ProjectionCaches {
  if (sql.dialect === 'pglite') {
    return {
      projections: AUTH_CACHED_PROJECTIONS,
      invalidate: async () => local()?.invalidate(),
      settled: async () => undefined,
    };
  }
  return {
    projections: AUTH_CACHED_PROJECTIONS,
    invalidate: () => notifyAuthCaches(sql),
    settled: async (position) => {
      if (!(await waitForAuthCacheAcks(sql, position))) {
        console.warn(
          `authentication caches: a lease did not acknowledge ${position} within ${ACK_WAIT_MS} ms; answering anyway (its holder has stopped serving or emptied its cache by now)`,
        );
      }
    },
  };
}

/**
 * `secret hash -> SecretMatch`, least recently used first out. Time rules (key expiry, a
 * rotated-out secret's valid_until) are evaluated on every request by authenticate() against
 * the injected clock, so a cached row stays right for them.
 */
export class AuthCache {
  private readonly entries = new Map<string, SecretMatch>();
  /**
   * Unknown secrets, with when they stop being remembered (monotonic ms). Apart from the hits,
   * so guessed secrets cannot push real keys out; emptied with them by every invalidation, so
   * a key created after a miss works as soon as its creation has answered.
   */
  private readonly misses = new Map<string, number>();
  /** Bumped by every invalidation: a lookup that started before one must not fill the cache after it. */
  private epoch = 0;
  private lease: AuthCacheLease | null = null;
  /** Told of every invalidation: live realtime sessions re-check their key on it (issue 41 S1). */
  private readonly listeners = new Set<() => void>();

  constructor(
    private readonly sql: SqlExecutor,
    private readonly capacity = AUTH_CACHE_CAPACITY,
  ) {}

  /**
   * On PostgreSQL the cache serves only under a lease, taken here (the first renewal is awaited,
   * successful or not); on PGlite it always serves.
   */
  static async open(sql: SqlRunner, options: { capacity?: number; timings?: LeaseTimings } = {}): Promise<AuthCache> {
    const cache = new AuthCache(sql, options.capacity);
    if (sql.dialect === 'postgres') {
      if (!sql.session) throw new Error('an authentication cache on PostgreSQL needs connections of its own (SqlRunner.session)');
      cache.lease = new AuthCacheLease(sql as Required<SqlRunner>, () => cache.invalidate(), options.timings ?? LEASE_TIMINGS);
      await cache.lease.start();
    }
    return cache;
  }

  /** The lease's holder id (its row in auth_cache_leases); null without a lease. */
  get holder(): string | null {
    return this.lease?.holder ?? null;
  }

  get size(): number {
    return this.entries.size;
  }

  has(secretHash: string): boolean {
    return this.entries.has(secretHash);
  }

  serving(): boolean {
    return this.lease === null || this.lease.valid();
  }

  async find(secretHash: string): Promise<SecretMatch | null> {
    if (!this.serving()) return findKeyBySecretHash(this.sql, secretHash);
    const hit = this.entries.get(secretHash);
    if (hit !== undefined) {
      this.entries.delete(secretHash);
      this.entries.set(secretHash, hit);
      return hit;
    }
    const missUntil = this.misses.get(secretHash);
    if (missUntil !== undefined) {
      if (performance.now() < missUntil) return null;
      this.misses.delete(secretHash);
    }
    const epoch = this.epoch;
    const match = await findKeyBySecretHash(this.sql, secretHash);
    if (epoch === this.epoch && this.serving()) {
      if (match !== null) remember(this.entries, secretHash, match, this.capacity);
      // Repeating a wrong secret costs no query for a while (issue 14.13).
      else remember(this.misses, secretHash, performance.now() + MISS_TTL_MS, this.capacity);
    }
    return match;
  }

  invalidate(): void {
    this.epoch++;
    this.entries.clear();
    this.misses.clear();
    for (const listener of this.listeners) {
      try {
        listener();
      } catch (err) {
        // A listener's fault must not stop the cache from being emptied for the others.
        console.warn(`authentication cache: an invalidation listener failed: ${(err as Error)?.message ?? String(err)}`);
      }
    }
  }

  /**
   * Calls `listener` after every invalidation (a key, provider key, setting or preset changed,
   * here or in another process, or the lease was lost); returns the unsubscribe.
   */
  onInvalidate(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    await this.lease?.stop();
    this.invalidate();
  }
}

/** How long an unknown secret is remembered as unknown, unless an invalidation comes first. */
export const MISS_TTL_MS = 30_000;

/** Inserts as the most recently used entry, evicting the least recently used past `capacity`. */
function remember<V>(map: Map<string, V>, key: string, value: V, capacity: number): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > capacity) map.delete(map.keys().next().value!);
}

/**
 * Renews (or takes) the lease and reads the cached projections' checkpoint and their count of
 * changes (projections schema.ts), in one round trip. It acknowledges nothing itself: only ACK does, always
 * after the cache was emptied or found unchanged, so a renewal the server runs late (its client
 * gave up waiting) cannot vouch for a cache.
 */
const RENEW = `WITH checkpoint AS (${cachedCheckpoint('$3')})
INSERT INTO auth_cache_leases (holder, expires_at) VALUES ($1, now() + make_interval(secs => $2))
ON CONFLICT (holder) DO UPDATE SET expires_at = EXCLUDED.expires_at
RETURNING (SELECT position FROM checkpoint) AS position, (SELECT changes FROM checkpoint) AS changes`;

const ACK = 'UPDATE auth_cache_leases SET acked_position = greatest(acked_position, $2) WHERE holder = $1';

/**
 * A process's lease on serving from its cache, renewed every `renewMs` on a connection of its
 * own that LISTENs for invalidations. Locally the lease ends `leaseMs - marginMs` after the
 * renewal was sent (measured on this process's monotonic clock, not the injected one: this is
 * about real time), before its row expires in the database, which counted from later.
 */
class AuthCacheLease {
  readonly holder = randomBytes(8).toString('hex');
  /** The connection, set while it is being opened too. */
  private client: Client | null = null;
  /** The connection once it LISTENs: only then may a renewal make the lease valid. */
  private listening: Client | null = null;
  private validUntil = -Infinity;
  /** The highest position acknowledged (or being acknowledged) on this connection. */
  private acked: Position = START;
  /** The cached projections' count of changes as the last renewal read it; null before the first. */
  private changes: string | null = null;
  private schema: string | null = null;
  private renewing = false;
  private stopped = false;
  private down = false;
  private ticker?: NodeJS.Timeout;
  private retry?: NodeJS.Timeout;
  /** Connections lost or refused since a renewal last succeeded. */
  private failures = 0;

  constructor(
    private readonly runner: Required<SqlRunner>,
    private readonly invalidate: () => void,
    private readonly timings: LeaseTimings,
  ) {}

  valid(): boolean {
    return performance.now() < this.validUntil;
  }

  async start(): Promise<void> {
    this.ticker = setInterval(() => {
      if (this.listening) void this.renew(this.listening);
    }, this.timings.renewMs);
    this.ticker.unref();
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.ticker);
    clearTimeout(this.retry);
    const client = this.client;
    this.client = this.listening = null;
    this.validUntil = -Infinity;
    if (!client) return;
    // Writers need not wait for this lease to expire.
    await client.query('DELETE FROM auth_cache_leases WHERE holder = $1', [this.holder]).catch(() => undefined);
    await client.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = this.runner.session(`svc-auth-cache ${this.holder}`, { timeoutMs: this.timings.leaseMs });
    this.client = client;
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    client.on('notification', (n) => this.notified(client, n));
    try {
      await client.connect();
      this.schema = (await client.query<{ schema: string }>('SELECT current_schema() AS schema')).rows[0].schema;
      await client.query(`LISTEN ${AUTH_CACHE_CHANNEL}`);
      if (this.client !== client) return;
      this.listening = client;
      await client.query(`DELETE FROM auth_cache_leases WHERE expires_at < now() - interval '1 hour'`);
      await this.renew(client);
    } catch (err) {
      this.lost(client, err);
    }
  }

  private async renew(client: Client): Promise<void> {
    if (this.renewing) return;
    this.renewing = true;
    const sentAt = performance.now();
    try {
      const { rows } = await client.query<{ position: Position; changes: string }>(RENEW, [
        this.holder,
        this.timings.leaseMs / 1000,
        [...AUTH_CACHED_PROJECTIONS],
      ]);
      if (this.listening !== client) return;
      const { position, changes } = rows[0];
      // Emptied when the lease starts again (first, after a lost connection, after it ran out
      // unnoticed behind a stalled renewal), and when a cached projection changed since the last
      // renewal read the count: a change whose NOTIFY was lost. Unchanged, the cache holds what
      // it would read now, so it is kept and vouches for the moved checkpoint: under load every
      // batch moves the checkpoints, and emptying on that alone emptied the cache every renewal.
      if (!this.valid() || changes !== this.changes) this.invalidate();
      this.changes = changes;
      this.ack(client, position);
      this.validUntil = sentAt + this.timings.leaseMs - this.timings.marginMs;
      if (this.down) console.warn('authentication cache: lease renewed; serving from the cache again');
      this.down = false;
      this.failures = 0;
    } catch (err) {
      this.lost(client, err);
    } finally {
      this.renewing = false;
    }
  }

  private notified(client: Client, n: Notification): void {
    if (client !== this.client || n.channel !== AUTH_CACHE_CHANNEL) return;
    const payload = n.payload ?? '';
    const space = payload.lastIndexOf(' ');
    if (space < 0 || payload.slice(0, space) !== this.schema) return;
    this.invalidate();
    this.ack(client, payload.slice(space + 1));
  }

  /** Only ever after invalidate(): an acknowledgement says the cache holds nothing older. */
  private ack(client: Client, position: Position): void {
    if (position <= this.acked) return;
    this.acked = position;
    client.query(ACK, [this.holder, position]).catch((err) => this.lost(client, err));
  }

  private lost(client: Client, err: unknown): void {
    if (client !== this.client) return;
    this.client = this.listening = null;
    this.validUntil = -Infinity;
    // An acknowledgement sent on this connection may not have reached the row: sent again.
    this.acked = START;
    this.invalidate();
    void client.end().catch(() => undefined);
    if (!this.down && !this.stopped) {
      console.warn(
        `authentication cache: lease lost (${err instanceof Error ? err.message : String(err)}); authenticating against PostgreSQL until it is renewed`,
      );
    }
    this.down = true;
    if (!this.stopped) {
      const delay = Math.min(Math.max(this.timings.retryMs, this.timings.leaseMs), this.timings.retryMs * 2 ** this.failures);
      this.failures++;
      this.retry = setTimeout(() => void this.connect(), delay);
      this.retry.unref();
    }
  }
}
