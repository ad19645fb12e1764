import { randomUUID } from 'node:crypto';
import calculateSlot from 'cluster-key-slot';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Clock } from '../clock';
import { guarded, luaScript, type RedisClient, runScript, storageBoundMs } from './redis';
import { type LeaseBackend, type LeaseRef, type RenewedLease, type Slot, SLOT_LEASE, SlotLeases, type SlotLeaseTimings } from './slot-leases';

export type { Slot };

export interface WindowResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** ms until the window frees */
  resetMs: number;
}

export interface RateLimiter {
  /** Counts `points` in `bucket`'s one-minute window if that keeps it within `limit`; otherwise refuses and counts nothing. */
  consume(bucket: string, limit: number, points?: number): Promise<WindowResult>;
  /**
   * Counts `points` unconditionally (tokens used, learnt after the call). `allowed` tells whether
   * the window is still within `limit` after counting.
   */
  record(bucket: string, limit: number, points: number): Promise<WindowResult>;
  /** The window as it stands; allowed = used < limit. */
  peek(bucket: string, limit: number): Promise<WindowResult>;
}

export interface SlotResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  slot: Slot | null;
}

export interface ConcurrencyLimiter {
  /**
   * Takes one of `limit` slots of `bucket`, held until released while this process renews its
   * short lease (slot-leases.ts), and for `maxHoldMs` at most: a holder that is gone frees it
   * within one lease, a request whose release never comes within `maxHoldMs`.
   */
  acquire(bucket: string, limit: number, maxHoldMs: number): Promise<SlotResult>;
}

export const WINDOW_SECONDS = 60;
const WINDOW_MS = WINDOW_SECONDS * 1000;
/** Tells our increment script (below) to count without a cap: `record` and `peek` use it. */
const UNCAPPED = -1;

export function checkLimit(limit: number): void {
  if (!Number.isSafeInteger(limit) || limit < 0) throw new RangeError(`limit must be a non-negative integer, got ${limit}`);
}

export function checkPoints(points: number, min: number): void {
  if (!Number.isSafeInteger(points) || points < min) throw new RangeError(`points must be an integer >= ${min}, got ${points}`);
}

export function windowResult(allowed: boolean, limit: number, used: number, resetMs: number): WindowResult {
  return {
    allowed,
    limit,
    remaining: Math.max(limit - used, 0),
    resetMs: Math.min(Math.max(Math.round(resetMs), 0), WINDOW_MS),
  };
}

/** A window the library no longer holds (or holds past its end) is an empty one. */
function usedOf(res: RateLimiterRes | null): { used: number; resetMs: number } {
  if (res === null || res.msBeforeNext <= 0) return { used: 0, resetMs: 0 };
  return { used: res.consumedPoints, resetMs: res.msBeforeNext };
}

/** The request that can never fit still gets a finite "try later": a whole window. */
export function refusedResetMs(resetMs: number): number {
  return resetMs > 0 ? resetMs : WINDOW_MS;
}

/**
 * The library's increment script, made conditional: with a cap (the instance's `points`, ARGV[3])
 * an increment that would pass it is not applied, and the reply carries what the count would
 * have been, so the library still rejects it. One atomic step: no count goes up and comes back
 * down, so a refused request never makes a concurrent one fail, and exactly `limit` points pass
 * however many gateways race. The client-wide command `rlflxIncr` is defined by every instance,
 * all with this script, so `record` (penalty on an UNCAPPED instance) counts unconditionally.
 */
const CONDITIONAL_INCR_LUA = `
local points = tonumber(ARGV[1])
local cap = tonumber(ARGV[3])
if cap >= 0 and points > 0 then
  local used = tonumber(redis.call('get', KEYS[1]) or '0')
  if used + points > cap then
    return {used + points, redis.call('pttl', KEYS[1])}
  end
end
redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX')
local consumed = redis.call('incrby', KEYS[1], points)
local ttl = redis.call('pttl', KEYS[1])
if ttl == -1 then
  redis.call('expire', KEYS[1], ARGV[2])
  ttl = 1000 * ARGV[2]
end
return {consumed, ttl}
`;

/**
 * A bucket is `<kind>:<subject>` (`rpm:key_abc`, `authfail:10.0.0.1`); in its Redis keys the
 * subject is the hash tag (`{key_abc}:rpm`), so the windows and slots of one subject share one
 * hash slot of a Redis Cluster, and admission's script, which reads and counts three of them,
 * runs on the one node that holds them all. A bucket without a kind is its own subject.
 */
export function bucketKey(bucket: string): string {
  const at = bucket.indexOf(':');
  return at < 0 ? `{${bucket}}` : `{${bucket.slice(at + 1)}}:${bucket.slice(0, at)}`;
}

