import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from 'pg';
import { JOBS_TABLE } from '@svc/jobs';
import { generateEncryptionKey } from '@svc/platform';
import { RETRY_DELAYS_MS, WEBHOOK_DELIVERY_JOB } from '@svc/webhooks';
import { api, freshPgSchemaUrl, type Call } from '../support/gateway';
import { startSideBySide, until } from '../support/until';
import { spawnWorker } from '../support/worker';
import { spawnGateway } from '../support/second-gateway';

const ADMIN_TOKEN = 'admin-token-for-webhook-worker-tests';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/**
 * Spec 6.1 across real processes: a gateway, and workers that deliver; retries survive a
 * worker killed with `kill -9`, and two workers never send one attempt twice.
 */
describe('webhook delivery by worker processes (spec 6.1: retries survive restarts)', () => {
  const deliveries: { id: string; at: number }[] = [];
  let script: number[] = [];
  let receiver: Server;
  let receiverUrl: string;
  let gateway: ChildProcess;
  let call: Call;
  let env: NodeJS.ProcessEnv;
  let db: Client;
  const workers: ChildProcess[] = [];
  let management: string;
  let accountId: string;

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => {
        deliveries.push({ id: JSON.parse(raw).id, at: Date.now() });
        res.writeHead(script.shift() ?? 200).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

    const databaseUrl = await freshPgSchemaUrl('webhook_workers');
    const shared = { SVC_ENCRYPTION_KEY: generateEncryptionKey(), SVC_WEBHOOK_ALLOW_PRIVATE: 'true' };
    env = { ...process.env, ...shared, DATABASE_URL: databaseUrl, SVC_ADMIN_TOKEN: ADMIN_TOKEN };
    delete env.REDIS_URL;
    delete env.EVENTSTORE_URL;
    db = new Client({ connectionString: databaseUrl });
    // The schema they all make is made under a lock.
    const startWorker = async () => void workers.push(await spawnWorker(env));
    await startSideBySide([spawnGateway(databaseUrl, ADMIN_TOKEN, shared), startWorker(), startWorker(), db.connect()], ([started]) => {
      if (!started) return;
      gateway = started.child;
      call = api(started.url);
    });

    accountId = (await call('POST', '/admin/accounts', { body: { initial_credits_usd: 1 }, headers: admin })).json.id;
    management = (await call('POST', `/admin/accounts/${accountId}/keys`, { body: { scope: 'management' }, headers: admin })).json.key;
    const saved = await call('PUT', '/v1/settings/webhook', { key: management, body: { url: receiverUrl, events: ['credits.added'] } });
    expect(saved.status).toBe(200);
  }, 90_000);

  afterAll(async () => {
    for (const w of workers) w.kill('SIGKILL');
    gateway?.removeAllListeners('exit');
    gateway?.kill('SIGTERM');
    await db?.end();
    await new Promise((resolve) => receiver?.close(resolve));
  });

  const events = async () =>
    (await call('GET', '/v1/webhook-events?limit=100', { key: management })).json.data as { id: string; delivery: { state: string; attempts: number } }[];

  it('two workers deliver 20 events, each exactly once', async () => {
    for (let i = 0; i < 20; i++)
      expect((await call('POST', `/admin/accounts/${accountId}/credits`, { body: { amount_usd: 0.01 }, headers: admin })).status).toBeLessThan(300);
    const listed = await until('20 delivered', async () => {
      const all = await events();
      return all.length === 20 && all.every((e) => e.delivery.state === 'delivered') && all;
    });
    // An attempt is sent only by the holder of its event's job, which ends the job last: once no
    // job is left, nothing more can be sent, and a second send of any attempt would be here.
    await until(
      'every delivery job ended',
      async () => (await db.query(`SELECT 1 FROM ${JOBS_TABLE} WHERE kind = $1`, [WEBHOOK_DELIVERY_JOB])).rows.length === 0,
    );
    const counts = new Map<string, number>();
    for (const d of deliveries) counts.set(d.id, (counts.get(d.id) ?? 0) + 1);
    expect([...counts.keys()].sort()).toEqual(listed.map((e) => e.id).sort());
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
  }, 60_000);

  it('a worker killed with kill -9 between attempts: the retry still comes, 30 s after the failure, under the same id', async () => {
    workers.pop()!.kill('SIGKILL');
    script = [500];
    const before = deliveries.length;
    await call('POST', `/admin/accounts/${accountId}/credits`, { body: { amount_usd: 0.02 }, headers: admin });
    const first = await until('the failed first attempt recorded', async () => {
      const e = (await events()).find((x) => x.delivery.attempts === 1 && x.delivery.state === 'pending');
      return e;
    });
    const failedAt = deliveries[before].at;
    const killed = workers.pop()!;
    const dead = once(killed, 'exit');
    killed.kill('SIGKILL');
    await dead;
    workers.push(await spawnWorker(env));

    await until('the retry', () => deliveries.length === before + 2, 60_000);
    expect(deliveries[before + 1].id).toBe(first.id);
    expect(deliveries[before + 1].at - failedAt).toBeGreaterThanOrEqual(RETRY_DELAYS_MS[0] - 1000);
    await until('delivered', async () => (await events()).find((x) => x.id === first.id)?.delivery.state === 'delivered');
  }, 90_000);
});
