import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { freePort, startRedisServer, stopRedisServer } from '@svc/platform/edge/testing/redis-server';
import { usdToNano } from '@svc/platform';
import { api, createAccountWithKey, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';

/**
 * Issue 41 B: Idempotency-Key claims lived only in Redis, which the production layout runs
 * without persistence. After a Redis restart, retries of requests that had succeeded ran again
 * and were charged a second time (3 of 3). The account now decides the key with the hold, in
 * the log: a retry after any restart replays or is refused, never charged twice (spec 3.3, 8).
 */
describe('issue 41 B: an Idempotency-Key outlives a Redis restart', () => {
  let redis: ChildProcess | null = null;
  let redisPort: number;
  let gw: StartedGateway;
  let call: Call;
  let key: string;

  beforeAll(async () => {
    redisPort = await freePort();
    redis = await startRedisServer(redisPort);
    gw = await startGateway({ REDIS_URL: `redis://127.0.0.1:${redisPort}` });
    call = api(gw.url.replace(/\/v1$/, ''));
    ({ key } = await createAccountWithKey(call, gw.keys.admin_token, 5));
  }, 60_000);

  afterAll(async () => {
    await stopGateway(gw);
    await stopRedisServer(redis);
  });

  const balance = async () => usdToNano((await call('GET', '/v1/credits', { key })).json.data.balance);
  const chat = (text: string, stream = false) => ({
    model: 'sim/echo',
    messages: [{ role: 'user', content: text }],
    max_tokens: 16,
    ...(stream ? { stream: true } : {}),
  });
  const post = (path: string, body: unknown, idempotencyKey: string) => call('POST', path, { key, body, headers: { 'idempotency-key': idempotencyKey } });

  /** Posts until the gateway has its Redis back (503 idempotency_unavailable meanwhile), then answers. */
  async function postOnceRedisIsBack(path: string, body: unknown, idempotencyKey: string) {
    for (let i = 0; ; i++) {
      const answer = await post(path, body, idempotencyKey);
      if (answer.status !== 503 || i > 100) return answer;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  it('refuses with 409 naming the generation, and charges nothing, the retries of charged requests once Redis forgot them', async () => {
    const requests = [
      { path: '/v1/chat/completions', body: chat('first') },
      { path: '/v1/chat/completions', body: chat('streamed', true) },
      { path: '/v1/embeddings', body: { model: 'sim/embed', input: 'third' } },
    ].map((r) => ({ ...r, idempotencyKey: randomUUID() }));
    const ids: string[] = [];
    for (const r of requests) {
      const first = await post(r.path, r.body, r.idempotencyKey);
      expect(first.status).toBe(200);
      ids.push(first.headers.get('x-svc-generation-id')!);
      // Until Redis is lost, its fast path replays.
      const replayed = await post(r.path, r.body, r.idempotencyKey);
      expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    }
    await call('GET', `/v1/generation?id=${ids[2]}`, { key });
    const before = await balance();

    await stopRedisServer(redis);
    redis = await startRedisServer(redisPort);

    for (const [i, r] of requests.entries()) {
      const retried = await postOnceRedisIsBack(r.path, r.body, r.idempotencyKey);
      expect(retried.status).toBe(409);
      expect(retried.json.error).toMatchObject({ type: 'idempotency_conflict', code: 'idempotency_completed', param: 'Idempotency-Key' });
      expect(retried.json.error.message).toContain(ids[i]);
    }
    expect(await balance()).toBe(before);
  }, 60_000);

  it('still tells a reused key from a retry: another body with a charged key is 422 and free', async () => {
    const idempotencyKey = randomUUID();
    expect((await postOnceRedisIsBack('/v1/chat/completions', chat('one'), idempotencyKey)).status).toBe(200);
    await stopRedisServer(redis);
    redis = await startRedisServer(redisPort);
    const before = await balance();
    const reused = await postOnceRedisIsBack('/v1/chat/completions', chat('another'), idempotencyKey);
    expect(reused.status).toBe(422);
    expect(reused.json.error).toMatchObject({ code: 'idempotency_key_reused', param: 'Idempotency-Key' });
    expect(await balance()).toBe(before);
  }, 60_000);

  it('lets a request that failed run again under its key after the restart: an error is not billed, nor kept', async () => {
    const idempotencyKey = randomUUID();
    const body = chat('flaky');
    // Fails upstream (not billed); the key is given back, in Redis and in the log.
    const failed = await postOnceRedisIsBack(
      '/v1/chat/completions',
      { ...body, messages: [{ role: 'user', content: 'flaky\n#sim {"fail": 400}' }] },
      idempotencyKey,
    );
    expect(failed.status).toBe(400);
    await stopRedisServer(redis);
    redis = await startRedisServer(redisPort);
    const before = await balance();
    const ran = await postOnceRedisIsBack(
      '/v1/chat/completions',
      { ...body, messages: [{ role: 'user', content: 'flaky\n#sim {"fail": 400}' }] },
      idempotencyKey,
    );
    // It ran again (the provider refused it again), rather than being refused as a repeat.
    expect(ran.status).toBe(400);
    expect(ran.json.error.code).toBe('upstream_rejected');
    expect(await balance()).toBe(before);
  }, 60_000);
});
