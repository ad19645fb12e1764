import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hashKeySecret } from '@svc/identity';
import { PgSqlRunner } from '@svc/platform';
import { CALLER_KEY, catalogWithStub, OPERATOR_KEY, startUpstream } from '../support/byok-upstream';
import { twoGateways } from '../support/second-gateway';

const ADMIN_TOKEN = 'admin-token-for-revocation-tests';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
/** Calls with a key before it changes: more than enough for a process to have it in its cache. */
const WARM_CALLS = 5;

async function until(condition: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('revocation is immediate across gateway processes that cache keys (spec 3.3, 5.5)', () => {
  const gateways = twoGateways('revoke', ADMIN_TOKEN);
  let db: PgSqlRunner;
  let management: string;

  beforeAll(async () => {
    db = await PgSqlRunner.connect({ connectionString: gateways.databaseUrl, max: 2 });
    const accountId = (await gateways.one('POST', '/admin/accounts', { body: { initial_credits_usd: 1 }, headers: admin })).json.id;
    management = (await gateways.one('POST', `/admin/accounts/${accountId}/keys`, { body: { scope: 'management' }, headers: admin })).json.key;
  });

  afterAll(async () => {
    await db?.close();
  });

  const createKey = async (name: string) => {
    const created = await gateways.one('POST', '/v1/keys', { key: management, body: { name } });
    expect(created.status).toBe(201);
    return { id: created.json.data.id as string, secret: created.json.key as string };
  };
  const warm = async (call: typeof gateways.one, secret: string) => {
    for (let i = 0; i < WARM_CALLS; i++) expect((await call('GET', '/v1/key', { key: secret })).status).toBe(200);
  };
  const refused = async (call: typeof gateways.one, secret: string) => {
    const after = await call('GET', '/v1/key', { key: secret });
    expect(after.status).toBe(401);
    expect(after.json.error.type).toBe('authentication_error');
  };
  /** The spawned process's lease: the one row that is not this process's. */
  const otherHolder = async () => {
    const { rows } = await db.query<{ holder: string }>('SELECT holder FROM auth_cache_leases WHERE holder <> $1', [gateways.first.runtime.authCache!.holder]);
    expect(rows).toHaveLength(1);
    return rows[0].holder;
  };
  const killLeaseConnection = (holder: string) =>
    db.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [`svc-auth-cache ${holder}`]);
  const leaseValid = async (holder: string) =>
    (await db.query<{ valid: boolean }>('SELECT expires_at > now() AS valid FROM auth_cache_leases WHERE holder = $1', [holder])).rows[0]?.valid === true;

  it('both processes cache keys under a lease', async () => {
    expect(gateways.first.runtime.authCache).not.toBeNull();
    expect(await leaseValid(await otherHolder())).toBe(true);
  });

  it('once DELETE /v1/keys/{id} has answered on one process, the other refuses the key it had cached', async () => {
    const { one, two } = gateways;
    for (let i = 0; i < 5; i++) {
      const { id, secret } = await createKey(`k${i}`);
      await warm(two, secret);
      expect((await one('DELETE', `/v1/keys/${id}`, { key: management })).status).toBe(200);
      // No wait between the two: the DELETE answered only once the other process had let go of the key.
      await refused(two, secret);
      expect((await two('POST', '/v1/chat/completions', { key: secret, body: { model: 'sim/echo', messages: [{ role: 'user', content: 'x' }] } })).status).toBe(
        401,
      );
    }
  }, 60_000);

  it('the other way round: a DELETE answered by the process without projections empties this process cache first', async () => {
    const { one, two } = gateways;
    const cache = gateways.first.runtime.authCache!;
    for (let i = 0; i < 3; i++) {
      const { id, secret } = await createKey(`r${i}`);
      // Cached once a call has found it there: an invalidation NOTIFY of the key's own creation
      // may still arrive after the lease's renewal acknowledged it, and empty the cache once more.
      await until(async () => {
        await warm(one, secret);
        return cache.has(hashKeySecret(secret));
      });
      expect((await two('DELETE', `/v1/keys/${id}`, { key: management })).status).toBe(200);
      expect(cache.has(hashKeySecret(secret))).toBe(false);
      await refused(one, secret);
    }
  }, 60_000);

  it('a DELETE answers only once the other process has lost its lease when its connection is killed and cannot come back', async () => {
    const { one, two } = gateways;
    const holder = await otherHolder();
    const { id, secret } = await createKey('killed');
    await warm(two, secret);
    // From now on its renewals hang, as behind a network partition. Not with a row lock: an open
    // transaction that wrote would hold back the event store's reads, and the projections with them.
    await db.exec(`
      CREATE TABLE stalled_leases (holder text);
      INSERT INTO stalled_leases VALUES ('${holder}');
      CREATE FUNCTION stall_lease() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        WHILE EXISTS (SELECT 1 FROM stalled_leases WHERE holder = NEW.holder) LOOP PERFORM pg_sleep(0.05); END LOOP;
        RETURN NEW;
      END $$;
      CREATE TRIGGER stall_lease BEFORE INSERT ON auth_cache_leases FOR EACH ROW EXECUTE FUNCTION stall_lease();
    `);
    try {
      await killLeaseConnection(holder);
      // Still answered, from PostgreSQL: without a lease the process neither serves from its cache nor fills it.
      await warm(two, secret);
      expect((await one('DELETE', `/v1/keys/${id}`, { key: management })).status).toBe(200);
      // The DELETE waited for the lease to run out: it could not have been acknowledged.
      expect(await leaseValid(holder)).toBe(false);
      await refused(two, secret);
    } finally {
      await db.exec('DELETE FROM stalled_leases');
      await db.exec('DROP TRIGGER stall_lease ON auth_cache_leases; DROP FUNCTION stall_lease(); DROP TABLE stalled_leases');
    }
    // It takes a lease again, starting empty, and keeps up with the next revocation.
    await until(() => leaseValid(holder));
    await refused(two, secret);
    const next = await createKey('after');
    await warm(two, next.secret);
    expect((await one('DELETE', `/v1/keys/${next.id}`, { key: management })).status).toBe(200);
    await refused(two, next.secret);
  }, 60_000);

  it('a killed lease connection just before a revocation: the other process refuses the key as soon as the DELETE has answered', async () => {
    const { one, two } = gateways;
    const holder = await otherHolder();
    for (let i = 0; i < 3; i++) {
      const { id, secret } = await createKey(`reconnect${i}`);
      await warm(two, secret);
      await until(() => leaseValid(holder));
      await killLeaseConnection(holder);
      expect((await one('DELETE', `/v1/keys/${id}`, { key: management })).status).toBe(200);
      await refused(two, secret);
    }
  }, 60_000);
});

