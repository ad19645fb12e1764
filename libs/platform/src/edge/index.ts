import type { Clock } from '../clock';
import { type Admission, MemoryAdmission, RedisAdmission } from './admission';
import { type IdempotencyStore, MemoryIdempotencyStore, RedisIdempotencyStore } from './idempotency';
import {
  type ConcurrencyLimiter,
  MemoryConcurrencyLimiter,
  MemoryRateLimiter,
  type RateLimiter,
  RedisConcurrencyLimiter,
  RedisRateLimiter,
  redisSlotLeases,
} from './rate-limiter';
import { closeRedis, connectRedis, connectRedisCluster, pingRedis, type RedisNode, whenReady } from './redis';
import { BypassResponseCache, FallbackAdmission, FallbackConcurrencyLimiter, FallbackRateLimiter, type OnDegraded } from './resilient';
import { MemoryResponseCache, RedisResponseCache, type ResponseCache } from './response-cache';
import { DisabledResponseCache, SealedResponseCache } from './sealed-response-cache';
import { SLOT_LEASE, type SlotLeaseTimings } from './slot-leases';

export * from './admission';
export * from './idempotency';
export * from './rate-limiter';
export * from './redis';
export * from './resilient';
export * from './sealed-idempotency';
export * from './sealed-response-cache';
export * from './slot-leases';
export * from './response-cache';

export interface EdgeStoreOptions {
  /** null (and no `redisClusterNodes`): everything in this process's memory (a single gateway, or tests). */
  redisUrl: string | null;
  /** A Redis Cluster instead of one server (REDIS_CLUSTER_NODES): the nodes first asked for its layout. */
  redisClusterNodes?: readonly RedisNode[] | null;
  clock: Clock;
  /** Namespaces every Redis key, so gateways of different deployments can share a server. Without `{` or `}`: the keys' hash tags follow it. */
  keyPrefix?: string;
  /** Told once per outage and per store when Redis is unreachable (including the connection itself). */
  onDegraded?: OnDegraded;
  /** How concurrency slots are leased and renewed (slot-leases.ts); tests shorten it. */
  slotLease?: SlotLeaseTimings;
  /**
   * Issue 41 S4: the response cache's entries are sealed under this key (SVC_ENCRYPTION_KEY);
   * null turns the cache off. Left out (the stores' own tests), entries are kept as given.
   */
  cacheKey?: Buffer | null;
}

export interface EdgeStores {
  rateLimiter: RateLimiter;
  concurrency: ConcurrencyLimiter;
  /** Requests per minute, tokens per minute and a concurrency slot in one decision, on the same windows and slots. */
  admission: Admission;
  idempotency: IdempotencyStore;
  /** `lookup` tells a miss from a bypass while the store is down. */
  cache: BypassResponseCache;
  backend: 'redis' | 'memory';
  /** Resolves true once the backend takes commands, false if `timeoutMs` passes first (requests then run degraded). */
  ready(timeoutMs?: number): Promise<boolean>;
  /**
   * One round trip to the backend (Redis PING), for the readiness probe: resolves when it
   * answers within `timeoutMs`, rejects otherwise. The in-memory backend always answers.
   */
  ping(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

/** What every Redis key of the edge stores starts with unless `keyPrefix` says otherwise. */
export const DEFAULT_KEY_PREFIX = 'edge';
const DEFAULT_READY_TIMEOUT_MS = 5_000;

export function createEdgeStores(options: EdgeStoreOptions): EdgeStores {
  const { redisUrl, redisClusterNodes = null, clock, keyPrefix = DEFAULT_KEY_PREFIX, onDegraded, slotLease = SLOT_LEASE, cacheKey } = options;
  if (redisUrl !== null && redisClusterNodes !== null) throw new RangeError('give redisUrl or redisClusterNodes, not both');
  // A brace in the prefix would become the keys' hash tag, putting every key in one slot (or
  // the windows and slots of one subject in different ones).
  if (/[{}]/.test(keyPrefix)) throw new RangeError(`keyPrefix must not contain { or }, got ${JSON.stringify(keyPrefix)}`);
  const sealed = (inner: ResponseCache): ResponseCache =>
    cacheKey === undefined ? inner : cacheKey === null ? new DisabledResponseCache() : new SealedResponseCache(inner, cacheKey);
  const memoryRate = new MemoryRateLimiter();
  const memoryConcurrency = new MemoryConcurrencyLimiter(clock, slotLease);
  if (redisUrl === null && redisClusterNodes === null) {
    return {
      rateLimiter: memoryRate,
      concurrency: memoryConcurrency,
      admission: new MemoryAdmission(memoryRate, memoryConcurrency),
      idempotency: new MemoryIdempotencyStore(clock),
      // Never bypasses; wrapped so callers see one cache type whatever the backend.
      cache: new BypassResponseCache(sealed(new MemoryResponseCache(clock))),
      backend: 'memory',
      ready: async () => true,
      ping: async () => undefined,
      close: () => memoryConcurrency.leases.close(),
    };
  }
  const onError = (err: Error) => onDegraded?.('redis', err);
  const redis = redisClusterNodes !== null ? connectRedisCluster(redisClusterNodes, onError) : connectRedis(redisUrl!, onError);
  // One set of leases for the limiter and admission: one renewal call per tick for the process.
  const leases = redisSlotLeases(redis, clock, slotLease);
  return {
    rateLimiter: new FallbackRateLimiter(new RedisRateLimiter(redis, keyPrefix), memoryRate, onDegraded),
    concurrency: new FallbackConcurrencyLimiter(new RedisConcurrencyLimiter(redis, clock, keyPrefix, leases), memoryConcurrency, onDegraded),
    admission: new FallbackAdmission(new RedisAdmission(redis, clock, keyPrefix, leases), new MemoryAdmission(memoryRate, memoryConcurrency), onDegraded),
    idempotency: new RedisIdempotencyStore(redis, clock, keyPrefix),
    cache: new BypassResponseCache(sealed(new RedisResponseCache(redis, clock, keyPrefix)), onDegraded),
    backend: 'redis',
    ready: (timeoutMs = DEFAULT_READY_TIMEOUT_MS) => whenReady(redis, timeoutMs),
    ping: (timeoutMs) => pingRedis(redis, timeoutMs),
    close: async () => {
      await Promise.all([leases.close(), memoryConcurrency.leases.close()]);
      await closeRedis(redis);
    },
  };
}
