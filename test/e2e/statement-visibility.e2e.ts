import { ManualClock, usdToNano } from '@svc/platform';
import { api, type Call, startGateway, stopGateway, type StartedGateway } from '../support/gateway';

const ADMIN_TOKEN = 'admin-token-for-statement-visibility';
const chat = (content: string) => ({ model: 'sim/echo', messages: [{ role: 'user', content }], max_tokens: 20 });
const nano = (usd: number) => usdToNano(usd, { allowNegative: true });

/**
 * GET /v1/credits/statement from an organization member's management key: the owner's balance,
 * but only the charges of the keys the member may see, by the rule of GET /v1/generation.
 */
describe('a statement shows what its caller may see (issue 41 item 13)', () => {
  const clock = new ManualClock(new Date('2026-11-02T10:00:00.000Z'));
  let gw: StartedGateway;
  let call: Call;
  let ownerManagement: string;
  let memberManagement: string;
  let ownerGeneration: string;
  let orgKeyId: string;
  let personalKeyId: string;
  const admin = (method: string, path: string, body?: unknown) => call(method, path, { body, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const statement = (key: string) => call('GET', '/v1/credits/statement?from=2026-11-02&to=2026-11-03', { key });

  beforeAll(async () => {
    gw = await startGateway({ SVC_ADMIN_TOKEN: ADMIN_TOKEN }, undefined, { clock });
    call = api(gw.url.replace(/\/v1$/, ''));
    const owner = (await admin('POST', '/admin/accounts', { initial_credits_usd: 5 })).json.id;
    const member = (await admin('POST', '/admin/accounts', { initial_credits_usd: 1 })).json.id;
    const org = (await admin('POST', '/admin/orgs', { owner_account_id: owner, name: 'Acme' })).json.id;
    expect((await admin('POST', `/admin/orgs/${org}/members`, { account_id: member, role: 'member' })).status).toBe(201);
    ownerManagement = (await admin('POST', `/admin/accounts/${owner}/keys`, { scope: 'management' })).json.key;
    memberManagement = (await admin('POST', `/admin/accounts/${member}/keys`, { scope: 'management', org_id: org })).json.key;
    const personal = (await admin('POST', `/admin/accounts/${owner}/keys`, {})).json;
    personalKeyId = personal.data.id;
    const orgKey = await call('POST', '/v1/keys', { key: memberManagement, body: { name: 'member key' } });
    expect(orgKey.status).toBe(201);
    orgKeyId = orgKey.json.data.id;

    clock.set('2026-11-02T11:00:00.000Z');
    const mine = await call('POST', '/v1/chat/completions', { key: personal.key, body: chat("the owner's own request") });
    expect(mine.status).toBe(200);
    ownerGeneration = mine.json.id;
    clock.set('2026-11-02T12:00:00.000Z');
    expect((await call('POST', '/v1/chat/completions', { key: orgKey.json.key, body: chat("the member's request") })).status).toBe(200);
    clock.set('2026-11-02T13:00:00.000Z');
    const adjusted = await admin('POST', `/admin/accounts/${owner}/adjustments`, {
      amount_usd: 0.5,
      kind: 'credit_note',
      reason: 'goodwill for the owner',
      operator: 'ana@ops',
      adjustment_id: 'adj-owner-1',
    });
    expect(adjusted.status).toBe(201);
    clock.set('2026-11-04T00:00:00.000Z');
  }, 60_000);

  afterAll(() => stopGateway(gw));

  it("the member is told 404 for the owner's generation, as before", async () => {
    expect((await call('GET', `/v1/generation?id=${ownerGeneration}`, { key: memberManagement })).status).toBe(404);
  });

  it("a member's statement lists only its workspace's charges, the owner's as one sum, and no operator notes", async () => {
    const r = await statement(memberManagement);
    expect(r.status).toBe(200);
    const s = r.json.data;
    expect(s.charges.map((c: { key_id: string }) => c.key_id)).toEqual([orgKeyId]);
    expect(JSON.stringify(s)).not.toContain(personalKeyId);
    expect(s.adjustments).toEqual([
      { at: '2026-11-02T13:00:00.000Z', adjustment_id: 'adj-owner-1', kind: 'credit_note', amount: 0.5, reason: null, operator: null },
    ]);
    expect(JSON.stringify(s)).not.toContain('ana@ops');
    expect(JSON.stringify(s)).not.toContain('goodwill');
    expect(s.totals.charges).toBe(s.charges[0].amount);
    expect(s.totals.by_meter).toEqual(s.charges[0].meters);
    // The owner's balance still adds up, with what the member may not see as one sum.
    const { totals } = s;
    expect(nano(s.closing_balance)).toBe(
      nano(s.opening_balance) + nano(totals.credits) - nano(totals.charges) - nano(totals.other_keys_charges) + nano(totals.adjustments),
    );
    expect(nano(totals.other_keys_charges)).toBeGreaterThan(0n);
  });

  it("the owner's own management key sees the whole statement, with the adjustment's reason and operator", async () => {
    const r = await statement(ownerManagement);
    expect(r.status).toBe(200);
    const s = r.json.data;
    expect(s.charges.map((c: { key_id: string }) => c.key_id).sort()).toEqual([orgKeyId, personalKeyId].sort());
    expect(s.adjustments[0]).toMatchObject({ reason: 'goodwill for the owner', operator: 'ana@ops' });
    expect(s.totals.other_keys_charges).toBeUndefined();
    const member = (await statement(memberManagement)).json.data;
    expect(nano(member.totals.charges) + nano(member.totals.other_keys_charges)).toBe(nano(s.totals.charges));
    expect(member.closing_balance).toBe(s.closing_balance);
  });
});