/** The rate limiter's keys: rate-limiter-flexible writes `<its keyPrefix>:<key>`. */
function rateKeyPrefix(keyPrefix: string): string {
  return `${keyPrefix}:rl`;
}

/** The Redis key of `bucket`'s window, for scripts that read or count it beside the limiter. */
export function rateWindowKey(keyPrefix: string, bucket: string): string {
  return `${rateKeyPrefix(keyPrefix)}:${bucketKey(bucket)}`;
}

export class RedisRateLimiter implements RateLimiter {
  // The library fixes `points` per instance; one per limit, all on the same keys.
  private readonly byLimit = new Map<number, RateLimiterRedis>();
  private readonly uncapped: RateLimiterRedis;
  private readonly keyPrefix: string;

  constructor(
    private readonly redis: RedisClient,
    keyPrefix: string,
  ) {
    this.keyPrefix = rateKeyPrefix(keyPrefix);
    this.uncapped = this.instance(UNCAPPED);
  }

  private instance(points: number): RateLimiterRedis {
    return new RateLimiterRedis({
      storeClient: this.redis,
      points,
      duration: WINDOW_SECONDS,
      keyPrefix: this.keyPrefix,
      customIncrTtlLuaScript: CONDITIONAL_INCR_LUA,
    });
  }

  private capped(limit: number): RateLimiterRedis {
    let limiter = this.byLimit.get(limit);
    if (!limiter) {
      limiter = this.instance(limit);
      this.byLimit.set(limit, limiter);
    }
    return limiter;
  }

  async consume(bucket: string, limit: number, points = 1): Promise<WindowResult> {
    checkLimit(limit);
    checkPoints(points, 1);
    const limiter = this.capped(limit);
    return guarded('rate_limiter.consume', async () => {
      try {
        const res = await limiter.consume(bucketKey(bucket), points);
        return windowResult(true, limit, res.consumedPoints, res.msBeforeNext);
      } catch (rejection) {
        if (!(rejection instanceof RateLimiterRes)) throw rejection;
        // The reply holds the count as it would have been; nothing was stored.
        return windowResult(false, limit, rejection.consumedPoints - points, refusedResetMs(rejection.msBeforeNext));
      }
    });
  }

  async record(bucket: string, limit: number, points: number): Promise<WindowResult> {
    checkLimit(limit);
    checkPoints(points, 0);
    if (points === 0) {
      const { used, resetMs } = await this.read(bucket);
      return windowResult(used <= limit, limit, used, resetMs);
    }
    return guarded('rate_limiter.record', async () => {
      const res = await this.uncapped.penalty(bucketKey(bucket), points);
      return windowResult(res.consumedPoints <= limit, limit, res.consumedPoints, res.msBeforeNext);
    });
  }

  async peek(bucket: string, limit: number): Promise<WindowResult> {
    checkLimit(limit);
    const { used, resetMs } = await this.read(bucket);
    return windowResult(used < limit, limit, used, resetMs);
  }

  private read(bucket: string): Promise<{ used: number; resetMs: number }> {
    return guarded('rate_limiter.peek', async () => usedOf(await this.uncapped.get(bucketKey(bucket))));
  }
}

/**
 * Runs tasks of one key one after another. The in-memory window is read and then counted in two
 * steps; serialising them per bucket makes "count only if it fits" exact within the process.
 */
export class KeyedQueue {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const result = previous.then(task);
    const tail = result.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }
}

export class MemoryRateLimiter implements RateLimiter {
  // One instance for every limit: each RateLimiterMemory keeps its own storage, so per-limit
  // instances would give a bucket whose limit changed a fresh count.
  private readonly windows = new RateLimiterMemory({ points: UNCAPPED, duration: WINDOW_SECONDS, keyPrefix: '' });
  private readonly queue = new KeyedQueue();

  async consume(bucket: string, limit: number, points = 1): Promise<WindowResult> {
    checkLimit(limit);
    checkPoints(points, 1);
    return this.queue.run(bucket, async () => {
      const { used, resetMs } = usedOf(await this.windows.get(bucket));
      if (used + points > limit) return windowResult(false, limit, used, refusedResetMs(resetMs));
      const res = await this.windows.penalty(bucket, points);
      return windowResult(true, limit, res.consumedPoints, res.msBeforeNext);
    });
  }

  async record(bucket: string, limit: number, points: number): Promise<WindowResult> {
    checkLimit(limit);
    checkPoints(points, 0);
    if (points === 0) {
      const { used, resetMs } = usedOf(await this.windows.get(bucket));
      return windowResult(used <= limit, limit, used, resetMs);
    }
    return this.queue.run(bucket, async () => {
      const res = await this.windows.penalty(bucket, points);
      return windowResult(res.consumedPoints <= limit, limit, res.consumedPoints, res.msBeforeNext);
    });
  }

