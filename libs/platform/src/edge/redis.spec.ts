import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Redis } from 'ioredis';
import { ManualClock } from '../clock';
import { RedisAdmission } from './admission';
import { generateEncryptionKey, isSealedSecret, openSecret } from '../crypto';
import { edgeStoreContract, idempotencyStoreContract, response } from './testing/contract';
import { twoClientsContract } from './testing/two-clients';
import { idempotencyEntryKey, RedisIdempotencyStore, type StoredResponse } from './idempotency';
import { SealedIdempotencyStore, sealedResponseContext } from './sealed-idempotency';
import { createEdgeStores } from './index';
import { RedisConcurrencyLimiter, RedisRateLimiter, redisSlotLeases } from './rate-limiter';
import { closeRedis, connectRedis, storageBoundMs, whenReady } from './redis';
import { RedisResponseCache } from './response-cache';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/15';
// Other runs may share the database: everything this run writes lives under its own prefix.
const RUN_PREFIX = `edge-test:${randomUUID()}`;

let redis: Redis;
let prefixes = 0;
const nextPrefix = (): string => `${RUN_PREFIX}:${++prefixes}`;

async function runKeys(client: Redis): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await client.scan(cursor, 'MATCH', `${RUN_PREFIX}:*`, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return keys;
}

beforeAll(async () => {
  redis = connectRedis(REDIS_URL);
  if (!(await whenReady(redis, 5_000))) throw new Error(`Redis at ${REDIS_URL} is not reachable`);
});

afterAll(async () => {
  const keys = await runKeys(redis);
  if (keys.length > 0) await redis.del(...keys);
  await closeRedis(redis);
});

edgeStoreContract('redis', (clock) => {
  const prefix = nextPrefix();
  const slotLeases = redisSlotLeases(redis, clock);
  return {
    rateLimiter: new RedisRateLimiter(redis, prefix),
    concurrency: new RedisConcurrencyLimiter(redis, clock, prefix, slotLeases),
    admission: new RedisAdmission(redis, clock, prefix, slotLeases),
    slotLeases,
    idempotency: new RedisIdempotencyStore(redis, clock, prefix),
    cache: new RedisResponseCache(redis, clock, prefix),
  };
});

describe('redis stores shared by two gateways', () => {
  let other: Redis;

  beforeAll(async () => {
    // A second connection, as a second gateway process would have.
    other = connectRedis(REDIS_URL);
    expect(await whenReady(other, 5_000)).toBe(true);
  });

  afterAll(async () => {
    await closeRedis(other);
  });

  twoClientsContract(() => [redis, other], nextPrefix);
});

describe('sealed idempotency store over redis', () => {
  const encryptionKey = Buffer.from(generateEncryptionKey(), 'base64');
  let clock: ManualClock;
  let prefix: string;
  let sealed: SealedIdempotencyStore;

  beforeEach(() => {
    clock = new ManualClock();
    prefix = nextPrefix();
    sealed = new SealedIdempotencyStore(new RedisIdempotencyStore(redis, clock, prefix), encryptionKey);
  });

  idempotencyStoreContract(() => ({ clock, idempotency: sealed }));

  it('keeps in Redis only the sealed answer, which opens to the answer under its own context', async () => {
    const secret = 'svc_test_ZYXWVUTSRQponmlkjihg9876543210abcdefgh';
    const answer = response({ status: 201, body: JSON.stringify({ data: { id: 'key_9' }, key: secret }), sourceId: '' });
    await sealed.begin('key_m', 'retry-1', 'fp', 30_000);
    await sealed.complete('key_m', 'retry-1', 'fp', answer);

    const entry = await redis.hgetall(idempotencyEntryKey(prefix, 'key_m', 'retry-1'));
    expect(JSON.stringify(entry)).not.toContain(secret);
    expect(JSON.stringify(entry)).not.toContain('key_9');
    const held = JSON.parse(entry.response) as StoredResponse;
    expect(isSealedSecret(held.body)).toBe(true);
    expect(JSON.parse(openSecret(encryptionKey, held.body, sealedResponseContext('key_m', 'retry-1', 'fp')))).toEqual({
      headers: answer.headers,
      body: answer.body,
      sourceId: '',
    });
    expect(await sealed.begin('key_m', 'retry-1', 'fp', 30_000)).toEqual({ state: 'replay', response: answer });
  });
});

