import { spawnSync, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { Client } from 'pg';
import { generateEncryptionKey, usdToNano } from '@svc/platform';
import { api, freshPgSchemaUrl, type Call } from '../support/gateway';
import { spawnGateway } from '../support/second-gateway';
import { startSideBySide, until } from '../support/until';
import { endLeasesOf, spawnWorker, withSessionName } from '../support/worker';

const ROOT = join(__dirname, '..', '..');
const CLI = join(ROOT, 'dist', 'src', 'cli.js');
const ADMIN_TOKEN = 'admin-token-for-batch-worker-tests';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

const jsonl = (n: number, prompt: (i: number) => string) =>
  Array.from({ length: n }, (_, i) =>
    JSON.stringify({
      custom_id: `r${i}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: 'sim/echo', messages: [{ role: 'user', content: prompt(i) }], max_tokens: 20 },
    }),
  ).join('\n') + '\n';

/**
 * Spec 4.11 across real processes (issue 19): a production gateway takes the batches, worker
 * processes run their lines, sharing them through the PostgreSQL leases. A worker killed with
 * `kill -9` mid-batch loses nothing and bills nothing twice: the balance moves by exactly the
 * sum of the lines' costs, no hold stays open, and the ledger audit is clean.
 */
describe('batch lines run by worker processes (spec 4.11, issue 19)', () => {
  let gateway: ChildProcess;
  let call: Call;
  let root: string;
  let env: NodeJS.ProcessEnv;
  let db: Client;
  const workers: (ChildProcess & { name: string; metricsPort: number | null })[] = [];
  /** The first test's two workers, each serving its own /metrics (issue 22). */
  let pair: (ChildProcess & { metricsPort: number | null })[];
  let spawned = 0;

  /** A worker whose PostgreSQL sessions carry its name, so that a test can tell when a killed one's have ended. */
  const startWorker = async (extra: NodeJS.ProcessEnv = {}) => {
    const name = `batch-worker-${++spawned}-${process.pid}`;
    const worker = Object.assign(await spawnWorker(withSessionName({ ...env, ...extra }, name)), { name });
    workers.push(worker);
    return worker;
  };

  beforeAll(async () => {
    const databaseUrl = await freshPgSchemaUrl('batch_workers');
    // Leases end 5 s after the upstream timeout: short here, so a dead worker's lines return soon.
    const shared = { SVC_ENCRYPTION_KEY: generateEncryptionKey(), SVC_UPSTREAM_TIMEOUT_MS: '2000' };
    env = { ...process.env, ...shared, DATABASE_URL: databaseUrl, SVC_ADMIN_TOKEN: ADMIN_TOKEN };
    delete env.REDIS_URL;
    delete env.EVENTSTORE_URL;
    db = new Client({ connectionString: databaseUrl });
    // The schema they all make is made under a lock.
    await startSideBySide(
      [spawnGateway(databaseUrl, ADMIN_TOKEN, shared), startWorker({ SVC_METRICS_PORT: '0' }), startWorker({ SVC_METRICS_PORT: '0' }), db.connect()],
      ([started]) => {
        if (!started) return;
        gateway = started.child;
        root = started.url;
        call = api(root);
      },
    );
    pair = [...workers];
  }, 60_000);

  afterAll(async () => {
    for (const w of workers) w.kill('SIGKILL');
    gateway?.removeAllListeners('exit');
    gateway?.kill('SIGTERM');
    await db?.end();
  });

  const account = async (credits: number) => {
    const id = (await call('POST', '/admin/accounts', { body: { initial_credits_usd: credits }, headers: admin })).json.id as string;
    return { id, key: (await call('POST', `/admin/accounts/${id}/keys`, { body: {}, headers: admin })).json.key as string };
  };
  const submit = async (key: string, text: string) => {
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob([text]), 'input.jsonl');
    const file = (await (await fetch(`${root}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form })).json()) as {
      id: string;
    };
    const created = await call('POST', '/v1/batches', { key, body: { input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' } });
    expect(created.status).toBe(200);
    return created.json.id as string;
  };
  const batch = async (key: string, id: string) => (await call('GET', `/v1/batches/${id}`, { key })).json;
  const outputOf = async (key: string, fileId: string) =>
    (await (await fetch(`${root}/v1/files/${fileId}/content`, { headers: { authorization: `Bearer ${key}` } })).text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
  const credits = async (key: string) => (await call('GET', '/v1/credits', { key })).json.data as { balance: number; held: number; open_holds: number };

  /** Every line completed once, and the balance moved by exactly the sum of their costs. */
  const expectBilledOnce = async (key: string, id: string, lines: number, initial: number) => {
    const ended = await batch(key, id);
    expect(ended).toMatchObject({ status: 'completed', request_counts: { total: lines, completed: lines, failed: 0 } });
    const output = await outputOf(key, ended.output_file_id);
    expect(new Set(output.map((l) => l.custom_id)).size).toBe(lines);
    const sum = output.reduce((total, l) => total + usdToNano(String(l.response.body.usage.cost)), 0n);
    await until('no hold left open', async () => (await credits(key)).open_holds === 0, 30_000);
    expect(usdToNano(String((await credits(key)).balance))).toBe(usdToNano(String(initial)) - sum);
  };

  it('two workers share one batch of 5,000 lines without doubling any', async () => {
    // Between them, every line's charge once, by their /metrics.
    const { key } = await account(50);
    const started = Date.now();
    const id = await submit(
      key,
      jsonl(5000, (i) => `line ${i}`),
    );
    await until('the batch to end', async () => ['completed', 'failed'].includes((await batch(key, id)).status), 600_000, 100);
    console.log(`5,000 batch lines on 2 workers: ${((Date.now() - started) / 1000).toFixed(1)} s`);
    await expectBilledOnce(key, id, 5000, 50);

    const counted = { charges: 0, nano: 0n };
    for (const worker of pair) {
      const text = await (await fetch(`http://localhost:${worker.metricsPort}/metrics`)).text();
      counted.charges += Number(/^svc_charges_total (\d+)$/m.exec(text)![1]);
      counted.nano += BigInt(/^svc_charged_nano_usd_total (\d+)$/m.exec(text)![1]);
    }
    expect(counted).toEqual({ charges: 5000, nano: usdToNano('50') - usdToNano(String((await credits(key)).balance)) });
  }, 700_000);

  it('a worker killed with kill -9 mid-batch: restarted, every line is billed exactly once and the ledger audit is clean', async () => {
    while (workers.length > 1) workers.pop()!.kill('SIGKILL');
    const { key } = await account(5);
    // 500 ms a line, 8 at a time: some are in flight whenever 10 are done, even on a host that
    // stalls this process for a while (at 150 ms a line, all 60 could be done by the kill).
    const id = await submit(
      key,
      jsonl(60, (i) => `#sim {"delay_ms": 500}\nline ${i}`),
    );
    await until('some lines done', async () => (await batch(key, id)).request_counts.completed >= 10, 60_000, 100);
    const killed = workers.pop()!;
    killed.kill('SIGKILL');
    expect((await batch(key, id)).status).toBe('in_progress');
    // Its lines come back once its leases have run out, 7 s after their claims: ended here instead, as
    // soon as nothing of it runs any more, while the next worker starts.
    const [held] = await Promise.all([endLeasesOf(db, killed, killed.name), startWorker()]);
    expect(held).toBeGreaterThan(0);
    await until('the batch to end', async () => (await batch(key, id)).status === 'completed', 120_000, 100);
    await expectBilledOnce(key, id, 60, 5);
    const audit = spawnSync(process.execPath, [CLI, 'ledger', 'audit'], { cwd: ROOT, env, encoding: 'utf8' });
    expect(audit.status).toBe(0);
  }, 180_000);
});
