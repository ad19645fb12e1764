import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { api, freshPgSchemaUrl, startGateway } from '../support/gateway';

const ROOT = join(__dirname, '..', '..');
const GATEWAY = join(ROOT, 'dist', 'apps', 'gateway', 'src', 'main.js');
const ADMIN_TOKEN = 'admin-token-for-revocation-tests';

/** A second, separate gateway process (the production entry point) on the same PostgreSQL. */
function spawnGateway(databaseUrl: string): Promise<{ child: ChildProcess; url: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: databaseUrl, PORT: '0', HOST: '127.0.0.1', SVC_ADMIN_TOKEN: ADMIN_TOKEN };
  delete env.EVENTSTORE_URL;
  const child = spawn(process.execPath, [GATEWAY], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  return new Promise((resolve, reject) => {
    const fail = (why: string) => {
      child.kill('SIGKILL');
      reject(new Error(`second gateway ${why}:\n${output}`));
    };
    const timer = setTimeout(() => fail('did not start'), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const m = /listening on (http:\/\/\S+)/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1] });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`second gateway exited with ${code}:\n${output}`));
    });
  });
}

describe('revocation is immediate across gateway processes (spec 3.3, 5.5)', () => {
  let first: Awaited<ReturnType<typeof startGateway>>;
  let second: { child: ChildProcess; url: string };

  beforeAll(async () => {
    if (!existsSync(GATEWAY)) throw new Error('dist is missing: `npm test` builds it first (npm run build)');
    const databaseUrl = await freshPgSchemaUrl('revoke');
    first = await startGateway({ DATABASE_URL: databaseUrl, SVC_ADMIN_TOKEN: ADMIN_TOKEN });
    second = await spawnGateway(databaseUrl);
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
