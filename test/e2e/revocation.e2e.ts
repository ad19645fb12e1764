import type { ChildProcess } from 'node:child_process';
import { api, freshPgSchemaUrl, startGateway } from '../support/gateway';
import { spawnGateway } from '../support/second-gateway';

const ADMIN_TOKEN = 'admin-token-for-revocation-tests';

describe('revocation is immediate across gateway processes (spec 3.3, 5.5)', () => {
  let first: Awaited<ReturnType<typeof startGateway>>;
  let second: { child: ChildProcess; url: string };

  beforeAll(async () => {
    const databaseUrl = await freshPgSchemaUrl('revoke');
    first = await startGateway({ DATABASE_URL: databaseUrl, SVC_ADMIN_TOKEN: ADMIN_TOKEN });
    second = await spawnGateway(databaseUrl, ADMIN_TOKEN);
  }, 60_000);

  afterAll(async () => {
    second?.child.removeAllListeners('exit');
    second?.child.kill('SIGTERM');
    await first?.close();
    first?.removeDataDir();
  });

  it('once DELETE /v1/keys/{id} has answered on one process, the other refuses the key', async () => {
    const one = api(first.url.replace(/\/v1$/, ''));
    const two = api(second.url);
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
