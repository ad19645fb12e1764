import OpenAI from 'openai';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { accountStream } from '@svc/ledger';
import { ManualClock, usdToNano } from '@svc/platform';
import { freePort, startRedisServer, stopRedisServer } from '@svc/platform/edge/testing/redis-server';
import { countChatPromptTokens } from '@svc/providers';
import { waitFor } from '@svc/eventstore/testing/contract';
import { api, createAccountWithKey, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { twoGateways } from '../support/second-gateway';

/**
 * Issue 6, edge controls (spec 3.3, 4, 4.2 "Response caching", 7 409/429 rows, 8): rate limits
 * that hold across gateway processes sharing Redis, Idempotency-Key and the response cache,
 * and what happens while Redis is down.
 */
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/15';
const ADMIN_TOKEN = 'edge-admin-token-0123456789';
const user = (content: string) => [{ role: 'user', content }];
const chatBody = (content: string, extra: object = {}) => ({ model: 'sim/echo', messages: user(content), max_tokens: 20, ...extra });

/** A funded account and one of its keys, through the operator API. */
const accountWithKey = (call: Call, keySettings: object = {}) => createAccountWithKey(call, ADMIN_TOKEN, 5, keySettings);

describe('rate limits across two gateway processes sharing Redis (spec 8)', () => {
  // Live keys: 12 concurrent requests (above the rpm test's 10), so the concurrency test needs few requests.
  const gateways = twoGateways('edge', ADMIN_TOKEN, { REDIS_URL, SVC_RATE_LIMITS_LIVE: 'concurrent=12' });

  it('a key with 10 requests per minute gets exactly 10 successes across both, then 429 with retry-after', async () => {
    const { one, two } = gateways;
    const { key } = await accountWithKey(one, { rpm_limit: 10 });
    const send = (i: number) => (i % 2 ? one : two)('POST', '/v1/chat/completions', { key, body: chatBody(`hi ${i}`) });
    // Two to each process first, one at a time: both count some of the ten whatever the load on
    // the machine (sent all at once, one process sometimes took all ten before the other answered).
    const first = [];
    for (let i = 0; i < 4; i++) first.push(await send(i));
    // Then the other twenty at once, racing for the last six across the two processes.
    const results = [...first, ...(await Promise.all(Array.from({ length: 20 }, (_, i) => send(i + 4))))];
    const ok = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 429);
    expect(first.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    // Twelve were sent to each process: a count of its own would have let each admit ten.
    expect(ok).toHaveLength(10);
    expect(refused).toHaveLength(14);
    for (const r of refused) {
      expect(r.json.error).toMatchObject({ type: 'rate_limit_error', code: 'requests_limit_exceeded' });
      const retryAfter = Number(r.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(r.headers.get('x-ratelimit-limit-requests')).toBe('10');
      expect(r.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    }
    // Any /v1 call counts: reading the key is refused too within the minute.
    expect((await one('GET', '/v1/key', { key })).status).toBe(429);
  });

  it('concurrent requests: exactly 12 in flight across both, the rest 429; a finished one frees its slot', async () => {
    const { one, two } = gateways;
    const { key } = await accountWithKey(one);
    const slow = (i: number) => (i % 2 ? one : two)('POST', '/v1/chat/completions', { key, body: chatBody(`wait ${i}\n#sim {"delay_ms": 1500}`) });
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => slow(i)));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(12);
    expect(statuses.filter((s) => s === 429)).toHaveLength(8);
    for (const r of results.filter((r) => r.status === 429)) {
      expect(r.json.error).toMatchObject({ type: 'rate_limit_error', code: 'concurrent_requests_limit_exceeded' });
      expect(r.headers.get('retry-after')).toBe('1');
    }
    // All slots were given back when the responses ended.
    const again = await Promise.all(Array.from({ length: 12 }, (_, i) => slow(i)));
    expect(again.map((r) => r.status)).toEqual(Array(12).fill(200));
  }, 30_000);
});

/** The same behaviours on the in-memory stores (one process) and on Redis. */
describe.each([
  ['in memory', {}],
  ['on Redis', { REDIS_URL }],
])('Idempotency-Key, response cache and token limits %s', (_name, env: Record<string, string>) => {
  const clock = new ManualClock(new Date());
  let gw: StartedGateway;
  let call: Call;
  let client: OpenAI;
  let accountId: string;
  let key: string;

  beforeAll(async () => {
    gw = await startGateway({ ...env, SVC_ADMIN_TOKEN: ADMIN_TOKEN }, undefined, { clock });
    call = api(gw.url.replace(/\/v1$/, ''));
    ({ accountId, key } = await accountWithKey(call));
    client = new OpenAI({ baseURL: gw.url, apiKey: key, maxRetries: 0 });
  }, 60_000);
  afterAll(() => stopGateway(gw));

  const post = (body: unknown, headers: Record<string, string> = {}, as = key) => call('POST', '/v1/chat/completions', { key: as, body, headers });
  const balance = async () => usdToNano((await call('GET', '/v1/credits', { key })).json.data.balance);
  const charges = async () => (await gw.runtime.store.readStream(accountStream(accountId))).filter((e) => e.type === 'UsageCharged').length;
  const settled = async (count: number) => waitFor(async () => (await charges()) === count);
  const idem = () => ({ 'idempotency-key': `idem-${randomUUID()}` });

  describe('rate limit headers', () => {
    it('are on every /v1 response, success or error', async () => {
      for (const r of [await post(chatBody('hi')), await post({ model: 'nope/none', messages: user('hi') }), await call('GET', '/v1/key', { key })]) {
        expect(r.headers.get('x-ratelimit-limit-requests')).toBe('600');
        expect(Number(r.headers.get('x-ratelimit-remaining-requests'))).toBeLessThan(600);
        expect(r.headers.get('x-ratelimit-reset-requests')).toMatch(/^\d+s$/);
        expect(r.headers.get('x-ratelimit-limit-tokens')).toBe('2000000');
        expect(r.headers.get('x-ratelimit-remaining-tokens')).toMatch(/^\d+$/);
        expect(r.headers.get('x-ratelimit-reset-tokens')).toMatch(/^\d+s$/);
      }
    });
  });

  describe('tokens per minute', () => {
    it('a key over its tokens per minute gets 429 tokens_limit_exceeded with retry-after, and is not billed', async () => {
      const { key: small } = await accountWithKey(call, { tpm_limit: 60 });
      const first = await post(chatBody('word '.repeat(30), { max_tokens: 100 }), {}, small);
      expect(first.status).toBe(200);
      expect(first.headers.get('x-ratelimit-limit-tokens')).toBe('60');
      const used = first.json.usage.prompt_tokens + first.json.usage.completion_tokens;
      expect(used).toBeGreaterThan(60);

      const second = await post(chatBody('hi'), {}, small);
      expect(second.status).toBe(429);
      expect(second.json.error).toMatchObject({ type: 'rate_limit_error', code: 'tokens_limit_exceeded' });
      expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(second.headers.get('x-ratelimit-limit-tokens')).toBe('60');
      expect(second.headers.get('x-ratelimit-remaining-tokens')).toBe('0');
    });

    it('a prompt larger than what is left of the minute is refused before anything is held', async () => {
      const { key: small, accountId: acc } = await accountWithKey(call, { tpm_limit: 30 });
      const long = 'word '.repeat(40);
      expect(countChatPromptTokens(user(long))).toBeGreaterThan(30);
      const r = await post(chatBody(long), {}, small);
      expect(r.status).toBe(429);
      expect(r.json.error.code).toBe('tokens_limit_exceeded');
      expect((await gw.runtime.store.readStream(accountStream(acc))).map((e) => e.type)).not.toContain('HoldPlaced');
    });
  });

  describe('admission with the prompt (spec 8)', () => {
    it('a prompt refused for its tokens counts nowhere: the requests window is where it was', async () => {
      const { key: small } = await accountWithKey(call, { tpm_limit: 30, rpm_limit: 5 });
      const long = user('word '.repeat(40));
      const refused = await post({ model: 'sim/echo', messages: long, max_tokens: 20 }, {}, small);
      expect(refused.status).toBe(429);
      expect(refused.json.error.code).toBe('tokens_limit_exceeded');
      expect(refused.json.error.message).toContain(`This request's prompt counts ${countChatPromptTokens(long)} tokens.`);
      expect(refused.headers.get('x-ratelimit-remaining-requests')).toBe('5');
      expect(refused.headers.get('x-ratelimit-remaining-tokens')).toBe('30');
      const ok = await post(chatBody('hi'), {}, small);
      expect(ok.status).toBe(200);
      expect(ok.headers.get('x-ratelimit-remaining-requests')).toBe('4');
      expect(Number(ok.headers.get('x-ratelimit-remaining-tokens'))).toBe(30 - countChatPromptTokens(user('hi')));
    });

    it('a malformed request counts as a request, and past the limit its answer is the 429, in either interface', async () => {
      const { key: two } = await accountWithKey(call, { rpm_limit: 2 });
      const first = await post({ model: 'sim/echo' }, {}, two);
      expect(first.status).toBe(400);
      expect(first.json.error.param).toBe('messages');
      expect(first.headers.get('x-ratelimit-remaining-requests')).toBe('1');
      const second = await call('POST', '/v1/messages', { key: two, body: { model: 'sim/echo', messages: user('hi') } });
      expect(second.status).toBe(400);
      expect(second.headers.get('x-ratelimit-remaining-requests')).toBe('0');
      const chat = await post({ model: 'sim/echo' }, {}, two);
      expect(chat.status).toBe(429);
      expect(chat.json.error).toMatchObject({ type: 'rate_limit_error', code: 'requests_limit_exceeded' });
      expect(Number(chat.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      const messages = await call('POST', '/v1/messages', { key: two, body: { model: 'sim/echo', messages: user('hi') } });
      expect(messages.status).toBe(429);
      expect(messages.json).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
    });

    it.each([
      ['/v1/chat/completions', chatBody('hi')],
      ['/v1/messages', { model: 'sim/echo', max_tokens: 5, messages: user('hi') }],
      ['/v1/responses', { model: 'sim/echo', max_output_tokens: 16, input: 'hi', store: false }],
      ['/v1/completions', { model: 'sim/echo', max_tokens: 5, prompt: 'hi' }],
      ['/v1/embeddings', { model: 'sim/embed', input: 'hi' }],
      ['/v1/rerank', { model: 'sim/rerank', query: 'hi', documents: ['hi there', 'bye'] }],
      ['/v1/images/generations', { model: 'sim/image', prompt: 'a dot', size: '16x16' }],
      ['/v1/audio/speech', { model: 'sim/tts', input: 'hi', response_format: 'pcm' }],
      ['/v1/search/sim/tavily', { query: 'cats' }],
    ])('%s, admitted in the pipeline, counts an answered and a malformed request, then refuses past the limit', async (path, body) => {
      const { key: two } = await accountWithKey(call, { rpm_limit: 2 });
      const answered = await call('POST', path, { key: two, body });
      expect(answered.status).toBe(200);
      expect(answered.headers.get('x-ratelimit-remaining-requests')).toBe('1');
      const malformed = await call('POST', path, { key: two, body: { ...body, model: 42, query: 42 } });
      expect(malformed.status).toBe(400);
      expect(malformed.headers.get('x-ratelimit-remaining-requests')).toBe('0');
      const refused = await call('POST', path, { key: two, body });
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).not.toBeNull();
    });

    it('a key past its requests limit gets the 429, not the cached answer, which is not counted twice either', async () => {
      const { key: two } = await accountWithKey(call, { rpm_limit: 2 });
      const body = chatBody(`cached ${randomUUID()}`);
      const miss = await post(body, { 'x-svc-cache': 'true' }, two);
      expect(miss.headers.get('x-svc-cache-status')).toBe('MISS');
      expect(miss.headers.get('x-ratelimit-remaining-requests')).toBe('1');
      const hit = await post(body, { 'x-svc-cache': 'true' }, two);
      expect(hit.headers.get('x-svc-cache-status')).toBe('HIT');
      expect(hit.headers.get('x-ratelimit-remaining-requests')).toBe('0');
      const refused = await post(body, { 'x-svc-cache': 'true' }, two);
      expect(refused.status).toBe(429);
      expect(refused.json.error.code).toBe('requests_limit_exceeded');
      expect(refused.headers.get('x-svc-cache-status')).toBeNull();
    });
  });

  describe('Idempotency-Key (spec 3.3)', () => {
    it('409 while the first request runs; the first response replayed after, billed once', async () => {
      const headers = idem();
      const body = chatBody('slow one\n#sim {"delay_ms": 600}');
      const before = await balance();
      const chargesBefore = await charges();
      const first = post(body, headers);
      await new Promise((resolve) => setTimeout(resolve, 150));
      const during = await post(body, headers);
      expect(during.status).toBe(409);
      expect(during.json.error).toMatchObject({ type: 'idempotency_conflict', code: 'idempotency_conflict' });

      const answered = await first;
      expect(answered.status).toBe(200);
      expect(answered.headers.get('idempotent-replayed')).toBeNull();
      const replayed = await post(body, headers);
      expect(replayed.status).toBe(200);
      expect(replayed.headers.get('idempotent-replayed')).toBe('true');
      expect(replayed.json).toEqual(answered.json);
      expect(replayed.headers.get('x-svc-generation-id')).toBe(answered.json.id);

      await settled(chargesBefore + 1);
      expect(before - (await balance())).toBe(usdToNano(answered.json.usage.cost));
      expect(await charges()).toBe(chargesBefore + 1);
    });

    it('the same key with another body is 422 idempotency_key_reused, and changes nothing', async () => {
      const headers = idem();
      expect((await post(chatBody('first'), headers)).status).toBe(200);
      const chargesBefore = await charges();
      const reused = await post(chatBody('second'), headers);
      expect(reused.status).toBe(422);
      expect(reused.json.error).toMatchObject({ type: 'invalid_request_error', code: 'idempotency_key_reused', param: 'Idempotency-Key' });
      expect(await charges()).toBe(chargesBefore);
    });

    it('a failed request keeps nothing: a retry with the same key runs again', async () => {
      const headers = idem();
      const failed = await post(chatBody('boom\n#sim {"fail": 400}'), headers);
      expect(failed.status).toBe(400);
      const retried = await post(chatBody('boom\n#sim {"fail": 400}'), headers);
      expect(retried.status).toBe(400);
      expect(retried.headers.get('idempotent-replayed')).toBeNull();
    });

    it('replays a streamed response as the same event stream', async () => {
      const headers = idem();
      const body = { ...chatBody('stream me'), stream: true, stream_options: { include_usage: true } };
      const chargesBefore = await charges();
      const first = await post(body, headers);
      expect(first.headers.get('content-type')).toMatch(/^text\/event-stream/);
      await settled(chargesBefore + 1);
      const replay = await post(body, headers);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.headers.get('content-type')).toMatch(/^text\/event-stream/);
      expect(replay.json).toBe(first.json);
      expect(await charges()).toBe(chargesBefore + 1);
    });

    it('refuses a key longer than 255 characters, naming the header', async () => {
      const r = await post(chatBody('hi'), { 'idempotency-key': 'k'.repeat(256) });
      expect(r.status).toBe(400);
      expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param: 'Idempotency-Key' });
    });
  });

  describe('response cache (spec 4.2)', () => {
    const cache = (extra: Record<string, string> = {}) => ({ 'x-svc-cache': 'true', ...extra });

    it('MISS, then a HIT that is answered with usage 0 and not billed', async () => {
      const body = chatBody(`cache me ${randomUUID()}`);
      const miss = await post(body, cache());
      expect(miss.status).toBe(200);
      expect(miss.headers.get('x-svc-cache-status')).toBe('MISS');
      expect(miss.headers.get('x-svc-cache-ttl')).toBe('300');
      await settled(await charges());
      const before = await balance();
      const chargesBefore = await charges();

      clock.advance(2_000);
      const hit = await post(body, cache());
      expect(hit.status).toBe(200);
      expect(hit.headers.get('x-svc-cache-status')).toBe('HIT');
      expect(hit.headers.get('x-svc-cache-source-id')).toBe(miss.json.id);
      expect(Number(hit.headers.get('x-svc-cache-age'))).toBe(2);
      expect(hit.headers.get('x-svc-cache-ttl')).toBe('300');
      expect(hit.json.id).not.toBe(miss.json.id);
      expect(hit.headers.get('x-svc-generation-id')).toBe(hit.json.id);
      expect(hit.json.choices).toEqual(miss.json.choices);
      expect(hit.json.usage).toMatchObject({ prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cost: 0 });
      expect(await balance()).toBe(before);
      expect(await charges()).toBe(chargesBefore);
    });

    it('ignores the order of JSON keys, but not a changed parameter, nor another API key', async () => {
      const text = `order ${randomUUID()}`;
      expect((await post({ model: 'sim/echo', messages: user(text), max_tokens: 20, temperature: 0.5 }, cache())).headers.get('x-svc-cache-status')).toBe(
        'MISS',
      );
      const reordered = JSON.stringify({ temperature: 0.5, max_tokens: 20, messages: [{ content: text, role: 'user' }], model: 'sim/echo' });
      expect((await post(reordered, cache())).headers.get('x-svc-cache-status')).toBe('HIT');
      expect((await post({ model: 'sim/echo', messages: user(text), max_tokens: 20, temperature: 0.7 }, cache())).headers.get('x-svc-cache-status')).toBe(
        'MISS',
      );
      const { key: other } = await accountWithKey(call);
      expect(
        (await post({ model: 'sim/echo', messages: user(text), max_tokens: 20, temperature: 0.5 }, cache(), other)).headers.get('x-svc-cache-status'),
      ).toBe('MISS');
    });

    it('an entry past its TTL is a MISS (moved clock)', async () => {
      const body = chatBody(`ttl ${randomUUID()}`);
      expect((await post(body, cache({ 'x-svc-cache-ttl': '5' }))).headers.get('x-svc-cache-ttl')).toBe('5');
      clock.advance(4_000);
      expect((await post(body, cache())).headers.get('x-svc-cache-status')).toBe('HIT');
      clock.advance(1_500);
      expect((await post(body, cache())).headers.get('x-svc-cache-status')).toBe('MISS');
    });

    it('X-Svc-Cache-Clear answers afresh (billed) and replaces the entry', async () => {
      const body = chatBody(`clear ${randomUUID()}`);
      const first = await post(body, cache());
      const cleared = await post(body, cache({ 'x-svc-cache-clear': 'true' }));
      expect(cleared.headers.get('x-svc-cache-status')).toBe('MISS');
      expect(cleared.json.id).not.toBe(first.json.id);
      expect(cleared.json.usage.cost).toBeGreaterThan(0);
      const hit = await post(body, cache());
      expect(hit.headers.get('x-svc-cache-source-id')).toBe(cleared.json.id);
    });

    it('the router-named alias header enables it too; without the header nothing is cached', async () => {
      const body = chatBody(`alias ${randomUUID()}`);
      expect((await post(body)).headers.get('x-svc-cache-status')).toBeNull();
      expect((await post(body, { 'x-openrouter-cache': 'true' })).headers.get('x-svc-cache-status')).toBe('MISS');
      expect((await post(body, { 'x-openrouter-cache': 'true' })).headers.get('x-svc-cache-status')).toBe('HIT');
    });

    it('a streamed request is cached as its events, and a HIT replays them as SSE with usage 0 (SDK)', async () => {
      const params = { ...chatBody(`stream cache ${randomUUID()}`), stream: true as const, stream_options: { include_usage: true } };
      const read = async () => {
        const { data: stream, response } = await client.chat.completions
          .create(params as OpenAI.ChatCompletionCreateParamsStreaming, { headers: cache() })
          .withResponse();
        let text = '';
        let usage: OpenAI.CompletionUsage | null | undefined;
        for await (const chunk of stream) {
          text += chunk.choices[0]?.delta.content ?? '';
          usage = chunk.usage ?? usage;
        }
        return {
          text,
          usage: usage as OpenAI.CompletionUsage & { cost: number },
          status: response.headers.get('x-svc-cache-status'),
          type: response.headers.get('content-type'),
        };
      };
      const miss = await read();
      expect(miss.status).toBe('MISS');
      expect(miss.usage.cost).toBeGreaterThan(0);
      const hit = await read();
      expect(hit.status).toBe('HIT');
      expect(hit.type).toMatch(/^text\/event-stream/);
      expect(hit.text).toBe(miss.text);
      expect(hit.usage).toMatchObject({ prompt_tokens: 0, completion_tokens: 0, cost: 0 });
    });

    it('refuses a TTL outside 1..86400 and a malformed flag, naming the header', async () => {
      for (const [headers, param] of [
        [cache({ 'x-svc-cache-ttl': '0' }), 'X-Svc-Cache-TTL'],
        [cache({ 'x-svc-cache-ttl': '86401' }), 'X-Svc-Cache-TTL'],
        [{ 'x-svc-cache': 'yes' }, 'X-Svc-Cache'],
      ] as const) {
        const r = await post(chatBody('hi'), headers);
        expect(r.status).toBe(400);
        expect(r.json.error.param).toBe(param);
      }
    });
  });
});

