import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import {
  closeRedis,
  connectRedis,
  DEFAULT_KEY_PREFIX,
  idempotencyEntryKey,
  isSealedSecret,
  openSecret,
  sealedResponseContext,
  type StoredResponse,
  whenReady,
} from '@svc/platform';
import { api, createAccountWithKey, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';

/**
 * Idempotency-Key on POST /v1/keys (spec 3.3, 4.19, 8): a client retrying a create after a
 * timeout gets the first key again, never a second one, and the answer kept for that replay
 * (it holds the secret) is sealed wherever it is kept.
 */
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/15';
const ADMIN_TOKEN = 'keys-idempotency-admin-token';

describe.each([
  ['in memory', {}],
  ['on Redis', { REDIS_URL }],
])('Idempotency-Key on POST /v1/keys %s', (backend, env: Record<string, string>) => {
  const onRedis = backend === 'on Redis';
  let gw: StartedGateway;
  let call: Call;
  let redis: Redis | null = null;
  /** Entries this suite wrote to the shared Redis, removed at the end. */
  const written: string[] = [];

  beforeAll(async () => {
    gw = await startGateway({ ...env, SVC_ADMIN_TOKEN: ADMIN_TOKEN });
    call = api(gw.url.replace(/\/v1$/, ''));
    if (onRedis) {
      redis = connectRedis(REDIS_URL);
      if (!(await whenReady(redis, 5_000))) throw new Error(`Redis at ${REDIS_URL} is not reachable`);
    }
  }, 60_000);

  afterAll(async () => {
    if (redis) {
      if (written.length > 0) await redis.del(...written);
      await closeRedis(redis);
    }
    await stopGateway(gw);
  });

  /** A new account and a management key of it: each test counts only the keys it made. */
  const manager = async () => {
    const { key } = await createAccountWithKey(call, ADMIN_TOKEN, 5, { scope: 'management' });
    const me = await call('GET', '/v1/key', { key });
    expect(me.status).toBe(200);
    return { key, id: me.json.data.id as string };
  };
  const create = (key: string, body: unknown, headers: Record<string, string> = {}) => call('POST', '/v1/keys', { key, body, headers });
  const idem = (value = `create-${randomUUID()}`) => ({ 'idempotency-key': value });
  /** Keys of that name the manager sees (GET /v1/keys lists its whole workspace). */
  const listed = async (key: string, name: string) => {
    const r = await call('GET', '/v1/keys', { key });
    expect(r.status).toBe(200);
    return (r.json.data as { id: string; name: string }[]).filter((k) => k.name === name);
  };
  /** KeyCreated events of that name in the log: what really happened, whatever the read model says. */
  const createdEvents = async (name: string) =>
    (await gw.runtime.store.readAll()).filter((e) => e.type === 'KeyCreated' && (e.data as { name?: string }).name === name);
  const entryOf = (managerId: string, idempotencyKey: string) => {
    const entry = idempotencyEntryKey(DEFAULT_KEY_PREFIX, managerId, idempotencyKey);
    written.push(entry);
    return entry;
  };

  it('replays the first answer (same data, same secret) with idempotent-replayed, and only one key exists', async () => {
    const m = await manager();
    const name = `retry-${randomUUID()}`;
    const headers = idem();
    const body = { name, limit: 5, limit_reset: 'weekly', allowed_models: ['sim/echo'] };

    const first = await create(m.key, body, headers);
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(first.json.key).toMatch(/^svc_(live|test)_[A-Za-z0-9]{40}$/);
    expect(first.json.data).toMatchObject({ name, limit: 5, limit_reset: 'weekly' });

    const again = await create(m.key, body, headers);
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('content-type')).toMatch(/^application\/json/);
    expect(again.json).toEqual(first.json);

    // Canonical body: the order of JSON keys does not make it another request.
    const reordered = JSON.stringify({ allowed_models: ['sim/echo'], limit_reset: 'weekly', limit: 5, name });
    const third = await create(m.key, reordered, headers);
    expect(third.headers.get('idempotent-replayed')).toBe('true');
    expect(third.json.key).toBe(first.json.key);

    const keys = await listed(m.key, name);
    expect(keys.map((k) => k.id)).toEqual([first.json.data.id]);
    expect(await createdEvents(name)).toHaveLength(1);
    // The replayed secret is the key that exists, and it works.
    const own = await call('GET', '/v1/key', { key: again.json.key });
    expect(own.status).toBe(200);
    expect(own.json.data.id).toBe(first.json.data.id);
  });

  it('two identical creates at once: one key; the other answer is 409 idempotency_conflict or the replay', async () => {
    const m = await manager();
    const name = `race-${randomUUID()}`;
    const headers = idem();
    const results = await Promise.all([create(m.key, { name }, headers), create(m.key, { name }, headers)]);
    const created = results.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null);
    expect(created).toHaveLength(1);
    const [other] = results.filter((r) => r !== created[0]);
    if (other.status === 409) {
      expect(other.json).toEqual({
        error: { type: 'idempotency_conflict', code: 'idempotency_conflict', param: 'Idempotency-Key', message: expect.stringContaining('still running') },
      });
    } else {
      expect(other.status).toBe(201);
      expect(other.headers.get('idempotent-replayed')).toBe('true');
      expect(other.json).toEqual(created[0].json);
    }
    expect((await listed(m.key, name)).map((k) => k.id)).toEqual([created[0].json.data.id]);
    expect(await createdEvents(name)).toHaveLength(1);
    // Whichever way the race went, a retry now gets the key that was made.
    const retry = await create(m.key, { name }, headers);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.json.key).toBe(created[0].json.key);
  });

  it('the same Idempotency-Key with another body is 422 idempotency_key_reused and creates nothing', async () => {
    const m = await manager();
    const headers = idem();
    const name = `first-${randomUUID()}`;
    expect((await create(m.key, { name }, headers)).status).toBe(201);
    const otherName = `second-${randomUUID()}`;
    const reused = await create(m.key, { name: otherName }, headers);
    expect(reused.status).toBe(422);
    expect(reused.json.error).toMatchObject({ type: 'invalid_request_error', code: 'idempotency_key_reused', param: 'Idempotency-Key' });
    expect(await listed(m.key, otherName)).toEqual([]);
    expect(await createdEvents(otherName)).toHaveLength(0);
  });

  it('keys Idempotency-Key per management key: another one sending the same key and body gets a key of its own', async () => {
    const [a, b] = [await manager(), await manager()];
    const headers = idem();
    const name = `shared-${randomUUID()}`;
    const fromA = await create(a.key, { name }, headers);
    const fromB = await create(b.key, { name }, headers);
    expect([fromA.status, fromB.status]).toEqual([201, 201]);
    expect(fromB.headers.get('idempotent-replayed')).toBeNull();
    expect(fromB.json.key).not.toBe(fromA.json.key);
    expect(await createdEvents(name)).toHaveLength(2);
  });

  it('keeps nothing of a create refused by validation: the same key then creates with the corrected body', async () => {
    const m = await manager();
    const headers = idem();
    const name = `fixed-${randomUUID()}`;
    // Refused by the body's validation, before anything is claimed...
    const malformed = await create(m.key, { name, rpm_limit: 'lots' }, headers);
    expect(malformed.status).toBe(400);
    expect(malformed.json.error.param).toBe('rpm_limit');
    // ...and by the service once claimed (above the default), which gives the claim back.
    const tooHigh = await create(m.key, { name, rpm_limit: 1_000_000_000 }, headers);
    expect(tooHigh.status).toBe(400);
    expect(tooHigh.json.error.param).toBe('rpm_limit');
    expect(tooHigh.headers.get('idempotent-replayed')).toBeNull();
    if (redis) expect(await redis.exists(entryOf(m.id, headers['idempotency-key']))).toBe(0);

    const corrected = await create(m.key, { name, rpm_limit: 30 }, headers);
    expect(corrected.status).toBe(201);
    expect(corrected.headers.get('idempotent-replayed')).toBeNull();
    expect(corrected.json.data.rpm_limit).toBe(30);
    expect(await createdEvents(name)).toHaveLength(1);
  });

  it('refuses an Idempotency-Key over 255 characters with 400 naming the header, and creates nothing', async () => {
    const m = await manager();
    const name = `long-${randomUUID()}`;
    const refused = await create(m.key, { name }, { 'idempotency-key': 'k'.repeat(256) });
    expect(refused.status).toBe(400);
    expect(refused.json.error).toMatchObject({ type: 'invalid_request_error', param: 'Idempotency-Key' });
    expect(await createdEvents(name)).toHaveLength(0);
    const longest = await create(m.key, { name }, { 'idempotency-key': 'k'.repeat(255) });
    expect(longest.status).toBe(201);
  });

  it('without the header, every create makes a key, as before', async () => {
    const m = await manager();
    const name = `plain-${randomUUID()}`;
    const [one, two] = [await create(m.key, { name }), await create(m.key, { name })];
    expect([one.status, two.status]).toEqual([201, 201]);
    expect(one.json.key).not.toBe(two.json.key);
    expect(await listed(m.key, name)).toHaveLength(2);
  });

  // The in-memory store's copy is checked by the sealed store's own tests (sealed-idempotency.spec.ts).
  if (onRedis)
    it('keeps in Redis only the sealed answer: no secret, no key id, and it opens to the answer sent', async () => {
      const m = await manager();
      const headers = idem();
      const name = `sealed-${randomUUID()}`;
      const first = await create(m.key, { name }, headers);
      expect(first.status).toBe(201);
      const secret = first.json.key as string;

      const entry = await redis!.hgetall(entryOf(m.id, headers['idempotency-key']));
      const raw = JSON.stringify(entry);
      expect(entry.response).toBeDefined();
      expect(raw).not.toContain(secret);
      expect(raw).not.toContain(secret.slice(-40));
      expect(raw).not.toContain(first.json.data.id);
      expect(raw).not.toContain(name);
      const held = JSON.parse(entry.response) as StoredResponse;
      expect(held.status).toBe(201);
      expect(isSealedSecret(held.body)).toBe(true);

      // What the seal holds is the answer itself, under this gateway's encryption key.
      const opened = JSON.parse(openSecret(gw.runtime.config.encryptionKey!, held.body, sealedResponseContext(m.id, headers['idempotency-key'], entry.fp)));
      expect(JSON.parse(opened.body)).toEqual(first.json);
    });
});
