import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { closeRedis, connectRedis, DEFAULT_KEY_PREFIX, isSealedSecret, whenReady } from '@svc/platform';
import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/15';

/**
 * Issue 41 S4, spec 4.2 (response caching): cached answers are sealed at rest under
 * SVC_ENCRYPTION_KEY, as prompt logs and stored responses are. Read straight from Redis: the
 * entry holds neither the prompt nor the answer; a hit still answers; an entry left in plaintext
 * (written before sealing) is a miss and is replaced, never served and never a crash.
 */
describe('the response cache is sealed at rest (issue 41 S4)', () => {
  let gw: StartedGateway;
  let call: Call;
  let redis: Redis;
  const written = new Set<string>();

  beforeAll(async () => {
    gw = await startGateway({ REDIS_URL });
    call = api(gw.url);
    redis = connectRedis(REDIS_URL);
    if (!(await whenReady(redis, 5_000))) throw new Error(`Redis at ${REDIS_URL} is not reachable`);
  }, 60_000);
  afterAll(async () => {
    if (written.size > 0) await redis.del(...written);
    await closeRedis(redis);
    await stopGateway(gw);
  });

  const cacheKeys = async () => new Set(await redis.keys(`${DEFAULT_KEY_PREFIX}:cache:*`));
  const ask = (marker: string) =>
    call('POST', '/chat/completions', {
      key: gw.keys.api_key,
      headers: { 'x-svc-cache': 'true' },
      body: { model: 'sim/echo', messages: [{ role: 'user', content: `the secret word is ${marker}` }] },
    });

  it('stores the entry sealed (no prompt, no answer in Redis), and a hit still answers', async () => {
    const marker = `zebra-${randomBytes(6).toString('hex')}`;
    const before = await cacheKeys();
    const miss = await ask(marker);
    expect(miss.status).toBe(200);
    expect(miss.headers.get('x-svc-cache-status')).toBe('MISS');
    expect(JSON.stringify(miss.json)).toContain(marker);
    const added = [...(await cacheKeys())].filter((k) => !before.has(k));
    expect(added.length).toBeGreaterThanOrEqual(1);
    for (const k of added) written.add(k);
    const values = await Promise.all(added.map((k) => redis.get(k)));
    // Other suites may write entries meanwhile: ours is the one this request added, and no
    // entry added holds the marker.
    for (const value of values) expect(value).not.toContain(marker);
    const ours = values.map((v) => JSON.parse(v!)).filter((e) => isSealedSecret(e.response.body));
    expect(ours.length).toBeGreaterThanOrEqual(1);
    expect(ours[0].response.headers).toEqual({});

    const hit = await ask(marker);
    expect(hit.headers.get('x-svc-cache-status')).toBe('HIT');
    expect(hit.json.choices).toEqual(miss.json.choices);
    // Spec 4.2: a hit's usage counters are 0; nothing is billed.
    expect(hit.json.usage).toMatchObject({ prompt_tokens: 0, completion_tokens: 0, cost: 0 });
    expect(hit.headers.get('x-svc-cache-source-id')).toBe(miss.json.id);
  });

  it('treats a plaintext entry (from before sealing) as a miss and replaces it', async () => {
    const marker = `okapi-${randomBytes(6).toString('hex')}`;
    const before = await cacheKeys();
    const first = await ask(marker);
    expect(first.headers.get('x-svc-cache-status')).toBe('MISS');
    const added = [...(await cacheKeys())].filter((k) => !before.has(k));
    for (const k of added) written.add(k);
    const ourKey = (await Promise.all(added.map(async (k) => ({ k, v: await redis.get(k) })))).find(
      ({ v }) => v !== null && isSealedSecret(JSON.parse(v).response.body),
    )!.k;
    // What an unsealed gateway wrote: the answer in plaintext, under the same key.
    const plaintext = {
      response: {
        status: 200,
        kind: 'json',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...first.json, planted: 'PLAINTEXT' }),
        sourceId: first.json.id,
      },
      storedAt: Date.now(),
      ttlSeconds: 300,
    };
    await redis.set(ourKey, JSON.stringify(plaintext), 'PX', 300_000);

    const again = await ask(marker);
    expect(again.status).toBe(200);
    expect(again.headers.get('x-svc-cache-status')).toBe('MISS');
    expect(JSON.stringify(again.json)).not.toContain('PLAINTEXT');
    const replaced = JSON.parse((await redis.get(ourKey))!);
    expect(isSealedSecret(replaced.response.body)).toBe(true);
    expect((await ask(marker)).headers.get('x-svc-cache-status')).toBe('HIT');
  });
});