describe('Redis stopped mid-test: the gateway keeps serving (docs/api/endpoints.md, "When Redis is unreachable")', () => {
  let redis: ChildProcess | null = null;
  let port: number;
  let gw: StartedGateway;
  let call: Call;
  let key: string;

  beforeAll(async () => {
    port = await freePort();
    redis = await startRedisServer(port);
    gw = await startGateway({ REDIS_URL: `redis://127.0.0.1:${port}/0`, SVC_ADMIN_TOKEN: ADMIN_TOKEN });
    call = api(gw.url.replace(/\/v1$/, ''));
    ({ key } = await accountWithKey(call));
  }, 60_000);
  afterAll(async () => {
    await stopGateway(gw);
    await stopRedisServer(redis);
  });

  const post = (body: unknown, headers: Record<string, string> = {}) => call('POST', '/v1/chat/completions', { key, body, headers });
  const cached = { 'x-svc-cache': 'true' };

  it('caches on Redis while it is up', async () => {
    const body = chatBody('before the outage');
    expect((await post(body, cached)).headers.get('x-svc-cache-status')).toBe('MISS');
    expect((await post(body, cached)).headers.get('x-svc-cache-status')).toBe('HIT');
  });

  it('while Redis is down: answers with limits per process, bypasses the cache, and refuses Idempotency-Key with 503', async () => {
    await stopRedisServer(redis);
    redis = null;
    const plain = await post(chatBody('during the outage'));
    expect(plain.status).toBe(200);
    expect(plain.headers.get('x-ratelimit-limit-requests')).toBe('600');

    const body = chatBody('before the outage');
    const bypassed = await post(body, cached);
    expect(bypassed.status).toBe(200);
    expect(bypassed.headers.get('x-svc-cache-status')).toBe('BYPASS');
    expect(bypassed.json.usage.cost).toBeGreaterThan(0);

    const refused = await post(chatBody('keyed'), { 'idempotency-key': `k-${randomUUID()}` });
    expect(refused.status).toBe(503);
    expect(refused.json.error).toMatchObject({ type: 'service_unavailable', code: 'idempotency_unavailable' });
    expect(refused.headers.get('retry-after')).toBe('1');
  });

  it('recovers when Redis returns', async () => {
    redis = await startRedisServer(port);
    const body = chatBody(`after the outage ${randomUUID()}`);
    // A request that looked up while Redis was still down (BYPASS) may store its answer once
    // Redis is back, so the first answer after the outage is a MISS or already a HIT.
    await waitFor(async () => (await post(body, cached)).headers.get('x-svc-cache-status') !== 'BYPASS', 10_000);
    expect((await post(body, cached)).headers.get('x-svc-cache-status')).toBe('HIT');
    const headers = { 'idempotency-key': `k-${randomUUID()}` };
    expect((await post(chatBody('keyed again'), headers)).status).toBe(200);
    expect((await post(chatBody('keyed again'), headers)).headers.get('idempotent-replayed')).toBe('true');
  }, 20_000);
});
