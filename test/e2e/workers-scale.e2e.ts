import { execFile, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { generateEncryptionKey, PgSqlRunner, usdToNano } from '@svc/platform';
import { api, freshPgSchemaUrl, type Call } from '../support/gateway';
import { spawnGateway } from '../support/second-gateway';
import { startSideBySide, until } from '../support/until';
import { spawnWorker } from '../support/worker';

const CLI = join(__dirname, '..', '..', 'dist', 'src', 'cli.js');
const ADMIN_TOKEN = 'admin-token-for-workers-scale';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const WORKERS = 3;
const ACCOUNTS = 8;
const LOAD_MS = 32_000;
/** One worker is killed with kill -9 this often, and another started in its place. */
const KILL_EVERY_MS = 5_000;
const BATCH_LINES = 120;

/**
 * Issue 43 item 5: projections and jobs spread over any number of workers. Three workers run
 * while a gateway takes chat requests and a batch runs; every few seconds one worker is killed
 * with kill -9 and another started. A projection's step holds its checkpoint row (FOR UPDATE)
 * for its transaction, so no two workers run it at once and a killed one's step rolls back
 * whole; a job's lease returns its work to another worker. Afterwards every read model equals
 * its rebuild from the log (nothing applied twice, nothing skipped), the batch completed with
 * every line billed once, and no hold is left open.
 */
describe('issue 43: workers killed one after another while projections and jobs run', () => {
  let gateway: ChildProcess;
  let call: Call;
  let root: string;
  let env: NodeJS.ProcessEnv;
  let databaseUrl: string;
  const workers: ChildProcess[] = [];

  beforeAll(async () => {
    databaseUrl = await freshPgSchemaUrl('workers_scale');
    const shared = { SVC_ENCRYPTION_KEY: generateEncryptionKey(), SVC_UPSTREAM_TIMEOUT_MS: '2000' };
    env = { ...process.env, ...shared, DATABASE_URL: databaseUrl, SVC_ADMIN_TOKEN: ADMIN_TOKEN };
    delete env.REDIS_URL;
    delete env.EVENTSTORE_URL;
    // The schema they all make is made under a lock.
    await startSideBySide(
      [
        spawnGateway(databaseUrl, ADMIN_TOKEN, { ...shared, SVC_RATE_LIMITS_LIVE: 'rpm=1000000,tpm=1000000000,concurrent=1000' }),
        ...Array.from({ length: WORKERS }, async () => void workers.push(await spawnWorker(env))),
      ],
      ([started]) => {
        if (!started) return;
        gateway = started.child;
        root = started.url;
        call = api(root);
      },
    );
  }, 90_000);

  afterAll(() => {
    for (const w of workers) w.kill('SIGKILL');
    gateway?.removeAllListeners('exit');
    gateway?.kill('SIGTERM');
  });

  it('applies nothing twice, leaves nothing stuck, and bills every answer and batch line once', async () => {
    const accounts: { id: string; key: string }[] = [];
    for (let i = 0; i < ACCOUNTS; i++) {
      const id = (await call('POST', '/admin/accounts', { body: { initial_credits_usd: 20 }, headers: admin })).json.id as string;
      accounts.push({ id, key: (await call('POST', `/admin/accounts/${id}/keys`, { body: {}, headers: admin })).json.key as string });
    }
    const form = new FormData();
    form.append('purpose', 'batch');
    const lines = Array.from({ length: BATCH_LINES }, (_, i) =>
      JSON.stringify({
        custom_id: `r${i}`,
        method: 'POST',
        url: '/v1/chat/completions',
        body: { model: 'sim/echo', messages: [{ role: 'user', content: `#sim {"delay_ms": 100}\nline ${i}` }], max_tokens: 20 },
      }),
    );
    form.append('file', new Blob([lines.join('\n') + '\n']), 'input.jsonl');
    const batchKey = accounts[0].key;
    const file = (await (await fetch(`${root}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${batchKey}` }, body: form })).json()) as {
      id: string;
    };
    const batchId = (
      await call('POST', '/v1/batches', { key: batchKey, body: { input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' } })
    ).json.id as string;

    const started = Date.now();
    const answered: { account: number; cost: bigint }[] = [];
    let n = 0;
    const client = async () => {
      while (Date.now() - started < LOAD_MS) {
        const i = n++;
        const r = await call('POST', '/v1/chat/completions', {
          key: accounts[i % ACCOUNTS].key,
          body: { model: 'sim/echo', max_tokens: 16, messages: [{ role: 'user', content: `scale ${i}` }] },
        });
        expect(r.status).toBe(200);
        answered.push({ account: i % ACCOUNTS, cost: usdToNano(r.json.usage.cost) });
      }
    };
    let killed = 0;
    const replacements: Promise<unknown>[] = [];
    const killer = async () => {
      while (Date.now() - started < LOAD_MS - KILL_EVERY_MS) {
        await new Promise((resolve) => setTimeout(resolve, KILL_EVERY_MS));
        // At least one stays up; its replacement starts meanwhile and joins when it is ready.
        if (workers.length < 2) continue;
        workers.splice(Math.floor(Math.random() * workers.length), 1)[0].kill('SIGKILL');
        killed++;
        replacements.push(spawnWorker(env).then((w) => workers.push(w)));
      }
    };
    await Promise.all([...Array.from({ length: 8 }, client), killer()]);
    await Promise.all(replacements);
    expect(killed).toBeGreaterThanOrEqual(4);

    const batch = await until(
      'the batch to complete',
      async () => {
        const b = (await call('GET', `/v1/batches/${batchId}`, { key: batchKey })).json;
        return b.status === 'completed' ? b : null;
      },
      120_000,
      100,
    );
    expect(batch.request_counts).toEqual({ total: BATCH_LINES, completed: BATCH_LINES, failed: 0 });
    const output = (await (await fetch(`${root}/v1/files/${batch.output_file_id}/content`, { headers: { authorization: `Bearer ${batchKey}` } })).text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { custom_id: string; response: { body: { usage: { cost: number } } } });
    expect(new Set(output.map((l) => l.custom_id)).size).toBe(BATCH_LINES);
    const batchCost = output.reduce((sum, l) => sum + usdToNano(String(l.response.body.usage.cost)), 0n);

    for (const [i, { key }] of accounts.entries()) {
      const expected = answered.filter((a) => a.account === i).reduce((sum, a) => sum + a.cost, 0n) + (i === 0 ? batchCost : 0n);
      const credits = await until(
        `account ${i}'s read model to catch up`,
        async () => {
          const c = (await call('GET', '/v1/credits', { key })).json.data;
          return c.open_holds === 0 && usdToNano(String(c.total_usage)) === expected ? c : null;
        },
        60_000,
        100,
      );
      expect(usdToNano(String(credits.balance))).toBe(usdToNano('20') - expected);
    }

    // Each projection's checkpoint moved by one worker at a time: the rebuild equals what the workers built.
    const audit = await promisify(execFile)(process.execPath, [CLI, 'ledger', 'audit', '--json'], { env });
    const report = JSON.parse(audit.stdout);
    expect(report.violations).toEqual([]);
    expect(report.projections.mismatches).toEqual([]);
    const db = await PgSqlRunner.connect({ connectionString: databaseUrl, max: 1 });
    try {
      const { rows } = await db.query<{ n: string }>('SELECT count(*) AS n FROM projection_quarantine');
      expect(Number(rows[0].n)).toBe(0);
    } finally {
      await db.close();
    }
    console.log(`workers-scale: ${answered.length} chat answers and ${BATCH_LINES} batch lines while ${killed} workers were killed`);
  }, 240_000);
});
