import { ManualClock, usdToNano } from '@svc/platform';
import { api, startGateway, type Call, stopGateway } from '../support/gateway';

const ADMIN_TOKEN = 'admin-token-for-identity-tests';
const chat = { model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 };

/**
 * Identity end to end (spec 2.2-2.3, 3.3, 4.19, 4.20, 5, 7): keys, scopes and restrictions,
 * rotation, expiry, organizations and the audit log, through the HTTP API.
 */
describe('identity', () => {
  const clock = new ManualClock(new Date('2026-11-02T10:00:00Z'));
  let gw: Awaited<ReturnType<typeof startGateway>>;
  let call: Call;
  const admin = (method: string, path: string, body?: unknown, ip = '192.0.2.10') =>
    call(method, path, { body, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'x-forwarded-for': ip } });

  /** An account with credits, and a key of it made through the operator API. */
  const account = async (credits = 5) => {
    const r = await admin('POST', '/admin/accounts', { initial_credits_usd: credits });
    expect(r.status).toBe(201);
    return r.json.id as string;
  };
  const adminKey = async (accountId: string, body: Record<string, unknown> = {}) => {
    const r = await admin('POST', `/admin/accounts/${accountId}/keys`, body);
    expect(r.status).toBe(201);
    return { id: r.json.data.id as string, secret: r.json.key as string, data: r.json.data };
  };

  beforeAll(async () => {
    // Behind a trusted proxy on loopback, X-Forwarded-For carries the client IP.
    gw = await startGateway({ SVC_ADMIN_TOKEN: ADMIN_TOKEN, SVC_TRUST_PROXY: '127.0.0.1,::1' }, undefined, { clock });
    call = api(gw.url.replace(/\/v1$/, ''));
  }, 60_000);

  afterAll(() => stopGateway(gw));

  describe('the authorization matrix (spec 5 and 7)', () => {
    const keys: Record<string, string> = {};

    beforeAll(async () => {
      const acc = await account();
      for (const [name, body] of Object.entries({
        full: { scope: 'full' },
        read_only: { scope: 'read_only' },
        management: { scope: 'management' },
        models: { allowed_models: ['sim/small-8k'] },
        ip: { allowed_ips: ['198.51.100.7'] },
        cidr: { allowed_ips: ['198.51.100.0/24', '2001:db8::/32'] },
        referrer: { allowed_referrers: ['app.example.com', '*.example.org'] },
        expiring: { expires_in_days: 1 },
        revoked: {},
      })) {
        keys[name] = (await adminKey(acc, { name, ...body })).secret;
      }
      const revokedId = (await call('GET', '/v1/key', { key: keys.revoked })).json.data.id;
      const management = keys.management;
      expect((await call('DELETE', `/v1/keys/${revokedId}`, { key: management })).status).toBe(200);
    });

    type Op = 'model call' | 'lookup' | 'management';
    const operation = (op: Op, key: string, headers: Record<string, string> = {}, model = 'sim/echo') => {
      if (op === 'model call') return call('POST', '/v1/chat/completions', { key, body: { ...chat, model }, headers });
      if (op === 'lookup') return call('GET', '/v1/credits', { key, headers });
      return call('GET', '/v1/keys', { key, headers });
    };
    const ok = [200, null, null] as const;
    const forbidden = (code: string) => [403, 'permission_error', code] as const;
    const unauthenticated = (code: string) => [401, 'authentication_error', code] as const;

    const rows: [string, string, Op, Record<string, string>, readonly [number, string | null, string | null]][] = [
      // scope x operation
      ['full', 'full', 'model call', {}, ok],
      ['full', 'full', 'lookup', {}, ok],
      ['full', 'full', 'management', {}, forbidden('management_key_required')],
      ['read_only', 'read_only', 'model call', {}, forbidden('read_only_key')],
      ['read_only', 'read_only', 'lookup', {}, ok],
      ['read_only', 'read_only', 'management', {}, forbidden('management_key_required')],
      ['management', 'management', 'model call', {}, forbidden('management_key_used_for_model_call')],
      ['management', 'management', 'lookup', {}, ok],
      ['management', 'management', 'management', {}, ok],
      // model allowlist: a model the key may not use is "not found"
      ['model outside allowed_models', 'models', 'model call', {}, [404, 'not_found_error', 'model_not_found']],
      ['lookup with allowed_models', 'models', 'lookup', {}, ok],
      // IP and CIDR, IPv4 and IPv6
      ['the allowed IP', 'ip', 'model call', { 'x-forwarded-for': '198.51.100.7' }, ok],
      ['another IP', 'ip', 'lookup', { 'x-forwarded-for': '198.51.100.8' }, forbidden('ip_not_allowed')],
      ['an IP inside the IPv4 CIDR', 'cidr', 'model call', { 'x-forwarded-for': '198.51.100.200' }, ok],
      ['an IP inside the IPv6 CIDR', 'cidr', 'lookup', { 'x-forwarded-for': '2001:db8::42' }, ok],
      ['an IP outside both CIDRs', 'cidr', 'lookup', { 'x-forwarded-for': '203.0.113.1' }, forbidden('ip_not_allowed')],
      ['an IPv6 outside the CIDR', 'cidr', 'model call', { 'x-forwarded-for': '2001:db9::1' }, forbidden('ip_not_allowed')],
      // referrer
      ['an allowed Origin', 'referrer', 'model call', { origin: 'https://app.example.com' }, ok],
      ['an allowed subdomain Referer', 'referrer', 'lookup', { referer: 'https://x.example.org/page' }, ok],
      ['another Origin', 'referrer', 'model call', { origin: 'https://evil.example.net' }, forbidden('referrer_not_allowed')],
      ['no Origin or Referer', 'referrer', 'lookup', {}, forbidden('referrer_not_allowed')],
      // revoked: on every operation
      ['revoked, model call', 'revoked', 'model call', {}, unauthenticated('invalid_api_key')],
      ['revoked, lookup', 'revoked', 'lookup', {}, unauthenticated('invalid_api_key')],
      ['revoked, management', 'revoked', 'management', {}, unauthenticated('invalid_api_key')],
    ];

    it.each(rows)('%s (%s key, %s)', async (_what, key, op, headers, [status, type, code]) => {
      const r = await operation(op, keys[key], headers);
      expect(r.status).toBe(status);
      if (type !== null) expect(r.json.error).toMatchObject({ type, code });
    });

    it('expiry: the key works until expires_in_days have passed on the clock, then 401 on every operation', async () => {
      expect((await operation('lookup', keys.expiring)).status).toBe(200);
      clock.advance(24 * 3600 * 1000);
      for (const op of ['model call', 'lookup', 'management'] as const) {
        const r = await operation(op, keys.expiring);
        expect(r.status).toBe(401);
        expect(r.json.error).toMatchObject({ type: 'authentication_error', code: 'key_expired' });
      }
      expect((await operation('lookup', keys.full)).status).toBe(200);
    });
  });

  describe('every scope x operation x restriction (spec 5, 7)', () => {
    type Scope = 'full' | 'read_only' | 'management';
    type Op = 'model call' | 'lookup' | 'management';
    type Restriction = 'model' | 'ip' | 'cidr' | 'referrer' | 'expired' | 'revoked';
    const scopes: Scope[] = ['full', 'read_only', 'management'];
    const ops: Op[] = ['model call', 'lookup', 'management'];
    const restrictions: Record<Restriction, Record<string, unknown>> = {
      model: { allowed_models: ['sim/small-8k'] },
      ip: { allowed_ips: ['198.51.100.7'] },
      cidr: { allowed_ips: ['198.51.100.0/24', '2001:db8::/32'] },
      referrer: { allowed_referrers: ['app.example.com'] },
      expired: { expires_in_days: 1 },
      revoked: {},
    };
    // Each request comes from outside the key's allowlists, with no Origin or Referer.
    const from = { 'x-forwarded-for': '2001:db9::1' };
    const secrets = new Map<string, string>();

    beforeAll(async () => {
      const acc = await account();
      const management = (await adminKey(acc, { scope: 'management' })).secret;
      for (const scope of scopes) {
        for (const [restriction, body] of Object.entries(restrictions)) {
          const key = await adminKey(acc, { scope, ...body });
          secrets.set(`${scope}/${restriction}`, key.secret);
          if (restriction === 'revoked') expect((await call('DELETE', `/v1/keys/${key.id}`, { key: management })).status).toBe(200);
        }
      }
      clock.advance(24 * 3600 * 1000);
    });

    /** The rules: 401 before restrictions, restrictions before scope, scope before the model allowlist. */
    const expected = (scope: Scope, op: Op, restriction: Restriction): [number, string | null] => {
      if (restriction === 'revoked') return [401, 'invalid_api_key'];
      if (restriction === 'expired') return [401, 'key_expired'];
      if (restriction === 'ip' || restriction === 'cidr') return [403, 'ip_not_allowed'];
      if (restriction === 'referrer') return [403, 'referrer_not_allowed'];
      if (op === 'management') return scope === 'management' ? [200, null] : [403, 'management_key_required'];
      if (op === 'lookup') return [200, null];
      if (scope === 'management') return [403, 'management_key_used_for_model_call'];
      if (scope === 'read_only') return [403, 'read_only_key'];
      return [404, 'model_not_found'];
    };
    const rows = scopes.flatMap((scope) => ops.flatMap((op) => (Object.keys(restrictions) as Restriction[]).map((r) => [scope, op, r] as const)));

    it.each(rows)('%s key, %s, %s restriction', async (scope, op, restriction) => {
      const key = secrets.get(`${scope}/${restriction}`)!;
      const r =
        op === 'model call'
          ? await call('POST', '/v1/chat/completions', { key, body: chat, headers: from })
          : await call('GET', op === 'lookup' ? '/v1/credits' : '/v1/keys', { key, headers: from });
      const [status, code] = expected(scope, op, restriction);
      expect(r.status).toBe(status);
      if (code !== null) expect(r.json.error.code).toBe(code);
    });
  });

  describe('key management (spec 4.19, 4.20)', () => {
    let acc: string;
    let management: string;

    beforeAll(async () => {
      acc = await account(5);
      management = (await adminKey(acc, { scope: 'management', name: 'ops' })).secret;
    });

    it('creates a key with every field, returns the secret once, and stores only a hint', async () => {
      const body = {
        name: 'backend',
        project: 'search',
        environment: 'live',
        scope: 'full',
        limit: 2.5,
        limit_reset: 'weekly',
        allowed_models: ['sim/echo'],
        allowed_ips: ['10.0.0.0/8'],
        allowed_referrers: ['example.com'],
        rpm_limit: 30,
        tpm_limit: 1000,
        expires_in_days: 30,
      };
      const r = await call('POST', '/v1/keys', { key: management, body });
      expect(r.status).toBe(201);
      expect(r.json.key).toMatch(/^svc_live_[0-9A-Za-z]{40}$/);
      expect(r.json.data).toMatchObject({
        name: 'backend',
        project: 'search',
        environment: 'live',
        scope: 'full',
        limit: 2.5,
        limit_reset: 'weekly',
        limit_remaining: 2.5,
        allowed_models: ['sim/echo'],
        allowed_ips: ['10.0.0.0/8'],
        allowed_referrers: ['example.com'],
        rpm_limit: 30,
        tpm_limit: 1000,
        revoked: false,
        expires_at: new Date(clock.now().getTime() + 30 * 86_400_000).toISOString(),
        rate_limit: { requests_per_minute: 30, tokens_per_minute: 1000, concurrent_requests: 64 },
      });
      expect(r.json.data.hint).toBe(`svc_live_...${r.json.key.slice(-4)}`);
      const fetched = await call('GET', `/v1/keys/${r.json.data.id}`, { key: management });
      expect(fetched.json.data).toEqual(r.json.data);
      expect(JSON.stringify(fetched.json)).not.toContain(r.json.key);
    });

    it('defaults to a live full key resetting monthly, and makes test keys with svc_test_', async () => {
      const live = await call('POST', '/v1/keys', { key: management, body: {} });
      expect(live.json.key).toMatch(/^svc_live_/);
      expect(live.json.data).toMatchObject({ scope: 'full', environment: 'live', limit_reset: 'monthly', limit: null, limit_remaining: null });
      const test = await call('POST', '/v1/keys', { key: management, body: { environment: 'test' } });
      expect(test.json.key).toMatch(/^svc_test_/);
    });

    it.each([
      [{ scope: 'admin' }, 'scope'],
      [{ limit: -1 }, 'limit'],
      [{ limit_reset: 'hourly' }, 'limit_reset'],
      [{ allowed_ips: ['10.0.0.0/33'] }, 'allowed_ips'],
      [{ allowed_referrers: ['https://example.com'] }, 'allowed_referrers'],
      [{ rpm_limit: 100000 }, 'rpm_limit'],
      [{ tpm_limit: 0 }, 'tpm_limit'],
      [{ expires_in_days: 0 }, 'expires_in_days'],
      [{ name: 42 }, 'name'],
    ])('refuses %p with 400 naming %s, and creates nothing', async (body, param) => {
      const before = (await call('GET', '/v1/keys', { key: management })).json.data.length;
      const r = await call('POST', '/v1/keys', { key: management, body });
      expect(r.status).toBe(400);
      expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param });
      expect((await call('GET', '/v1/keys', { key: management })).json.data).toHaveLength(before);
    });

    it('updates restrictions with PATCH and enforces them at once', async () => {
      const { id, secret } = await adminKey(acc, {});
      expect((await call('POST', '/v1/chat/completions', { key: secret, body: chat })).status).toBe(200);
      const patched = await call('PATCH', `/v1/keys/${id}`, { key: management, body: { allowed_models: ['sim/small-8k'], name: 'narrowed' } });
      expect(patched.status).toBe(200);
      expect(patched.json.data).toMatchObject({ name: 'narrowed', allowed_models: ['sim/small-8k'] });
      expect((await call('POST', '/v1/chat/completions', { key: secret, body: chat })).status).toBe(404);
      const cleared = await call('PATCH', `/v1/keys/${id}`, { key: management, body: { allowed_models: null } });
      expect(cleared.json.data.allowed_models).toBeNull();
      expect((await call('POST', '/v1/chat/completions', { key: secret, body: chat })).status).toBe(200);
    });

    it('GET /v1/key reports the calling key with its rate limits and usage per period; GET /v1/keys lists usage and remaining limit', async () => {
      const { id, secret } = await adminKey(acc, { limit: 1, limit_reset: 'daily' });
      const done = await call('POST', '/v1/chat/completions', { key: secret, body: chat });
      const costNano = usdToNano(done.json.usage.cost);
      const own = await call('GET', '/v1/key', { key: secret });
      expect(own.status).toBe(200);
      expect(own.json.data).toMatchObject({ id, limit: 1, limit_reset: 'daily', rate_limit: expect.objectContaining({ requests_per_minute: 600 }) });
      for (const field of ['usage', 'usage_daily', 'usage_weekly', 'usage_monthly']) expect(usdToNano(own.json.data[field])).toBe(costNano);
      expect(usdToNano(own.json.data.limit_remaining)).toBe(1_000_000_000n - costNano);
      const nextMidnight = new Date(clock.now());
      nextMidnight.setUTCHours(24, 0, 0, 0);
      expect(own.json.data.limit_resets_at).toBe(nextMidnight.toISOString());
      const listed = (await call('GET', '/v1/keys', { key: management })).json.data.find((k: { id: string }) => k.id === id);
      expect(usdToNano(listed.usage_monthly)).toBe(costNano);
      expect(listed.limit_remaining).toBe(own.json.data.limit_remaining);
    });

    it('rotates a secret with a grace period during which the old one still works', async () => {
      const { id, secret: old } = await adminKey(acc, {});
      const r = await call('POST', `/v1/keys/${id}/rotate`, { key: management, body: { grace_period_seconds: 60 } });
      expect(r.status).toBe(200);
      const fresh = r.json.key;
      expect(fresh).not.toBe(old);
      expect((await call('GET', '/v1/key', { key: old })).status).toBe(200);
      expect((await call('GET', '/v1/key', { key: fresh })).json.data.id).toBe(id);
      clock.advance(60_000);
      expect((await call('GET', '/v1/key', { key: old })).status).toBe(401);
      expect((await call('GET', '/v1/key', { key: fresh })).status).toBe(200);
      const immediate = await call('POST', `/v1/keys/${id}/rotate`, { key: management, body: {} });
      expect((await call('GET', '/v1/key', { key: fresh })).status).toBe(401);
      expect((await call('GET', '/v1/key', { key: immediate.json.key })).status).toBe(200);
      const tooLong = await call('POST', `/v1/keys/${id}/rotate`, { key: management, body: { grace_period_seconds: 8 * 86400 } });
      expect(tooLong.json.error).toMatchObject({ type: 'invalid_request_error', param: 'grace_period_seconds' });
    });

    it("revocation answers 404 for another workspace's key, and is idempotent", async () => {
      const other = await adminKey(await account(1), { scope: 'management' });
      const { id, secret } = await adminKey(acc, {});
      const foreign = await call('DELETE', `/v1/keys/${id}`, { key: other.secret });
      expect(foreign.status).toBe(404);
      expect((await call('GET', '/v1/key', { key: secret })).status).toBe(200);
      expect((await call('DELETE', `/v1/keys/${id}`, { key: management })).json.data.revoked).toBe(true);
      expect((await call('DELETE', `/v1/keys/${id}`, { key: management })).status).toBe(200);
      expect((await call('GET', '/v1/key', { key: secret })).status).toBe(401);
    });
  });

  describe('organizations (spec 1)', () => {
    let owner: string;
    let ann: string;
    let bob: string;
    let org: string;
    let annManagement: string;
    let bobManagement: string;

    beforeAll(async () => {
      [owner, ann, bob] = [await account(5), await account(5), await account(5)];
      org = (await admin('POST', '/admin/orgs', { owner_account_id: owner, name: 'Acme' })).json.id;
      expect((await admin('POST', `/admin/orgs/${org}/members`, { account_id: ann, role: 'admin' })).status).toBe(201);
      expect((await admin('POST', `/admin/orgs/${org}/members`, { account_id: bob, role: 'member' })).status).toBe(201);
      annManagement = (await adminKey(ann, { scope: 'management', org_id: org })).secret;
      bobManagement = (await adminKey(bob, { scope: 'management', org_id: org })).secret;
    });

    const create = async (management: string) => {
      const r = await call('POST', '/v1/keys', { key: management, body: { name: 'org key' } });
      expect(r.status).toBe(201);
      expect(r.json.data.organization_id).toBe(org);
      return { id: r.json.data.id as string, secret: r.json.key as string };
    };

    it("a member cannot revoke an admin's key; an admin can revoke a member's; a member can revoke its own", async () => {
      const annsKey = await create(annManagement);
      const bobsKey = await create(bobManagement);
      const bobsOther = await create(bobManagement);

      const denied = await call('DELETE', `/v1/keys/${annsKey.id}`, { key: bobManagement });
      expect(denied.status).toBe(403);
      expect(denied.json.error).toMatchObject({ type: 'permission_error', code: 'not_key_owner' });
      expect((await call('GET', '/v1/key', { key: annsKey.secret })).status).toBe(200);

      expect((await call('DELETE', `/v1/keys/${bobsKey.id}`, { key: annManagement })).status).toBe(200);
      expect((await call('GET', '/v1/key', { key: bobsKey.secret })).status).toBe(401);
      expect((await call('DELETE', `/v1/keys/${bobsOther.id}`, { key: bobManagement })).status).toBe(200);
    });

    it('members list only their own keys; admins list the whole organization', async () => {
      const ids = (keys: { id: string; created_by: string }[]) => new Set(keys.map((k) => k.created_by));
      expect(ids((await call('GET', '/v1/keys', { key: bobManagement })).json.data)).toEqual(new Set([bob]));
      expect(ids((await call('GET', '/v1/keys', { key: annManagement })).json.data)).toEqual(new Set([ann, bob]));
    });

    it("keys created inside the organization bill the owner's balance", async () => {
      const key = await create(bobManagement);
      const credits = async (accountId: string) => (await admin('GET', `/admin/accounts/${accountId}`)).json.data.balance;
      const [ownerBefore, bobBefore] = [await credits(owner), await credits(bob)];
      const r = await call('POST', '/v1/chat/completions', { key: key.secret, body: chat });
      expect(r.status).toBe(200);
      expect(usdToNano(ownerBefore) - usdToNano(await credits(owner))).toBe(usdToNano(r.json.usage.cost));
      expect(await credits(bob)).toBe(bobBefore);
    });

    it("a member who leaves loses the organization's keys; deleting the organization stops all of them", async () => {
      const bobsKey = await create(bobManagement);
      const annsKey = await create(annManagement);
      expect((await admin('DELETE', `/admin/orgs/${org}/members/${bob}`)).status).toBe(200);
      expect((await call('GET', '/v1/key', { key: bobsKey.secret })).status).toBe(401);
      expect((await call('GET', '/v1/key', { key: annsKey.secret })).status).toBe(200);
      expect((await admin('DELETE', `/admin/orgs/${org}`)).status).toBe(200);
      expect((await call('GET', '/v1/key', { key: annsKey.secret })).status).toBe(401);
      expect((await admin('POST', `/admin/orgs/${org}/members`, { account_id: bob, role: 'member' })).status).toBe(404);
    });

    it('audit entries carry actor, IP and time, and a rebuild of the audit projection gives the same rows', async () => {
      const r = await admin('GET', `/admin/audit-log?account_id=${owner}`);
      expect(r.status).toBe(200);
      const actions = r.json.data.map((e: { action: string }) => e.action);
      for (const action of ['org.created', 'org.member_added', 'org.member_removed', 'org.deleted', 'key.created', 'key.revoked']) {
        expect(actions).toContain(action);
      }
      const byAdmin = r.json.data.find((e: { action: string }) => e.action === 'org.member_added');
      expect(byAdmin).toMatchObject({ actor: 'admin', ip: '192.0.2.10', at: expect.stringMatching(/^2026-11-0\dT/) });
      const byKey = r.json.data.find((e: { action: string; actor_account_id: string }) => e.action === 'key.revoked' && e.actor_account_id === ann);
      expect(byKey).toMatchObject({ actor: expect.stringMatching(/^key:key_/), ip: '127.0.0.1' });

      const all = (await admin('GET', '/admin/audit-log?limit=1000')).json.data;
      await gw.runtime.projections.rebuild('audit_log');
      expect((await admin('GET', '/admin/audit-log?limit=1000')).json.data).toEqual(all);
    });
  });

  describe('the operator API', () => {
    it('refuses a missing or wrong admin token with 401', async () => {
      expect((await call('POST', '/admin/accounts', { body: {} })).status).toBe(401);
      const wrong = await call('POST', '/admin/accounts', { body: {}, headers: { authorization: 'Bearer nope' } });
      expect(wrong.status).toBe(401);
      expect(wrong.json.error).toMatchObject({ type: 'authentication_error', code: 'invalid_admin_token' });
    });

    it('adds credits exactly and answers 404 for unknown accounts and organizations', async () => {
      const acc = await account(0);
      const r = await admin('POST', `/admin/accounts/${acc}/credits`, { amount_usd: 1.23456789 });
      expect(r.json.data).toMatchObject({ account_id: acc, total_credits: 1.23456789, balance: 1.23456789 });
      expect((await admin('POST', '/admin/accounts/acc_nope/credits', { amount_usd: 1 })).status).toBe(404);
      expect((await admin('POST', '/admin/accounts/acc_nope/keys', {})).status).toBe(404);
      expect((await admin('POST', '/admin/orgs', { owner_account_id: 'acc_nope' })).status).toBe(404);
      expect((await admin('POST', `/admin/accounts/${acc}/credits`, { amount_usd: 0 })).json.error.param).toBe('amount_usd');
    });
  });
});
