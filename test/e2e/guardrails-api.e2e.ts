import { randomUUID } from 'node:crypto';
import { accountDecider, accountStream, budgetBucket, type AccountCommand } from '@svc/ledger';
import { placeHold, stats } from '@svc/ledger/testing/account-fixtures';
import { ManualClock } from '@svc/platform';
import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';

const ADMIN_TOKEN = 'admin-token-for-guardrails-api-tests';
const chat = { model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 };

/**
 * Issue 44: the guardrails management API over HTTP, in an organization with an owner, an admin
 * and a member: guardrails, their assignments (a key or member holds one: assigning moves it),
 * the workspace-wide one, refusals that name the field and write nothing, the audit log, and
 * what GET /v1/key and GET /v1/activity show of them.
 */
describe('guardrails API (issue 44)', () => {
  const clock = new ManualClock(new Date('2026-11-10T10:00:00Z'));
  let gw: StartedGateway;
  let call: Call;
  let owner: string;
  let ann: string;
  let bob: string;
  let org: string;
  let ownerManagement: string;
  let annManagement: string;
  let bobManagement: string;
  const keys: Record<string, { id: string; secret: string }> = {};

  const admin = (method: string, path: string, body?: unknown) => call(method, path, { body, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const account = async () => (await admin('POST', '/admin/accounts', { initial_credits_usd: 20 })).json.id as string;
  const adminKey = async (accountId: string, body: Record<string, unknown>) => {
    const r = await admin('POST', `/admin/accounts/${accountId}/keys`, body);
    expect(r.status).toBe(201);
    return { id: r.json.data.id as string, secret: r.json.key as string };
  };
  const as = (key: string) => (method: string, path: string, body?: unknown) => call(method, `/v1${path}`, { key, body });
  let mgmt: ReturnType<typeof as>;

  beforeAll(async () => {
    gw = await startGateway({ SVC_ADMIN_TOKEN: ADMIN_TOKEN }, undefined, { clock });
    call = api(gw.url.replace(/\/v1$/, ''));
    [owner, ann, bob] = [await account(), await account(), await account()];
    const createdOrg = await admin('POST', '/admin/orgs', { owner_account_id: owner, name: 'Acme' });
    expect([createdOrg.status, owner]).toEqual([201, expect.any(String)]);
    org = createdOrg.json.id;
    expect((await admin('POST', `/admin/orgs/${org}/members`, { account_id: ann, role: 'admin' })).status).toBe(201);
    expect((await admin('POST', `/admin/orgs/${org}/members`, { account_id: bob, role: 'member' })).status).toBe(201);
    ownerManagement = (await adminKey(owner, { scope: 'management', org_id: org })).secret;
    annManagement = (await adminKey(ann, { scope: 'management', org_id: org })).secret;
    bobManagement = (await adminKey(bob, { scope: 'management', org_id: org })).secret;
    keys.ownerKey = await adminKey(owner, { name: 'owner key', org_id: org });
    keys.bobKey = await adminKey(bob, { name: 'bob key', org_id: org });
    keys.bobOther = await adminKey(bob, { name: 'bob other', org_id: org });
    keys.outside = await adminKey(owner, { name: 'personal key' });
    mgmt = as(ownerManagement);
  }, 60_000);
  afterAll(() => stopGateway(gw));

  const body = {
    name: 'Team budget',
    description: 'For the support team',
    limit_usd: 12.5,
    reset_interval: 'monthly',
    allowed_models: ['sim/echo'],
    ignored_providers: ['sim-slow'],
    content_filter_builtins: [{ slug: 'email', action: 'redact' }],
    content_filters: [{ pattern: '(?i)project falcon', action: 'block', label: 'FALCON' }],
  };
  let team: string;
  let other: string;

  const snapshot = async () => ({
    list: (await mgmt('GET', '/guardrails')).json.data,
    keys: (await mgmt('GET', `/guardrails/${team}/assignments/keys`)).json.data,
    members: (await mgmt('GET', `/guardrails/${team}/assignments/members`)).json.data,
    audit: (await admin('GET', `/admin/audit-log?account_id=${org}&limit=1000`)).json.data.length,
  });

  it('creates a guardrail (201, money exact in USD), lists it and reads it back', async () => {
    const created = await mgmt('POST', '/guardrails', body);
    expect(created.status).toBe(201);
    expect(created.json.data).toEqual({
      id: expect.stringMatching(/^gr_[0-9a-f]{32}$/),
      name: 'Team budget',
      description: 'For the support team',
      limit_usd: 12.5,
      reset_interval: 'monthly',
      include_byok_in_budgets: false,
      allowed_models: ['sim/echo'],
      ignored_models: [],
      allowed_providers: null,
      ignored_providers: ['sim-slow'],
      enforce_zdr: false,
      data_collection: 'allow',
      content_filter_builtins: [{ slug: 'email', action: 'redact' }],
      content_filters: [{ pattern: '(?i)project falcon', action: 'block', label: 'FALCON' }],
      created_at: '2026-11-10T10:00:00.000Z',
      updated_at: '2026-11-10T10:00:00.000Z',
    });
    team = created.json.data.id;
    // Listed by creation time: a second later, so the order does not fall to the ids.
    clock.advance(1000);
    other = (await mgmt('POST', '/guardrails', { name: 'Other' })).json.data.id;
    const listed = await mgmt('GET', '/guardrails');
    expect(listed.status).toBe(200);
    expect(listed.json.data.map((g: { id: string }) => g.id)).toEqual([team, other]);
    expect(listed.json.data[0]).toEqual(created.json.data);
    const got = await mgmt('GET', `/guardrails/${team}`);
    expect(got.json.data).toEqual({ ...created.json.data, budgets: [] });
    // An admin of the organization manages them too.
    expect((await as(annManagement)('GET', `/guardrails/${team}`)).json.data.limit_usd).toBe(12.5);
  });

  it('PATCH changes only the fields sent; null resets a field to its default', async () => {
    clock.advance(60_000);
    const patched = await mgmt('PATCH', `/guardrails/${team}`, { limit_usd: '0.000000001', allowed_models: null, enforce_zdr: true });
    expect(patched.status).toBe(200);
    expect(patched.json.data).toMatchObject({
      name: 'Team budget',
      description: 'For the support team',
      limit_usd: 0.000000001,
      allowed_models: null,
      enforce_zdr: true,
      content_filters: body.content_filters,
      updated_at: '2026-11-10T10:01:01.000Z',
    });
    expect((await mgmt('PATCH', `/guardrails/${team}`, { limit_usd: 12.5, enforce_zdr: false })).json.data).toMatchObject({
      limit_usd: 12.5,
      enforce_zdr: false,
    });
  });

  describe('refusals: status, code and param, and nothing written', () => {
    it.each([
      ['a missing name', 'POST', '/guardrails', { limit_usd: 1 }, 400, 'name'],
      ['an empty name', 'POST', '/guardrails', { name: '' }, 400, 'name'],
      ['a negative limit', 'POST', '/guardrails', { name: 'x', limit_usd: -1 }, 400, 'limit_usd'],
      ['a limit finer than a nano-dollar', 'POST', '/guardrails', { name: 'x', limit_usd: 0.0000000001 }, 400, 'limit_usd'],
      ['a limit that is not a number', 'POST', '/guardrails', { name: 'x', limit_usd: true }, 400, 'limit_usd'],
      ['an unknown reset interval', 'POST', '/guardrails', { name: 'x', reset_interval: 'hourly' }, 400, 'reset_interval'],
      ['an unknown field', 'POST', '/guardrails', { name: 'x', budget: 5 }, 400, 'budget'],
      ['a models list that is not an array', 'POST', '/guardrails', { name: 'x', allowed_models: 'sim/echo' }, 400, 'allowed_models'],
      ['an empty model id', 'POST', '/guardrails', { name: 'x', ignored_models: ['a', ''] }, 400, 'ignored_models[1]'],
      ['a flag that is not a boolean', 'POST', '/guardrails', { name: 'x', enforce_zdr: 'yes' }, 400, 'enforce_zdr'],
      ['an unknown data_collection', 'POST', '/guardrails', { name: 'x', data_collection: 'maybe' }, 400, 'data_collection'],
      [
        'an unknown builtin filter',
        'POST',
        '/guardrails',
        { name: 'x', content_filter_builtins: [{ slug: 'ssn', action: 'block' }] },
        400,
        'content_filter_builtins[0].slug',
      ],
      [
        'a pattern RE2 does not take',
        'POST',
        '/guardrails',
        { name: 'x', content_filters: [{ pattern: '(a', action: 'block' }] },
        400,
        'content_filters[0].pattern',
      ],
      // Refused before any route, as every JSON route does (invalid_body), so it names no field.
      ['a body that is not an object', 'POST', '/guardrails', [1], 400, null],
      ['a PATCH clearing the name', 'PATCH', '/guardrails/:team', { name: null }, 400, 'name'],
      ['a PATCH of an unknown guardrail', 'PATCH', '/guardrails/gr_nope', { name: 'x' }, 404, 'id'],
      ['unknown key ids', 'POST', '/guardrails/:team/assignments/keys', { key_ids: [':ownerKey', 'key_nope'] }, 400, 'key_ids[1]'],
      ['a key of another workspace', 'POST', '/guardrails/:team/assignments/keys', { key_ids: [':outside'] }, 400, 'key_ids[0]'],
      ['an empty key list', 'POST', '/guardrails/:team/assignments/keys', { key_ids: [] }, 400, 'key_ids'],
      ['too many key ids', 'POST', '/guardrails/:team/assignments/keys', { key_ids: Array.from({ length: 501 }, (_, i) => `key_${i}`) }, 400, 'key_ids'],
      ['a key id that is not a string', 'POST', '/guardrails/:team/assignments/keys', { key_ids: [':ownerKey', 7] }, 400, 'key_ids[1]'],
      ['member_ids on the keys route', 'POST', '/guardrails/:team/assignments/keys', { member_ids: ['x'] }, 400, 'member_ids'],
      ['an account that is not a member', 'POST', '/guardrails/:team/assignments/members', { member_ids: [':bob', ':stranger'] }, 400, 'member_ids[1]'],
      ['an unknown guardrail to assign', 'POST', '/guardrails/gr_nope/assignments/keys', { key_ids: [':ownerKey'] }, 404, 'id'],
      ['an unknown guardrail for the organization', 'POST', '/guardrails/gr_nope/assignments/organization', undefined, 404, 'id'],
    ])('%s', async (_, method, path, requestBody, status, param) => {
      const stranger = await account();
      const resolve = (v: unknown): unknown =>
        typeof v === 'string' && v.startsWith(':')
          ? ({ ':team': team, ':bob': bob, ':stranger': stranger }[v] ?? keys[v.slice(1)]!.id)
          : Array.isArray(v)
            ? v.map(resolve)
            : v !== null && typeof v === 'object'
              ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, resolve(x)]))
              : v;
      const before = await snapshot();
      const r = await mgmt(method, path.replace(':team', team), resolve(requestBody));
      expect(r.status).toBe(status);
      expect(r.json.error).toMatchObject({ type: status === 404 ? 'not_found_error' : 'invalid_request_error', param });
      expect(await snapshot()).toEqual(before);
    });

    it("a member's management key is 403 permission_error; a key without the management scope is 403 too", async () => {
      const before = await snapshot();
      for (const [method, path, b] of [
        ['GET', '/guardrails', undefined],
        ['POST', '/guardrails', { name: 'mine' }],
        ['GET', `/guardrails/${team}`, undefined],
        ['PATCH', `/guardrails/${team}`, { limit_usd: 1000 }],
        ['DELETE', `/guardrails/${team}`, undefined],
        ['POST', `/guardrails/${team}/assignments/keys`, { key_ids: [keys.bobKey!.id] }],
        ['POST', `/guardrails/${team}/assignments/organization/remove`, undefined],
      ] as const) {
        const member = await as(bobManagement)(method, path, b);
        expect([method, path, member.status, member.json.error.type, member.json.error.code]).toEqual([
          method,
          path,
          403,
          'permission_error',
          'org_role_required',
        ]);
        const plain = await as(keys.ownerKey!.secret)(method, path, b);
        expect([plain.status, plain.json.error.type, plain.json.error.code]).toEqual([403, 'permission_error', 'management_key_required']);
      }
      expect(await snapshot()).toEqual(before);
    });
  });

  it('assigns keys with counts; assigning a key to another guardrail moves it there', async () => {
    const assign = await mgmt('POST', `/guardrails/${team}/assignments/keys`, { key_ids: [keys.ownerKey!.id, keys.bobKey!.id, keys.ownerKey!.id] });
    expect(assign.status).toBe(200);
    expect(assign.json).toEqual({ assigned_count: 2 });
    expect((await mgmt('POST', `/guardrails/${team}/assignments/keys`, { key_ids: [keys.ownerKey!.id] })).json).toEqual({ assigned_count: 0 });
    const listed = (await mgmt('GET', `/guardrails/${team}/assignments/keys`)).json.data;
    expect(listed.map((a: { key_id: string }) => a.key_id).sort()).toEqual([keys.ownerKey!.id, keys.bobKey!.id].sort());
    expect(listed[0]).toEqual({ key_id: expect.any(String), guardrail_id: team, assigned_at: expect.stringMatching(/^2026-11-10T/) });

    expect((await mgmt('POST', `/guardrails/${other}/assignments/keys`, { key_ids: [keys.ownerKey!.id] })).json).toEqual({ assigned_count: 1 });
    expect((await mgmt('GET', `/guardrails/${team}/assignments/keys`)).json.data.map((a: { key_id: string }) => a.key_id)).toEqual([keys.bobKey!.id]);
    expect((await mgmt('GET', `/guardrails/${other}/assignments/keys`)).json.data.map((a: { key_id: string }) => a.key_id)).toEqual([keys.ownerKey!.id]);

    // Removing counts only what was on this guardrail; the key now on `other` stays there.
    expect((await mgmt('POST', `/guardrails/${team}/assignments/keys/remove`, { key_ids: [keys.ownerKey!.id] })).json).toEqual({ unassigned_count: 0 });
    expect((await mgmt('POST', `/guardrails/${other}/assignments/keys/remove`, { key_ids: [keys.ownerKey!.id] })).json).toEqual({ unassigned_count: 1 });
    expect((await mgmt('GET', `/guardrails/${other}/assignments/keys`)).json.data).toEqual([]);
  });

  it('assigns members (the owner counts as one) and makes a guardrail the workspace-wide one', async () => {
    expect((await mgmt('POST', `/guardrails/${other}/assignments/members`, { member_ids: [bob, owner] })).json).toEqual({ assigned_count: 2 });
    expect((await mgmt('POST', `/guardrails/${team}/assignments/members`, { member_ids: [owner] })).json).toEqual({ assigned_count: 1 });
    expect((await mgmt('GET', `/guardrails/${other}/assignments/members`)).json.data).toEqual([
      { member_id: bob, guardrail_id: other, assigned_at: expect.any(String) },
    ]);
    expect((await mgmt('POST', `/guardrails/${team}/assignments/members/remove`, { member_ids: [owner] })).json).toEqual({ unassigned_count: 1 });

    expect((await mgmt('POST', `/guardrails/${team}/assignments/organization`)).json).toEqual({ assigned_count: 1 });
    expect((await mgmt('POST', `/guardrails/${team}/assignments/organization`)).json).toEqual({ assigned_count: 0 });
    // One workspace-wide guardrail at a time: setting another replaces it.
    expect((await mgmt('POST', `/guardrails/${other}/assignments/organization`)).json).toEqual({ assigned_count: 1 });
    expect((await mgmt('POST', `/guardrails/${team}/assignments/organization/remove`)).json).toEqual({ unassigned_count: 0 });
    expect((await mgmt('POST', `/guardrails/${other}/assignments/organization/remove`)).json).toEqual({ unassigned_count: 1 });
    expect((await mgmt('POST', `/guardrails/${team}/assignments/organization`)).json).toEqual({ assigned_count: 1 });
  });

  it("shows each assigned subject's budget, and GET /v1/key the guardrails over the calling key", async () => {
    // A charge of $2 on bob's key under the team guardrail's budgets, as a request admitted under them would make.
    const budgets = (['organization', 'key'] as const).map((scope) => ({
      guardrailId: team,
      name: 'Team budget',
      scope,
      subject: scope === 'key' ? keys.bobKey!.id : org,
      limitNano: 12_500_000_000n,
      reset: 'monthly' as const,
    }));
    const holdId = `gen-${randomUUID()}`;
    const ledger = (command: AccountCommand) => gw.runtime.aggregates.handle(accountDecider, accountStream(owner), command);
    await ledger(placeHold(holdId, 3_000_000_000n, { keyId: keys.bobKey!.id, budgets }));
    const charged = await ledger({ type: 'ChargeUsage', holdId, amountNano: 2_000_000_000n, stats: stats() });
    await gw.runtime.projections.waitFor(charged.appended!.position);
    expect(budgetBucket(team, 'key', keys.bobKey!.id)).toContain(team);

    const got = (await mgmt('GET', `/guardrails/${team}`)).json.data;
    const window = { window_start: '2026-11-01T00:00:00.000Z', resets_at: '2026-12-01T00:00:00.000Z' };
    expect(got.budgets).toEqual([
      { scope: 'organization', subject: org, spent_usd: 2, held_usd: 0, remaining_usd: 10.5, ...window },
      { scope: 'key', subject: keys.bobKey!.id, spent_usd: 2, held_usd: 0, remaining_usd: 10.5, ...window },
    ]);

    const key = await as(keys.bobKey!.secret)('GET', '/key');
    expect(key.status).toBe(200);
    expect(key.json.data.id).toBe(keys.bobKey!.id);
    expect(key.json.data.guardrails).toEqual([
      {
        id: team,
        name: 'Team budget',
        scope: 'organization',
        limit_usd: 12.5,
        reset_interval: 'monthly',
        spent_usd: 2,
        remaining_usd: 10.5,
        resets_at: window.resets_at,
      },
      { id: other, name: 'Other', scope: 'member', limit_usd: null, reset_interval: 'never', spent_usd: null, remaining_usd: null, resets_at: null },
      {
        id: team,
        name: 'Team budget',
        scope: 'key',
        limit_usd: 12.5,
        reset_interval: 'monthly',
        spent_usd: 2,
        remaining_usd: 10.5,
        resets_at: window.resets_at,
      },
    ]);
    // The owner's key: only the workspace-wide one (its member assignment was removed, its key one moved away).
    expect((await as(keys.ownerKey!.secret)('GET', '/key')).json.data.guardrails.map((g: { id: string; scope: string }) => [g.id, g.scope])).toEqual([
      [team, 'organization'],
    ]);
    expect((await as(keys.outside!.secret)('GET', '/key')).json.data.guardrails).toEqual([]);
  });

  it('filters /v1/activity by guardrail: the keys it applies to now', async () => {
    for (const k of [keys.ownerKey!, keys.bobKey!, keys.bobOther!, keys.bobOther!])
      expect((await call('POST', '/v1/chat/completions', { key: k.secret, body: chat })).status).toBe(200);
    const requests = async (query: string) => {
      const r = await mgmt('GET', `/activity?${query}`);
      expect(r.status).toBe(200);
      return (r.json.data as { requests: number }[]).reduce((sum, row) => sum + row.requests, 0);
    };
    const [all, ownerKey, bobKey, bobOther] = [
      await requests(''),
      ...(await Promise.all([keys.ownerKey!, keys.bobKey!, keys.bobOther!].map((k) => requests(`key_id=${k.id}`)))),
    ];
    expect([ownerKey, bobOther]).toEqual([1, 2]);
    expect(all).toBe(ownerKey + bobKey + bobOther);
    // `team` is the workspace-wide guardrail: every key of the workspace.
    expect(await requests(`guardrail_id=${team}`)).toBe(all);
    // `other` is bob's member guardrail: both of his keys, not the owner's.
    expect(await requests(`guardrail_id=${other}`)).toBe(bobKey + bobOther);
    expect(await requests(`guardrail_id=${other}&key_id=${keys.ownerKey!.id}`)).toBe(0);
    const unknown = await mgmt('GET', '/activity?guardrail_id=gr_nope');
    expect([unknown.status, unknown.json.error.param]).toEqual([404, 'guardrail_id']);
    const plain = await as(keys.bobKey!.secret)('GET', `/activity?guardrail_id=${other}`);
    expect([plain.status, plain.json.error.code]).toEqual([403, 'management_key_required']);
  });

  it('records every write in the audit log with who and when', async () => {
    const entries = (await admin('GET', `/admin/audit-log?account_id=${org}&limit=1000`)).json.data as {
      action: string;
      target_id: string;
      actor: string;
      actor_account_id: string;
      details: Record<string, unknown>;
      at: string;
    }[];
    const actions = entries.filter((e) => e.target_id === team).map((e) => e.action);
    for (const action of ['guardrail.created', 'guardrail.updated', 'guardrail.assigned', 'guardrail.unassigned', 'guardrail.organization_set'])
      expect(actions).toContain(action);
    expect(entries.filter((e) => e.target_id === other).map((e) => e.action)).toContain('guardrail.organization_removed');
    const created = entries.find((e) => e.action === 'guardrail.created' && e.target_id === team)!;
    expect(created).toMatchObject({
      actor: expect.stringMatching(/^key:key_/),
      actor_account_id: owner,
      at: '2026-11-10T10:00:00.000Z',
      details: { name: 'Team budget', limit_usd: 12.5, reset_interval: 'monthly' },
    });
    const assigned = entries.find((e) => e.action === 'guardrail.assigned' && e.target_id === other && e.details.scope === 'member')!;
    expect(assigned.details).toEqual({ scope: 'member', subjects: [bob, owner] });
  });

  it('deletes a guardrail with its assignments; it is then 404 guardrail_not_found', async () => {
    expect((await mgmt('DELETE', `/guardrails/${other}`)).json).toEqual({ id: other, deleted: true });
    for (const r of [
      await mgmt('GET', `/guardrails/${other}`),
      await mgmt('DELETE', `/guardrails/${other}`),
      await mgmt('GET', `/guardrails/${other}/assignments/members`),
    ]) {
      expect([r.status, r.json.error.code, r.json.error.param]).toEqual([404, 'guardrail_not_found', 'id']);
    }
    expect((await as(keys.bobKey!.secret)('GET', '/key')).json.data.guardrails.map((g: { id: string }) => g.id)).toEqual([team, team]);
    expect((await mgmt('GET', '/guardrails')).json.data.map((g: { id: string }) => g.id)).toEqual([team]);
    const log = (await admin('GET', `/admin/audit-log?account_id=${org}&limit=1000`)).json.data as { action: string; target_id: string }[];
    expect(log.filter((e) => e.action === 'guardrail.deleted').map((e) => e.target_id)).toEqual([other]);
  });

  it("in an account's own workspace the account manages them, its audit log shows them, and there are no members to assign", async () => {
    const own = as(gw.keys.management_key);
    const created = await own('POST', '/guardrails', { name: 'Mine', limit_usd: 3 });
    expect(created.status).toBe(201);
    const id = created.json.data.id;
    const refused = await own('POST', `/guardrails/${id}/assignments/members`, { member_ids: [gw.keys.account_id] });
    expect([refused.status, refused.json.error.param]).toEqual([400, 'member_ids[0]']);
    expect((await own('POST', `/guardrails/${id}/assignments/keys`, { key_ids: [(await as(gw.keys.api_key)('GET', '/key')).json.data.id] })).json).toEqual({
      assigned_count: 1,
    });
    // Another workspace's guardrail is as unknown as a missing one.
    expect((await own('GET', `/guardrails/${team}`)).status).toBe(404);
    expect((await mgmt('GET', `/guardrails/${id}`)).status).toBe(404);
    const log = (await own('GET', '/audit-log?limit=10')).json.data.filter((e: { target_id: string }) => e.target_id === id);
    expect(log.map((e: { action: string }) => e.action).sort()).toEqual(['guardrail.assigned', 'guardrail.created']);
  });
});
