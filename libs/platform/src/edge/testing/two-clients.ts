import { ManualClock } from '../../clock';
import { RedisIdempotencyStore } from '../idempotency';
import { RedisConcurrencyLimiter, RedisRateLimiter } from '../rate-limiter';
import type { RedisClient } from '../redis';
import { response } from './contract';

/**
 * What two gateway processes, each with its own client of the same Redis (one server or a
 * Cluster), must see of each other's limits, slots and idempotency keys. `clients` is read in
 * each test, after the caller's beforeAll connected them; `nextPrefix` keeps each test's keys apart.
 */
export function twoClientsContract(clients: () => [RedisClient, RedisClient], nextPrefix: () => string): void {
  it('holds a rate limit across clients: exactly the limit passes in total', async () => {
    const prefix = nextPrefix();
    const gateways = clients().map((client) => new RedisRateLimiter(client, prefix));
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => gateways[i % 2].consume('rpm:shared', 10)));
    expect(results.filter((r) => r.allowed)).toHaveLength(10);
    expect(await gateways[1].peek('rpm:shared', 10)).toMatchObject({ allowed: false, remaining: 0 });
  });

  it('holds concurrency slots across clients, and a slot taken by one is released by its holder', async () => {
    const prefix = nextPrefix();
    const clock = new ManualClock();
    const gateways = clients().map((client) => new RedisConcurrencyLimiter(client, clock, prefix));
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => gateways[i % 2].acquire('conc:shared', 4, 10_000)));
    const granted = results.filter((r) => r.allowed);
    expect(granted).toHaveLength(4);
    await granted[0].slot!.release();
    expect((await gateways[1].acquire('conc:shared', 4, 10_000)).allowed).toBe(true);
    expect((await gateways[0].acquire('conc:shared', 4, 10_000)).allowed).toBe(false);
  });

  it('lets one gateway start a key and the other replay it', async () => {
    const prefix = nextPrefix();
    const clock = new ManualClock();
    const [a, b] = clients().map((client) => new RedisIdempotencyStore(client, clock, prefix));
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).begin('key_1', 'k', 'fp', 30_000)));
    expect(results.filter((r) => r.state === 'started')).toHaveLength(1);
    await a.complete('key_1', 'k', 'fp', response());
    expect(await b.begin('key_1', 'k', 'fp', 30_000)).toEqual({ state: 'replay', response: response() });
  });
}
