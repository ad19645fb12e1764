import { ManualClock } from '../clock';
import { MemoryAdmission } from './admission';
import { edgeStoreContract, response } from './testing/contract';
import { MemoryIdempotencyStore } from './idempotency';
import { createEdgeStores } from './index';
import { MemoryConcurrencyLimiter, MemoryRateLimiter } from './rate-limiter';
import { MemoryResponseCache } from './response-cache';

edgeStoreContract('memory', (clock) => {
  const rateLimiter = new MemoryRateLimiter();
  const concurrency = new MemoryConcurrencyLimiter(clock);
  return {
    rateLimiter,
    concurrency,
    admission: new MemoryAdmission(rateLimiter, concurrency),
    slotLeases: concurrency.leases,
    idempotency: new MemoryIdempotencyStore(clock),
    cache: new MemoryResponseCache(clock),
  };
});

describe('memory response cache bounds', () => {
  it('evicts the least recently used entry beyond its cap', async () => {
    const cache = new MemoryResponseCache(new ManualClock(), 3);
    for (const key of ['a', 'b', 'c']) await cache.put(key, response({ body: key }), 60);
    await cache.get('a');
    await cache.put('d', response({ body: 'd' }), 60);
    expect(cache.size).toBe(3);
    expect(await cache.get('b')).toBeNull();
    expect((await cache.get('a'))?.response.body).toBe('a');
    expect((await cache.get('d'))?.response.body).toBe('d');
  });

  it('drops an expired entry when it is read', async () => {
    const clock = new ManualClock();
    const cache = new MemoryResponseCache(clock);
    await cache.put('a', response(), 1);
    clock.advance(1_000);
    expect(await cache.get('a')).toBeNull();
    expect(cache.size).toBe(0);
  });

  it('hands out copies, so a caller cannot change what is cached', async () => {
    const cache = new MemoryResponseCache(new ManualClock());
    const original = response();
    await cache.put('a', original, 60);
    original.body = 'changed after put';
    const hit = await cache.get('a');
    hit!.response.headers['x-mutated'] = '1';
    expect(await cache.get('a')).toMatchObject({ response: response() });
  });
});

describe('createEdgeStores without Redis', () => {
  it('builds memory stores that are ready at once', async () => {
    const stores = createEdgeStores({ redisUrl: null, clock: new ManualClock() });
    expect(stores.backend).toBe('memory');
    expect(await stores.ready()).toBe(true);
    expect((await stores.rateLimiter.consume('rpm', 1)).allowed).toBe(true);
    expect((await stores.rateLimiter.consume('rpm', 1)).allowed).toBe(false);
    await stores.cache.put('c', response(), 60);
    expect(await stores.cache.lookup('c')).toMatchObject({ state: 'hit' });
    expect(await stores.cache.lookup('other')).toEqual({ state: 'miss' });
    await stores.close();
  });
});