describe('redis storage bounds', () => {
  it('gives every key it writes a Redis expiry beyond the logical one', async () => {
    const prefix = nextPrefix();
    const clock = new ManualClock();
    await new RedisRateLimiter(redis, prefix).consume('rpm', 5);
    await new RedisConcurrencyLimiter(redis, clock, prefix).acquire('conc', 5, 10_000);
    const idempotency = new RedisIdempotencyStore(redis, clock, prefix);
    await idempotency.begin('key_1', 'k', 'fp', 30_000);
    await idempotency.complete('key_1', 'k', 'fp', response());
    await new RedisResponseCache(redis, clock, prefix).put('c', response(), 5);
    const keys = (await runKeys(redis)).filter((key) => key.startsWith(`${prefix}:`));
    expect(keys).toHaveLength(4);
    const ttls = new Map(await Promise.all(keys.map(async (key) => [key.slice(prefix.length + 1).split(':')[0], await redis.pttl(key)] as const)));
    expect(ttls.get('rl')).toBeGreaterThan(55_000);
    expect(ttls.get('slots')).toBeGreaterThan(10_000);
    expect(ttls.get('idem')).toBeGreaterThan(24 * 3_600_000);
    expect(ttls.get('idem')).toBeLessThanOrEqual(storageBoundMs(24 * 3_600_000));
    expect(ttls.get('cache')).toBeGreaterThan(5_000);
  });
});

describe('the commands of one turn of the event loop', () => {
  it('leave in one write to the socket, and each is answered as its own', async () => {
    const client = connectRedis(REDIS_URL);
    try {
      expect(await whenReady(client, 5_000)).toBe(true);
      const prefix = nextPrefix();
      await client.set(`${prefix}:a`, 'one');
      const socket = client.stream as Socket & { _write: Socket['_write']; _writev: NonNullable<Socket['_writev']> };
      const writes: number[] = [];
      const write = socket._write.bind(socket);
      const writev = socket._writev.bind(socket);
      socket._write = (chunk, encoding, callback) => (writes.push(1), write(chunk, encoding, callback));
      socket._writev = (chunks, callback) => (writes.push(chunks.length), writev(chunks, callback));
      // Twenty commands of concurrent requests, issued in one turn.
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? client.get(`${prefix}:a`) : client.incr(`${prefix}:n`))));
      expect(writes).toEqual([20]);
      expect(answers.filter((_, i) => i % 2 === 0)).toEqual(Array(10).fill('one'));
      expect(answers.filter((_, i) => i % 2 === 1)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      // The next turn's command goes by itself.
      await client.get(`${prefix}:a`);
      expect(writes).toEqual([20, 1]);
    } finally {
      await closeRedis(client);
    }
  });
});

describe('createEdgeStores with Redis', () => {
  it('builds Redis-backed stores whose state other gateways see', async () => {
    const prefix = nextPrefix();
    const clock = new ManualClock();
    const stores = createEdgeStores({ redisUrl: REDIS_URL, clock, keyPrefix: prefix });
    try {
      expect(stores.backend).toBe('redis');
      expect(await stores.ready()).toBe(true);
      expect((await stores.rateLimiter.consume('rpm', 2)).allowed).toBe(true);
      expect(await new RedisRateLimiter(redis, prefix).peek('rpm', 2)).toMatchObject({ remaining: 1 });
      await stores.cache.put('c', response(), 60);
      expect(await new RedisResponseCache(redis, clock, prefix).get('c')).not.toBeNull();
    } finally {
      await stores.close();
    }
  });
});