describe('revocation across gateway processes with SVC_AUTH_CACHE=off', () => {
  const gateways = twoGateways('revoke_uncached', ADMIN_TOKEN, { SVC_AUTH_CACHE: 'off' });

  it('reads keys from PostgreSQL on every request, takes no lease, and refuses a revoked key at once', async () => {
    const { one, two } = gateways;
    expect(gateways.first.runtime.authCache).toBeNull();
    const db = await PgSqlRunner.connect({ connectionString: gateways.databaseUrl, max: 1 });
    try {
      expect((await db.query('SELECT * FROM auth_cache_leases')).rows).toEqual([]);
    } finally {
      await db.close();
    }
    const accountId = (await one('POST', '/admin/accounts', { body: { initial_credits_usd: 1 }, headers: admin })).json.id;
    const management = (await one('POST', `/admin/accounts/${accountId}/keys`, { body: { scope: 'management' }, headers: admin })).json.key;
    const created = await one('POST', '/v1/keys', { key: management, body: { name: 'uncached' } });
    for (let i = 0; i < WARM_CALLS; i++) expect((await two('GET', '/v1/key', { key: created.json.key })).status).toBe(200);
    expect((await one('DELETE', `/v1/keys/${created.json.data.id}`, { key: management })).status).toBe(200);
    expect((await two('GET', '/v1/key', { key: created.json.key })).status).toBe(401);
  }, 60_000);
});

describe('a saved or deleted provider key is used at once by another gateway process (BYOK, spec 1)', () => {
  const env: Record<string, string> = { SVC_ENCRYPTION_KEY: randomBytes(32).toString('base64') };
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  beforeAll(async () => {
    upstream = await startUpstream();
    env.SVC_CATALOG = catalogWithStub(mkdtempSync(join(tmpdir(), 'svc-e2e-')), upstream.url);
  });
  // After the hook above: the catalog names the stub upstream.
  const gateways = twoGateways('byok_revoke', ADMIN_TOKEN, env);
  afterAll(async () => {
    await upstream?.close();
  });

  it('the other process calls the upstream with the key saved, then with the operator key once the delete has answered', async () => {
    const { one, two } = gateways;
    const accountId = (await one('POST', '/admin/accounts', { body: { initial_credits_usd: 1 }, headers: admin })).json.id;
    const key = (await one('POST', `/admin/accounts/${accountId}/keys`, { body: {}, headers: admin })).json.key;
    const providerKeys = `/admin/accounts/${accountId}/provider-keys/stub`;
    const ask = async () => {
      const answer = await two('POST', '/v1/chat/completions', {
        key,
        body: { model: 'test/byok', messages: [{ role: 'user', content: 'hello' }], max_tokens: 50 },
      });
      expect(answer.status).toBe(200);
      return upstream.seen.at(-1);
    };
    for (let i = 0; i < 3; i++) {
      expect((await one('PUT', providerKeys, { body: { api_key: CALLER_KEY }, headers: admin })).status).toBe(200);
      for (let j = 0; j < WARM_CALLS; j++) expect(await ask()).toBe(`Bearer ${CALLER_KEY}`);
      expect((await one('DELETE', providerKeys, { headers: admin })).status).toBe(200);
      for (let j = 0; j < WARM_CALLS; j++) expect(await ask()).toBe(`Bearer ${OPERATOR_KEY}`);
    }
  }, 60_000);
});
