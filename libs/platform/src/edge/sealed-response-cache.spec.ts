import { randomBytes } from 'node:crypto';
import { ManualClock } from '../clock';
import { isSealedSecret } from '../crypto';
import { createEdgeStores } from './index';
import { MemoryResponseCache } from './response-cache';
import { SealedResponseCache } from './sealed-response-cache';

/** Issue 41 S4: cached answers at rest, in the process's memory as in Redis (response-cache-sealed.e2e.ts). */
describe('the sealed response cache', () => {
  const clock = new ManualClock(new Date('2026-11-20T10:00:00Z'));
  const answer = { status: 200, kind: 'json' as const, headers: { 'x-request-id': 'r1' }, body: '{"text":"the secret word is zebra"}', sourceId: 'gen-1' };

  it('keeps only a sealed body, and answers the original on a hit', async () => {
    const inner = new MemoryResponseCache(clock);
    const cache = new SealedResponseCache(inner, randomBytes(32));
    await cache.put('k1', answer, 60);
    const stored = (await inner.get('k1'))!;
    expect(JSON.stringify(stored)).not.toContain('zebra');
    expect(isSealedSecret(stored.response.body)).toBe(true);
    expect(stored.response.headers).toEqual({});
    expect((await cache.get('k1'))!.response).toEqual(answer);
  });

  it('misses (never throws) on a plaintext entry, one sealed under another key, or one moved to another cache key', async () => {
    const inner = new MemoryResponseCache(clock);
    const key = randomBytes(32);
    await inner.put('plain', answer, 60);
    expect(await new SealedResponseCache(inner, key).get('plain')).toBeNull();
    await new SealedResponseCache(inner, randomBytes(32)).put('other', answer, 60);
    expect(await new SealedResponseCache(inner, key).get('other')).toBeNull();
    await new SealedResponseCache(inner, key).put('a', answer, 60);
    await inner.put('b', (await inner.get('a'))!.response, 60);
    expect(await new SealedResponseCache(inner, key).get('b')).toBeNull();
  });

  it('is off without SVC_ENCRYPTION_KEY: nothing kept, every lookup a miss', async () => {
    const edge = createEdgeStores({ redisUrl: null, clock, cacheKey: null });
    await edge.cache.put('k1', answer, 60);
    expect(await edge.cache.lookup('k1')).toEqual({ state: 'miss' });
    await edge.close();
  });
});
