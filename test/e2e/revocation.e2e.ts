import { twoGateways } from '../support/second-gateway';

const ADMIN_TOKEN = 'admin-token-for-revocation-tests';

describe('revocation is immediate across gateway processes (spec 3.3, 5.5)', () => {
  const gateways = twoGateways('revoke', ADMIN_TOKEN);

  it('once DELETE /v1/keys/{id} has answered on one process, the other refuses the key', async () => {
    const { one, two } = gateways;
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const accountId = (await one('POST', '/admin/accounts', { body: { initial_credits_usd: 1 }, headers: admin })).json.id;
    const management = (await one('POST', `/admin/accounts/${accountId}/keys`, { body: { scope: 'management' }, headers: admin })).json.key;

    for (let i = 0; i < 5; i++) {
      const created = await one('POST', '/v1/keys', { key: management, body: { name: `k${i}` } });
      const secret = created.json.key;
      expect((await two('GET', '/v1/key', { key: secret })).status).toBe(200);
      expect((await one('DELETE', `/v1/keys/${created.json.data.id}`, { key: management })).status).toBe(200);
      // No wait between the two: the DELETE answered only once the revocation was projected.
      const after = await two('GET', '/v1/key', { key: secret });
      expect(after.status).toBe(401);
      expect(after.json.error.type).toBe('authentication_error');
      expect((await two('POST', '/v1/chat/completions', { key: secret, body: { model: 'sim/echo', messages: [{ role: 'user', content: 'x' }] } })).status).toBe(401);
    }
  }, 60_000);
});
