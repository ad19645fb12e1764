import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { ManualClock } from '../clock';
import { response } from './testing/contract';
import { freePort, startRedisServer, stopRedisServer } from './testing/redis-server';
import { RedisAdmission, type AdmissionRequest } from './admission';
import { RedisIdempotencyStore } from './idempotency';
import { createEdgeStores, type EdgeStores } from './index';
import { RedisConcurrencyLimiter, RedisRateLimiter, type Slot } from './rate-limiter';
import { closeRedis, connectRedis, EdgeStoreUnavailable, whenReady } from './redis';
import { RedisResponseCache } from './response-cache';

/*
 * Runs its own throwaway redis-server, kills it mid-run and brings it back on the same port:
 * the shared server of the other suites is never touched.
 */

/** Settles `promise` and tells how long it took. */
async function timed<T>(promise: Promise<T>): Promise<{ ms: number; outcome: PromiseSettledResult<T> }> {
  const started = performance.now();
  const [outcome] = await Promise.allSettled([promise]);
  return { ms: performance.now() - started, outcome };
}

async function eventually(check: () => Promise<unknown>, withinMs: number): Promise<void> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    try {
      await check();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

describe('edge stores through a Redis outage', () => {
  const prefix = `edge-outage:${randomUUID()}`;
  const clock = new ManualClock();
  const degraded: string[] = [];
  let port: number;
  let server: ChildProcess | null = null;
  let redis: Redis;
  let stores: EdgeStores;
  let adapters: {
    rateLimiter: RedisRateLimiter;
    concurrency: RedisConcurrencyLimiter;
    idempotency: RedisIdempotencyStore;
    cache: RedisResponseCache;
    admission: RedisAdmission;
  };
  let slotTakenBeforeOutage: Slot;
  const admitting = (name: string, limit: number): AdmissionRequest => ({
    requests: { bucket: `rpm:${name}`, limit },
    tokens: { bucket: `tpm:${name}`, limit: 100, enforce: true },
    slots: { bucket: `conc:${name}`, limit, maxHoldMs: 60_000 },
  });

  beforeAll(async () => {
    port = await freePort();
    server = await startRedisServer(port);
    const url = `redis://127.0.0.1:${port}`;
    redis = connectRedis(url);
    const concurrency = new RedisConcurrencyLimiter(redis, clock, prefix);
    adapters = {
      rateLimiter: new RedisRateLimiter(redis, prefix),
      concurrency,
      idempotency: new RedisIdempotencyStore(redis, clock, prefix),
      cache: new RedisResponseCache(redis, clock, prefix),
      admission: new RedisAdmission(redis, clock, prefix, concurrency.leases),
    };
    stores = createEdgeStores({ redisUrl: url, clock, keyPrefix: prefix, onDegraded: (what) => degraded.push(what) });
    expect(await whenReady(redis, 5_000)).toBe(true);
    expect(await stores.ready()).toBe(true);
  });

  afterAll(async () => {
    await stores?.close();
    if (redis) await closeRedis(redis);
    await stopRedisServer(server);
  });

  it('shares state through Redis while it is up', async () => {
    expect(stores.backend).toBe('redis');
    expect((await stores.rateLimiter.consume('rpm:up', 5)).allowed).toBe(true);
    expect(await adapters.rateLimiter.peek('rpm:up', 5)).toMatchObject({ remaining: 4 });
    const taken = await stores.concurrency.acquire('conc', 1, 60_000);
    expect(taken.allowed).toBe(true);
    slotTakenBeforeOutage = taken.slot!;
    expect((await adapters.concurrency.acquire('conc', 1, 60_000)).allowed).toBe(false);
    expect((await stores.admission.admit(admitting('up', 5))).refused).toBeNull();
    expect(await adapters.rateLimiter.peek('rpm:up', 5)).toMatchObject({ remaining: 3 });
    await stores.cache.put('c', response(), 60);
    expect(await stores.cache.lookup('c')).toMatchObject({ state: 'hit' });
    expect(await stores.idempotency.begin('key_1', 'k', 'fp', 30_000)).toEqual({ state: 'started' });
    expect(degraded).toEqual([]);
  });

  it('fails fast with EdgeStoreUnavailable once Redis is gone', async () => {
    await stopRedisServer(server);
    server = null;
    const attempts = [
      adapters.rateLimiter.consume('rpm:down', 5),
      adapters.rateLimiter.record('rpm:down', 5, 1),
      adapters.rateLimiter.peek('rpm:down', 5),
      adapters.concurrency.acquire('conc:down', 1, 60_000),
      adapters.admission.admit(admitting('down', 1)),
      adapters.idempotency.begin('key_1', 'k2', 'fp', 30_000),
      adapters.idempotency.complete('key_1', 'k2', 'fp', response()),
      adapters.idempotency.abandon('key_1', 'k2'),
      adapters.cache.get('c'),
      adapters.cache.put('c', response(), 60),
      adapters.cache.delete('c'),
    ];
    const results = await Promise.all(attempts.map((attempt) => timed<unknown>(attempt)));
    for (const { ms, outcome } of results) {
      expect(outcome.status).toBe('rejected');
      expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(EdgeStoreUnavailable);
      expect(ms).toBeLessThan(1_500);
    }
    // Once the client knows the connection is down, a command does not even wait.
    const again = await timed(adapters.rateLimiter.peek('rpm:down', 5));
    expect(again.outcome.status).toBe('rejected');
    expect(again.ms).toBeLessThan(100);
  });

  it('keeps limiting from memory, bypasses the cache and fails idempotency closed', async () => {
    const consumed = [];
    for (let i = 0; i < 3; i++) consumed.push((await stores.rateLimiter.consume('rpm:fallback', 2)).allowed);
    expect(consumed).toEqual([true, true, false]);
    expect((await stores.rateLimiter.record('tpm:fallback', 10, 11)).allowed).toBe(false);
    expect((await stores.rateLimiter.peek('tpm:fallback', 10)).allowed).toBe(false);

    const slot = await stores.concurrency.acquire('conc:fallback', 1, 60_000);
    expect(slot.allowed).toBe(true);
    expect((await stores.concurrency.acquire('conc:fallback', 1, 60_000)).allowed).toBe(false);
    await slot.slot!.release();
    expect((await stores.concurrency.acquire('conc:fallback', 1, 60_000)).allowed).toBe(true);
    // Taken from Redis before the outage: its release cannot reach Redis and must not fail the request.
    await expect(slotTakenBeforeOutage.release()).resolves.toBeUndefined();
    const admitted = [];
    for (let i = 0; i < 3; i++) admitted.push((await stores.admission.admit(admitting('fallback-admission', 2))).refused);
    expect(admitted).toEqual([null, null, 'requests']);

    expect(await stores.cache.lookup('c')).toEqual({ state: 'bypassed' });
    expect(await stores.cache.get('c')).toBeNull();
    await expect(stores.cache.put('c2', response(), 60)).resolves.toBeUndefined();
    await expect(stores.cache.delete('c')).resolves.toBeUndefined();

    await expect(stores.idempotency.begin('key_1', 'k3', 'fp', 30_000)).rejects.toBeInstanceOf(EdgeStoreUnavailable);

    // Once per store and outage, however many requests ran degraded.
    expect(degraded.filter((what) => what !== 'redis').sort()).toEqual(['admission', 'cache', 'concurrency', 'rate_limiter']);
  });

  it('reports the lost connection once, however often reconnecting fails', async () => {
    await eventually(async () => expect(degraded).toContain('redis'), 3_000);
    // Long enough for a few more failed reconnects (one at least every second).
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect(degraded.filter((what) => what === 'redis')).toHaveLength(1);
  });

  it('goes back to Redis by itself once the server returns', async () => {
    server = await startRedisServer(port);
    await eventually(() => adapters.rateLimiter.peek('rpm:back', 5), 5_000);
    await eventually(() => stores.idempotency.begin('key_1', 'probe', 'fp', 30_000), 5_000);

    // The restarted server is empty; what the wrapped stores count now lands in Redis again.
    expect((await stores.rateLimiter.consume('rpm:back', 5)).allowed).toBe(true);
    expect(await adapters.rateLimiter.peek('rpm:back', 5)).toMatchObject({ remaining: 4 });
    const taken = await stores.concurrency.acquire('conc:back', 1, 60_000);
    expect(taken.allowed).toBe(true);
    expect((await adapters.concurrency.acquire('conc:back', 1, 60_000)).allowed).toBe(false);
    expect((await stores.admission.admit(admitting('back-admission', 1))).refused).toBeNull();
    expect((await adapters.admission.admit(admitting('back-admission', 1))).refused).toBe('requests');
    await stores.cache.put('c', response(), 60);
    expect(await adapters.cache.get('c')).not.toBeNull();
    expect(await stores.cache.lookup('c')).toMatchObject({ state: 'hit' });
    expect(await stores.idempotency.begin('key_1', 'k', 'fp', 30_000)).toEqual({ state: 'started' });
  });
});
