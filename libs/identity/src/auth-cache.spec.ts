import { randomBytes, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { AggregateStore, SqlEventStore } from '@svc/eventstore';
import { DEFAULT_KEY_SETTINGS, keyDecider, keyStream, providerKeyContext, settingsDecider, settingsStream } from '@svc/identity';
import { ManualClock, sealSecret, type SqlRunner } from '@svc/platform';
import { CountingSqlRunner } from '@svc/platform/testing/counting-sql';
import { freshPgRunner } from '@svc/platform/testing/pg';
import { ProjectionRunner } from '@svc/projections';
import { DEFAULT_POLICY, guardrailsDecider, guardrailsProjection, guardrailsStream, type GuardrailCommand } from '@svc/guardrails';
import { presetsProjection } from '@svc/presets';
import {
  ACK_WAIT_MS,
  AUTH_CACHE_CHANNEL,
  AuthCache,
  authCacheCoordination,
  initAuthCacheLeases,
  providerKeysProjection,
  settingsProjection,
  identityProjection,
  type LeaseTimings,
} from './index';
import { memoryPglite } from '@svc/platform/testing/pglite';

/** The read models whose rows the cache holds: the runner tells the caches when they change. */
const CACHED_PROJECTIONS = [identityProjection, providerKeysProjection, settingsProjection, presetsProjection, guardrailsProjection];

/** The statement of findKeyBySecretHash, and only it, is counted. */
const LOOKUP = /FROM api_key_secrets s/;

async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await condition())) {
    if (performance.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The log, its projections (with the authentication caches' coordination) and key writes that answer as the gateway's do. */
async function identityLog(sql: SqlRunner, local: () => AuthCache | null = () => null) {
  const store = new SqlEventStore(sql);
  await store.init();
  const projections = new ProjectionRunner(sql, store, CACHED_PROJECTIONS, { idleMs: 50, caches: authCacheCoordination(sql, local) });
  await projections.init();
  if (sql.dialect === 'postgres') await initAuthCacheLeases(sql);
  projections.start();
  const aggregates = new AggregateStore(store, new ManualClock());
  const written = async (position: string | undefined, projection: string) => {
    if (position) await projections.waitUntilVisible(position, [projection]);
  };
  return {
    store,
    projections,
    /** A new key of a new account (or of an organization's workspace, made by `org.member`); returns its id, account and secret hash. */
    createKey: async (id?: string, org?: { orgId: string; member: string }) => {
      const keyId = id ?? `key_${randomBytes(6).toString('hex')}`;
      const accountId = `acc_${randomBytes(6).toString('hex')}`;
      const secretHash = `hash-${keyId}`;
      await written(
        (
          await aggregates.handle(keyDecider, keyStream(keyId), {
            type: 'CreateKey',
            keyId,
            accountId,
            workspaceId: org?.orgId ?? accountId,
            orgId: org?.orgId ?? null,
            createdBy: org?.member ?? accountId,
            settings: DEFAULT_KEY_SETTINGS,
            secretHash,
            secretHint: 'svc_test_...abcd',
          })
        ).appended?.position,
        'identity',
      );
      return { keyId, accountId, secretHash };
    },
    /** Appends the revocation; `answer()` waits as a DELETE /v1/keys/{id} does before it answers. */
    appendRevocation: async (keyId: string) => {
      const position = (await aggregates.handle(keyDecider, keyStream(keyId), { type: 'RevokeKey' })).appended!.position;
      return { answer: () => written(position, 'identity') };
    },
    revoke: async (keyId: string) => written((await aggregates.handle(keyDecider, keyStream(keyId), { type: 'RevokeKey' })).appended?.position, 'identity'),
    saveProviderKey: async (accountId: string) =>
      written(
        (
          await aggregates.handle(settingsDecider, settingsStream(accountId), {
            type: 'SaveProviderKey',
            accountId,
            provider: 'sim',
            encryptedKey: sealSecret(randomBytes(32), 'sk-test', providerKeyContext(accountId, 'sim')),
            hint: '...test',
          })
        ).appended?.position,
        'provider_keys',
      ),
    /** Guardrail commands on a workspace, answered as the management API answers them. */
    guard: async (workspaceId: string, commands: GuardrailCommand[]) => {
      let position: string | undefined;
      for (const command of commands)
        position = (await aggregates.handle(guardrailsDecider, guardrailsStream(workspaceId), command)).appended?.position ?? position;
      await written(position, 'guardrails');
    },
    close: async () => {
      await projections.stop();
      await store.close();
    },
  };
}

describe('authentication cache on PostgreSQL', () => {
  let sql: Awaited<ReturnType<typeof freshPgRunner>>;
  let log: Awaited<ReturnType<typeof identityLog>>;
  let counting: CountingSqlRunner;
  let cache: AuthCache;
  const opened: AuthCache[] = [];

  const open = async (options: { capacity?: number; timings?: LeaseTimings } = {}) => {
    const c = await AuthCache.open(counting, options);
    opened.push(c);
    await until(() => c.serving());
    return c;
  };
  const leaseOf = async (holder: string) =>
    (
      await sql.query<{ expires_at: Date; acked_position: string; valid: boolean }>(
        'SELECT expires_at, acked_position, expires_at > now() AS valid FROM auth_cache_leases WHERE holder = $1',
        [holder],
      )
    ).rows[0];

  beforeAll(async () => {
    sql = await freshPgRunner('authcache');
    log = await identityLog(sql);
    counting = new CountingSqlRunner(sql, LOOKUP);
    cache = await open();
  }, 30_000);

  afterAll(async () => {
    for (const c of opened) await c.close();
    await log?.close();
    await sql?.close();
  });

  it('takes a lease: a row of its own, unexpired, that it keeps renewing', async () => {
    const lease = await leaseOf(cache.holder!);
    expect(lease.valid).toBe(true);
    const first = lease.expires_at.getTime();
    await until(async () => (await leaseOf(cache.holder!)).expires_at.getTime() > first, 3000);
  });

  it('serves a hit without a query', async () => {
    const { secretHash, keyId } = await log.createKey();
    const before = counting.count;
    const first = await cache.find(secretHash);
    expect(first).toMatchObject({ keyId, revokedAt: null });
    expect(counting.count).toBe(before + 1);
    for (let i = 0; i < 5; i++) expect(await cache.find(secretHash)).toBe(first);
    expect(counting.count).toBe(before + 1);
  });

  // Issue 14.13: a wrong secret repeated once cost a query every time.
  it('remembers a miss apart from the hits, and a key created after a miss works as soon as its creation answered', async () => {
    const keyId = `key_${randomBytes(6).toString('hex')}`;
    const unknown = `hash-${keyId}`;
    const before = counting.count;
    expect(await cache.find(unknown)).toBeNull();
    expect(await cache.find(unknown)).toBeNull();
    expect(counting.count).toBe(before + 1);
    expect(cache.has(unknown)).toBe(false);

    // The same secret hash, now created: the write waited for the cache to let go of the miss.
    const { secretHash } = await log.createKey(keyId);
    expect(secretHash).toBe(unknown);
    expect(await cache.find(secretHash)).toMatchObject({ keyId });
  });

  it('a revocation answers only once the cache has let go of the key', async () => {
    const { secretHash, keyId } = await log.createKey();
    await cache.find(secretHash);
    expect(cache.has(secretHash)).toBe(true);
    await log.revoke(keyId);
    // Nothing awaited in between: the write's answer waited for this process's acknowledgement.
    expect(cache.has(secretHash)).toBe(false);
    expect((await cache.find(secretHash))?.revokedAt).not.toBeNull();
    expect((await leaseOf(cache.holder!)).acked_position >= (await log.projections.status()).find((s) => s.name === 'identity')!.position).toBe(true);
  });

  it('a saved provider key is read with the key at once', async () => {
    const { secretHash, accountId } = await log.createKey();
    expect((await cache.find(secretHash))?.sealedProviderKeys.size).toBe(0);
    await log.saveProviderKey(accountId);
    expect(cache.has(secretHash)).toBe(false);
    expect([...(await cache.find(secretHash))!.sealedProviderKeys.keys()]).toEqual(['sim']);
  });

  // Issue 44: a narrowed budget or allowlist holds on every gateway once its write answers.
  it("reads the guardrails that apply to a key with it, the organization's first, and a change answers only once the cache let go", async () => {
    const orgId = `org_${randomBytes(6).toString('hex')}`;
    const member = `acc_${randomBytes(6).toString('hex')}`;
    const { secretHash, keyId } = await log.createKey(undefined, { orgId, member });
    const other = await log.createKey(undefined, { orgId, member: `acc_${randomBytes(6).toString('hex')}` });
    expect((await cache.find(secretHash))?.guardrails).toEqual([]);
    const create = (guardrailId: string): GuardrailCommand => ({
      type: 'CreateGuardrail',
      workspaceId: orgId,
      guardrailId,
      policy: { ...DEFAULT_POLICY, name: guardrailId },
    });
    await log.guard(orgId, [
      create('g-key'),
      create('g-member'),
      create('g-org'),
      { type: 'AssignGuardrail', workspaceId: orgId, guardrailId: 'g-key', scope: 'key', subjects: [keyId] },
      { type: 'AssignGuardrail', workspaceId: orgId, guardrailId: 'g-member', scope: 'member', subjects: [member] },
      { type: 'SetOrganizationGuardrail', workspaceId: orgId, guardrailId: 'g-org' },
    ]);
    expect(cache.has(secretHash)).toBe(false);
    const applied = (await cache.find(secretHash))!.guardrails;
    expect(applied.map((g) => [g.scope, g.id, g.subject])).toEqual([
      ['organization', 'g-org', orgId],
      ['member', 'g-member', member],
      ['key', 'g-key', keyId],
    ]);
    expect(applied[0].policy).toMatchObject({ name: 'g-org', limit_nano: null });
    expect(typeof applied[0].updatedAt).toBe('string');
    // Another member's key of the same organization has only the organization's.
    expect((await cache.find(other.secretHash))!.guardrails.map((g) => g.id)).toEqual(['g-org']);

    await cache.find(secretHash);
    await log.guard(orgId, [{ type: 'UnassignGuardrail', workspaceId: orgId, guardrailId: 'g-key', scope: 'key', subjects: [keyId] }]);
    expect(cache.has(secretHash)).toBe(false);
    expect((await cache.find(secretHash))!.guardrails.map((g) => g.id)).toEqual(['g-org', 'g-member']);
  });

  it('a lookup that read before an invalidation does not fill the cache after it', async () => {
    const { secretHash, keyId } = await log.createKey();
    const held = counting.holdNext();
    const inFlight = cache.find(secretHash);
    await held.reached;
    // The lookup has read the key as active; it is revoked, and the revocation answers, before the lookup returns.
    const revocation = await log.appendRevocation(keyId);
    await revocation.answer();
    held.release();
    expect((await inFlight)?.revokedAt).toBeNull();
    expect(cache.has(secretHash)).toBe(false);
    expect((await cache.find(secretHash))?.revokedAt).not.toBeNull();
  });

  it('empties itself when the checkpoints moved without a notification (a NOTIFY lost after its commit)', async () => {
    const { secretHash, keyId } = await log.createKey();
    await cache.find(secretHash);
    await log.projections.stop();
    try {
      // Another runner applies the revocation and tells nobody.
      const silent = new ProjectionRunner(sql, log.store, CACHED_PROJECTIONS);
      await log.appendRevocation(keyId);
      await silent.catchUpAll();
      const identity = (await silent.status()).find((s) => s.name === 'identity')!.position;
      // The next renewal reads the moved checkpoints: empties the cache, then acknowledges them.
      await until(() => !cache.has(secretHash), 3000);
      await until(async () => (await leaseOf(cache.holder!)).acked_position >= identity, 1000);
      expect((await cache.find(secretHash))?.revokedAt).not.toBeNull();
    } finally {
      log.projections.start();
    }
  });

  // Under load every batch moves the checkpoints; emptying on that alone emptied the cache at every renewal.
  it('keeps its entries over batches that change nothing cached, and acknowledges the checkpoints they moved', async () => {
    const quick = await open({ timings: { leaseMs: 2000, renewMs: 100, marginMs: 500, retryMs: 100 } });
    const { secretHash, keyId } = await log.createKey();
    // The key's creation changed the identity projection: the next renewal empties the cache
    // once more (it cannot know the NOTIFY already did); filled after it.
    for (let renewals = 0; renewals < 2; renewals++) {
      const renewed = (await leaseOf(quick.holder!)).expires_at.getTime();
      await until(async () => (await leaseOf(quick.holder!)).expires_at.getTime() > renewed, 3000);
    }
    await quick.find(secretHash);
    const before = counting.count;
    // Events no cached projection reads: the checkpoints move, no cached row changes.
    const noise = await log.store.append(`noise-${randomUUID()}`, [{ id: randomUUID(), type: 'UnreadByAnyProjection', data: {} }], 'no_stream');
    await log.projections.waitFor(noise.position, ['identity', 'provider_keys', 'account_settings', 'presets']);
    await until(async () => (await leaseOf(quick.holder!)).acked_position >= noise.position, 3000);
    expect(quick.has(secretHash)).toBe(true);
    expect((await quick.find(secretHash))?.keyId).toBe(keyId);
    expect(counting.count).toBe(before);
  });

  it('empties itself at the next renewal after a rebuild that told nobody, though the rebuild ends where the checkpoints were', async () => {
    const { secretHash, keyId } = await log.createKey();
    await cache.find(secretHash);
    await log.projections.stop();
    try {
      const silent = new ProjectionRunner(sql, log.store, CACHED_PROJECTIONS);
      const at = (await silent.status()).find((s) => s.name === 'identity')!.position;
      await silent.rebuild(['identity']);
      expect((await silent.status()).find((s) => s.name === 'identity')!.position).toBe(at);
      await until(() => !cache.has(secretHash), 3000);
      expect((await cache.find(secretHash))?.keyId).toBe(keyId);
    } finally {
      log.projections.start();
    }
  });

  it('keeps the least recently used entries out past its capacity', async () => {
    const small = await open({ capacity: 2 });
    const [a, b, c] = [await log.createKey(), await log.createKey(), await log.createKey()];
    await small.find(a.secretHash);
    await small.find(b.secretHash);
    await small.find(a.secretHash);
    await small.find(c.secretHash);
    expect(small.size).toBe(2);
    expect(small.has(a.secretHash)).toBe(true);
    expect(small.has(b.secretHash)).toBe(false);
    expect(small.has(c.secretHash)).toBe(true);
  });

  it('ignores invalidations of another schema of the database, and acknowledges none of them', async () => {
    const { secretHash } = await log.createKey();
    // The key's own change empties the cache again at the first renewal that reads the new
    // count of changes, up to a renewal period later: cached once a renewal has passed and kept it.
    await until(async () => {
      await cache.find(secretHash);
      const renewed = (await leaseOf(cache.holder!)).expires_at.getTime();
      await until(async () => (await leaseOf(cache.holder!)).expires_at.getTime() > renewed, 5000);
      return cache.has(secretHash);
    }, 15_000);
    const acked = (await leaseOf(cache.holder!)).acked_position;
    await sql.query('SELECT pg_notify($1, $2)', [AUTH_CACHE_CHANNEL, `not_${sql.schema} 99999999999999999999/00000000000000000001`]);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(cache.has(secretHash)).toBe(true);
    expect((await leaseOf(cache.holder!)).acked_position).toBe(acked);
  });

  it('stops serving at once when its connection is lost, and starts empty once it has a lease again', async () => {
    const timings: LeaseTimings = { leaseMs: 5000, renewMs: 1000, marginMs: 1000, retryMs: 300 };
    const lost = await open({ timings });
    const { secretHash } = await log.createKey();
    await lost.find(secretHash);
    expect(lost.has(secretHash)).toBe(true);

    await sql.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [`svc-auth-cache ${lost.holder}`]);
    await until(() => !lost.serving(), 2000);
    expect(lost.size).toBe(0);
    const before = counting.count;
    await lost.find(secretHash);
    await lost.find(secretHash);
    // From PostgreSQL every time, and nothing filled.
    expect(counting.count).toBe(before + 2);
    expect(lost.size).toBe(0);

    await until(() => lost.serving(), 5000);
    await lost.find(secretHash);
    await lost.find(secretHash);
    expect(counting.count).toBe(before + 3);
  });

  it('stops serving before its row expires when renewals stall', async () => {
    const timings: LeaseTimings = { leaseMs: 2000, renewMs: 200, marginMs: 700, retryMs: 100 };
    const stalled = await open({ timings });
    const { secretHash } = await log.createKey();
    await stalled.find(secretHash);
    // A lock on its row: the renewals wait (as behind a stalled server or network) and the lease runs out.
    const locker = new Client({ connectionString: process.env.DATABASE_URL, options: `-c search_path=${sql.schema}` });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT * FROM auth_cache_leases WHERE holder = $1 FOR UPDATE', [stalled.holder]);
      await until(() => !stalled.serving(), 3000);
      // Stopped serving while its row still says it holds the lease: no write went past it.
      expect((await leaseOf(stalled.holder!)).valid).toBe(true);
      const before = counting.count;
      await stalled.find(secretHash);
      expect(counting.count).toBe(before + 1);
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
    }
    await until(() => stalled.serving(), 5000);
    expect(stalled.size).toBe(0);
  });

  it('a write waits for a lease that does not acknowledge, until that lease expires', async () => {
    const { keyId } = await log.createKey();
    await sql.query(`INSERT INTO auth_cache_leases (holder, expires_at) VALUES ('silent', now() + interval '1500 milliseconds')`);
    try {
      const started = performance.now();
      await log.revoke(keyId);
      const waited = performance.now() - started;
      expect(waited).toBeGreaterThan(1000);
      expect(waited).toBeLessThan(ACK_WAIT_MS);
      expect((await leaseOf('silent')).valid).toBe(false);
    } finally {
      await sql.query(`DELETE FROM auth_cache_leases WHERE holder = 'silent'`);
    }
    // With every lease acknowledging, a write answers in milliseconds.
    const other = await log.createKey();
    const started = performance.now();
    await log.revoke(other.keyId);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('a closed cache gives its lease back, so writes do not wait for it', async () => {
    const closing = await open();
    const holder = closing.holder!;
    expect(await leaseOf(holder)).toBeDefined();
    await closing.close();
    expect(await leaseOf(holder)).toBeUndefined();
  });
});

describe('authentication cache on PGlite (one process)', () => {
  it('is emptied by the projection runner itself before a revocation answers', async () => {
    const sql = await memoryPglite();
    const counting = new CountingSqlRunner(sql, LOOKUP);
    const cache = await AuthCache.open(counting);
    const log = await identityLog(sql, () => cache);
    try {
      expect(cache.holder).toBeNull();
      const { secretHash, keyId } = await log.createKey();
      await cache.find(secretHash);
      const before = counting.count;
      await cache.find(secretHash);
      expect(counting.count).toBe(before);
      await log.revoke(keyId);
      expect(cache.has(secretHash)).toBe(false);
      expect((await cache.find(secretHash))?.revokedAt).not.toBeNull();
    } finally {
      await log.close();
      await cache.close();
      await sql.close();
    }
  }, 30_000);
});
