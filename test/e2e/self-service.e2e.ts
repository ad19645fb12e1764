import { startSmtpServer, type TestSmtpServer } from '@svc/platform/testing/smtp-server';
import { api, createAccountWithKey, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';

const EMAIL = 'owner@example.com';
const PROVIDER_SECRET = 'sk-account-own-key-0000000000wxyz';

/**
 * Issue 21: what the operator API did for an account's provider keys and organizations, the
 * account now does itself under /v1 with a management key: step-up where spec 1 asks for it,
 * every change in its audit log, and an organization's people limited by their role.
 */
describe('account-facing provider keys and organizations (spec 1)', () => {
  let smtp: TestSmtpServer;
  let gw: StartedGateway;
  let call: Call;
  let root: Call;
  let owner: string;
  let ownerAccount: string;

  /** A second account and a management key of it. */
  const person = async () => {
    const { accountId, key } = await createAccountWithKey(root, gw.keys.admin_token, 1, { scope: 'management' });
    return { accountId, key };
  };
  const codeFor = async (key: string, action: string) => {
    expect((await call('POST', '/step-up/codes', { key, body: { action } })).status).toBe(201);
    const mail = await smtp.waitFor(EMAIL);
    return /\b(\d{6})\b/.exec(mail.text ?? '')![1];
  };
  const auditActions = async (key: string) =>
    ((await call('GET', '/audit-log', { key })).json.data as { action: string; details: unknown }[]).map((e) => e.action);

  beforeAll(async () => {
    smtp = await startSmtpServer();
    gw = await startGateway({ SVC_SMTP_URL: smtp.url });
    call = api(gw.url);
    root = api(gw.url.replace(/\/v1$/, ''));
    owner = gw.keys.management_key;
    ownerAccount = gw.keys.account_id;
  }, 60_000);
  afterAll(async () => {
    await stopGateway(gw);
    await smtp.close();
  });

  describe('provider keys', () => {
    it('lists the catalog providers a key can be saved for, and none saved yet', async () => {
      const r = await call('GET', '/provider-keys', { key: owner });
      expect(r.status).toBe(200);
      expect(r.json.data).toEqual([]);
      expect(r.json.providers).toContain('sim');
    });

    it('saves a key showing only its hint, replaces it, and deletes it, each in the audit log', async () => {
      const saved = await call('PUT', '/provider-keys/sim', { key: owner, body: { api_key: PROVIDER_SECRET } });
      expect(saved.status).toBe(200);
      expect(saved.json.data).toEqual({ provider: 'sim', hint: '...wxyz' });
      const listed = await call('GET', '/provider-keys', { key: owner });
      expect(listed.json.data).toEqual([{ provider: 'sim', hint: '...wxyz', saved_at: expect.any(String) }]);
      expect(JSON.stringify(listed.json)).not.toContain(PROVIDER_SECRET);

      const replaced = await call('PUT', '/provider-keys/sim', { key: owner, body: { api_key: 'sk-another-one-000000000000abcd' } });
      expect(replaced.json.data.hint).toBe('...abcd');

      const deleted = await call('DELETE', '/provider-keys/sim', { key: owner });
      expect(deleted.json).toEqual({ data: { provider: 'sim', deleted: true } });
      expect((await call('GET', '/provider-keys', { key: owner })).json.data).toEqual([]);
      const again = await call('DELETE', '/provider-keys/sim', { key: owner });
      expect(again.status).toBe(404);
      expect(again.json.error).toMatchObject({ code: 'provider_key_not_found', param: 'provider' });

      const actions = await auditActions(owner);
      expect(actions.slice(0, 3)).toEqual(['provider_key.deleted', 'provider_key.saved', 'provider_key.saved']);
    });

    it('refuses a provider outside the catalog and a bad key, naming the field, saving nothing', async () => {
      const unknown = await call('PUT', '/provider-keys/nope', { key: owner, body: { api_key: PROVIDER_SECRET } });
      expect(unknown.status).toBe(404);
      expect(unknown.json.error).toMatchObject({ code: 'provider_not_found', param: 'provider' });
      const bad = await call('PUT', '/provider-keys/sim', { key: owner, body: { api_key: 'has space' } });
      expect(bad.status).toBe(400);
      expect(bad.json.error.param).toBe('api_key');
      expect((await call('GET', '/provider-keys', { key: owner })).json.data).toEqual([]);
    });

    it('is for management keys only', async () => {
      const r = await call('GET', '/provider-keys', { key: gw.keys.live_api_key });
      expect(r.status).toBe(403);
      expect(r.json.error.code).toBe('management_key_required');
    });
  });

  describe('organizations', () => {
    let orgId: string;
    let ann: { accountId: string; key: string };
    let bob: { accountId: string; key: string };

    beforeAll(async () => {
      ann = await person();
      bob = await person();
    });

    it('creates one owned by the key’s account and lists it with the role', async () => {
      const created = await call('POST', '/organizations', { key: owner, body: { name: 'Acme' } });
      expect(created.status).toBe(201);
      expect(created.json.data).toMatchObject({ name: 'Acme', owner_account_id: ownerAccount, role: 'owner' });
      orgId = created.json.data.id;
      const listed = await call('GET', '/organizations', { key: owner });
      expect(listed.json.data).toEqual([created.json.data]);
      expect((await call('GET', '/organizations', { key: ann.key })).json.data).toEqual([]);
    });

    it('lets the owner add, promote and list members; the new member sees it with its role', async () => {
      expect((await call('POST', `/organizations/${orgId}/members`, { key: owner, body: { account_id: ann.accountId, role: 'member' } })).status).toBe(201);
      expect((await call('PATCH', `/organizations/${orgId}/members/${ann.accountId}`, { key: owner, body: { role: 'admin' } })).status).toBe(200);
      const members = await call('GET', `/organizations/${orgId}/members`, { key: ann.key });
      expect(members.json.data).toEqual([
        { account_id: ownerAccount, role: 'owner', added_at: expect.any(String) },
        { account_id: ann.accountId, role: 'admin', added_at: expect.any(String) },
      ]);
      expect((await call('GET', '/organizations', { key: ann.key })).json.data).toEqual([expect.objectContaining({ id: orgId, role: 'admin' })]);
    });

    it('lets an admin add a member, but not a member manage anyone, and names an unknown account', async () => {
      expect((await call('POST', `/organizations/${orgId}/members`, { key: ann.key, body: { account_id: bob.accountId, role: 'member' } })).status).toBe(201);
      const refused = await call('PATCH', `/organizations/${orgId}/members/${ann.accountId}`, { key: bob.key, body: { role: 'member' } });
      expect(refused.status).toBe(403);
      expect(refused.json.error).toMatchObject({ type: 'permission_error', code: 'org_role_required' });
      const unknown = await call('POST', `/organizations/${orgId}/members`, { key: owner, body: { account_id: 'acc_missing', role: 'member' } });
      expect(unknown.status).toBe(404);
      expect(unknown.json.error).toMatchObject({ code: 'account_not_found', param: 'account_id' });
      const twice = await call('POST', `/organizations/${orgId}/members`, { key: owner, body: { account_id: bob.accountId, role: 'member' } });
      expect(twice.status).toBe(409);
      expect(twice.json.error).toMatchObject({ code: 'member_exists', param: 'account_id' });
    });

    it('lets a member leave, and then it knows the organization no more', async () => {
      expect((await call('DELETE', `/organizations/${orgId}/members/${bob.accountId}`, { key: bob.key })).status).toBe(200);
      const gone = await call('GET', `/organizations/${orgId}/members`, { key: bob.key });
      expect(gone.status).toBe(404);
      expect(gone.json.error).toMatchObject({ code: 'org_not_found', param: 'id' });
    });

    it('lets only the owner delete it, with the emailed code when step-up is on', async () => {
      const byAdmin = await call('DELETE', `/organizations/${orgId}`, { key: ann.key });
      expect(byAdmin.status).toBe(403);
      expect(byAdmin.json.error.code).toBe('org_role_required');

      expect((await call('PATCH', '/settings', { key: owner, body: { step_up: { enabled: true, email: EMAIL } } })).status).toBe(200);
      const withoutCode = await call('DELETE', `/organizations/${orgId}`, { key: owner });
      expect(withoutCode.status).toBe(403);
      expect(withoutCode.json.error.code).toBe('step_up_required');
      expect((await call('GET', '/organizations', { key: owner })).json.data).toHaveLength(1);

      const code = await codeFor(owner, 'delete_organization');
      const deleted = await call('DELETE', `/organizations/${orgId}`, { key: owner, headers: { 'x-svc-step-up-code': code } });
      expect(deleted.json).toEqual({ data: { id: orgId, deleted: true } });
      expect((await call('GET', '/organizations', { key: owner })).json.data).toEqual([]);
      expect((await call('GET', '/organizations', { key: ann.key })).json.data).toEqual([]);
    });

    it('asks for a code to save a provider key while step-up is on, and saves nothing without it', async () => {
      const refused = await call('PUT', '/provider-keys/sim', { key: owner, body: { api_key: PROVIDER_SECRET } });
      expect(refused.status).toBe(403);
      expect(refused.json.error.code).toBe('step_up_required');
      expect((await call('GET', '/provider-keys', { key: owner })).json.data).toEqual([]);
      const code = await codeFor(owner, 'save_provider_key');
      const saved = await call('PUT', '/provider-keys/sim', { key: owner, body: { api_key: PROVIDER_SECRET }, headers: { 'x-svc-step-up-code': code } });
      expect(saved.status).toBe(200);
    });

    it('records who did each change in the owner’s audit log', async () => {
      const log = (await call('GET', '/audit-log', { key: owner })).json.data as { action: string; actor: string; ip: string }[];
      const orgActions = log.filter((e) => e.action.startsWith('org.')).map((e) => e.action);
      expect(orgActions).toEqual(['org.deleted', 'org.member_removed', 'org.member_added', 'org.member_role_changed', 'org.member_added', 'org.created']);
      expect(log.find((e) => e.action === 'org.created')).toMatchObject({ actor: expect.stringMatching(/^key:key_/), ip: expect.any(String) });
    });
  });
});