  async peek(bucket: string, limit: number): Promise<WindowResult> {
    checkLimit(limit);
    const { used, resetMs } = usedOf(await this.windows.get(bucket));
    return windowResult(used < limit, limit, used, resetMs);
  }
}

/*
 * Concurrency slots are written here rather than taken from rate-limiter-flexible: it counts
 * points in fixed windows and has no semaphore whose slots expire on their own, and a gateway
 * that crashes mid-request must not hold its slot forever. Each slot is a short lease: the
 * holder's random id, scored by the injected clock's time at which it lapses, pushed forward
 * by its process's renewals (SlotLeases) while the request lives.
 */

/** KEYS[1] slots; ARGV now, lease end, limit, slot id, storage bound ms. Replies {taken, held}. */
const ACQUIRE_LUA = luaScript(`
redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[1])
local held = redis.call('zcard', KEYS[1])
if held >= tonumber(ARGV[3]) then
  return {0, held}
end
redis.call('zadd', KEYS[1], ARGV[2], ARGV[4])
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[5]) then
  redis.call('pexpire', KEYS[1], ARGV[5])
end
return {1, held + 1}
`);

/**
 * Every lease of one process in one call. KEYS: the slots' sets. ARGV: now, storage bound ms,
 * then (key index, slot id, new lease end) per lease. A lease already lapsed (score <= now) or
 * released is not brought back: its place may have been taken. Replies 1/0 per lease: still held.
 */
const RENEW_LUA = luaScript(`
local now = tonumber(ARGV[1])
local held = {}
for i = 3, #ARGV, 3 do
  local key = KEYS[tonumber(ARGV[i])]
  local score = redis.call('zscore', key, ARGV[i + 1])
  if score and tonumber(score) > now then
    redis.call('zadd', key, ARGV[i + 2], ARGV[i + 1])
    held[#held + 1] = 1
  else
    held[#held + 1] = 0
  end
end
for i = 1, #KEYS do
  if redis.call('pttl', KEYS[i]) < tonumber(ARGV[2]) then
    redis.call('pexpire', KEYS[i], ARGV[2])
  end
end
return held
`);

/** KEYS: the slots' sets. ARGV: (key index, slot id) per lease. */
const RELEASE_LUA = luaScript(`
for i = 1, #ARGV, 2 do
  redis.call('zrem', KEYS[tonumber(ARGV[i])], ARGV[i + 1])
end
return 0
`);

/** Keys and arguments of one batch: each distinct key once, each lease by its key's index. */
function batchArgs<T extends LeaseRef>(leases: readonly T[], per: (lease: T) => (string | number)[]): { keys: string[]; args: (string | number)[] } {
  const index = new Map<string, number>();
  const args: (string | number)[] = [];
  for (const lease of leases) {
    let at = index.get(lease.key);
    if (at === undefined) {
      at = index.size + 1;
      index.set(lease.key, at);
    }
    args.push(at, ...per(lease));
  }
  return { keys: [...index.keys()], args };
}

/** Bounds one script's work, so renewing thousands of slots never blocks Redis for long. */
const LEASES_PER_CALL = 1_000;

/**
 * The positions of `leases`, grouped into script calls: in chunks on one server; on a Cluster,
 * where one script may touch the keys of one hash slot only, per slot first.
 */
function calls(redis: RedisClient, leases: readonly LeaseRef[]): number[][] {
  const groups = new Map<number, number[]>();
  leases.forEach((lease, i) => {
    const group = redis.isCluster ? calculateSlot(lease.key) : 0;
    const positions = groups.get(group);
    if (positions) positions.push(i);
    else groups.set(group, [i]);
  });
  const out: number[][] = [];
  for (const positions of groups.values()) {
    for (let i = 0; i < positions.length; i += LEASES_PER_CALL) out.push(positions.slice(i, i + LEASES_PER_CALL));
  }
  return out;
}

/** The leases of one Redis client's slots. */
export function redisLeaseBackend(redis: RedisClient, timings: SlotLeaseTimings): LeaseBackend {
  const bound = storageBoundMs(timings.leaseMs);
  return {
    async renew(leases, now) {
      const held = new Array<boolean>(leases.length).fill(false);
      await Promise.all(
        calls(redis, leases).map(async (positions) => {
          const { keys, args } = batchArgs(
            positions.map((i) => leases[i]),
            (lease) => [lease.id, lease.until],
          );
          const replies = (await guarded('concurrency.renew', () => runScript(redis, RENEW_LUA, keys, [now, bound, ...args]))) as number[];
          positions.forEach((i, j) => (held[i] = replies[j] === 1));
        }),
      );
      return held;
    },
    async release(leases) {
      await Promise.all(
        calls(redis, leases).map((positions) => {
          const { keys, args } = batchArgs(
            positions.map((i) => leases[i]),
            (lease) => [lease.id],
          );
          return guarded('concurrency.release', () => runScript(redis, RELEASE_LUA, keys, args));
        }),
      );
    },
  };
}

/** One process's slot leases on `redis`, shared by its concurrency limiter and its admission. */
export function redisSlotLeases(redis: RedisClient, clock: Clock, timings: SlotLeaseTimings = SLOT_LEASE): SlotLeases {
  return new SlotLeases(redisLeaseBackend(redis, timings), clock, timings);
}

export function checkMaxHold(maxHoldMs: number): void {
  if (!Number.isFinite(maxHoldMs) || maxHoldMs <= 0) throw new RangeError(`maxHoldMs must be positive, got ${maxHoldMs}`);
}

/** The Redis key of `bucket`'s slots, for scripts that take them beside the limiter. */
export function slotsKey(keyPrefix: string, bucket: string): string {
  return `${keyPrefix}:slots:${bucketKey(bucket)}`;
}

export class RedisConcurrencyLimiter implements ConcurrencyLimiter {
  constructor(
    private readonly redis: RedisClient,
    private readonly clock: Clock,
    private readonly keyPrefix: string,
    readonly leases: SlotLeases = redisSlotLeases(redis, clock),
  ) {}

  async acquire(bucket: string, limit: number, maxHoldMs: number): Promise<SlotResult> {
    checkLimit(limit);
    checkMaxHold(maxHoldMs);
    const key = slotsKey(this.keyPrefix, bucket);
    const id = randomUUID();
    const now = this.clock.now().getTime();
    const until = this.leases.firstUntil(now, maxHoldMs);
    let reply: [number, number];
    try {
      reply = (await guarded('concurrency.acquire', () => runScript(this.redis, ACQUIRE_LUA, [key], [now, until, limit, id, storageBoundMs(until - now)]))) as [
        number,
        number,
      ];
    } catch (err) {
      this.leases.lost({ key, id }, until);
      throw err;
    }
    const [taken, held] = reply;
    const remaining = Math.max(limit - held, 0);
    if (taken !== 1) return { allowed: false, limit, remaining, slot: null };
    return { allowed: true, limit, remaining, slot: this.leases.hold({ key, id }, now, maxHoldMs) };
  }
}

export class MemoryConcurrencyLimiter implements ConcurrencyLimiter {
  /** bucket -> slot id -> lease end (ms, injected clock) */
  private readonly buckets = new Map<string, Map<string, number>>();
  /** Renewed like Redis's, so a slot lives and lapses the same way whichever store holds it. */
  readonly leases: SlotLeases;

  constructor(
    private readonly clock: Clock,
    timings: SlotLeaseTimings = SLOT_LEASE,
  ) {
    this.leases = new SlotLeases(
      {
        renew: async (leases, now) => leases.map((lease) => this.renewOne(lease, now)),
        release: async (leases) => {
          for (const { key, id } of leases) this.releaseOne(key, id);
        },
      },
      clock,
      timings,
    );
  }

  async acquire(bucket: string, limit: number, maxHoldMs: number): Promise<SlotResult> {
    checkLimit(limit);
    checkMaxHold(maxHoldMs);
    const now = this.clock.now().getTime();
    const slots = this.buckets.get(bucket) ?? new Map<string, number>();
    for (const [id, until] of slots) if (until <= now) slots.delete(id);
    if (slots.size >= limit) {
      this.forgetIfEmpty(bucket, slots);
      return { allowed: false, limit, remaining: 0, slot: null };
    }
    const id = randomUUID();
    slots.set(id, this.leases.firstUntil(now, maxHoldMs));
    this.buckets.set(bucket, slots);
    return { allowed: true, limit, remaining: limit - slots.size, slot: this.leases.hold({ key: bucket, id }, now, maxHoldMs) };
  }

  private renewOne({ key, id, until }: RenewedLease, now: number): boolean {
    const slots = this.buckets.get(key);
    const current = slots?.get(id);
    if (slots === undefined || current === undefined) return false;
    if (current <= now) {
      slots.delete(id);
      this.forgetIfEmpty(key, slots);
      return false;
    }
    slots.set(id, until);
    return true;
  }

  private releaseOne(bucket: string, id: string): void {
    const slots = this.buckets.get(bucket);
    if (!slots) return;
    slots.delete(id);
    this.forgetIfEmpty(bucket, slots);
  }

  private forgetIfEmpty(bucket: string, slots: Map<string, number>): void {
    if (slots.size === 0 && this.buckets.get(bucket) === slots) this.buckets.delete(bucket);
  }
}
