import { execFile, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { once } from 'node:events';
import { usdToNano } from '@svc/platform';
import { processLogs } from '../support/process-logs';
import { api, type Call } from '../support/gateway';
import { spawnGateway } from '../support/second-gateway';
import { describeWithEngines, topology } from '../support/topology';
import { until } from '../support/until';
import { spawnWorker } from '../support/worker';

const ADMIN_TOKEN = 'admin-token-for-pg-failover';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
/** HAProxy's port for the current primary (scripts/topology/pg-ha.sh). */
const DATABASE_URL = 'postgres://postgres@127.0.0.1:25000/postgres';
const CLI = join(__dirname, '..', '..', 'dist', 'src', 'cli.js');
const ACCOUNTS = 16;
const CONNECTIONS = 24;
/** The load runs this long; the primary is killed after KILL_AFTER_MS of it. */
const LOAD_MS = 30_000;
const KILL_AFTER_MS = 6_000;

const logs = processLogs('pg-failover');
const LOG_DIR = logs.dir;
const keepLog = logs.keep;

interface Outcome {
  account: number;
  status: number;
  cost: bigint;
  id: string | null;
  code?: string;
  retryAfter: string | null;
  at: number;
  doneAt: number;
  stream: boolean;
}

/**
 * Issue 43 item 1: PostgreSQL with a synchronous standby under Patroni, HAProxy in front, two
 * gateways and a worker under load on many accounts; the primary is lost as a machine is (its
 * Patroni and every PostgreSQL process, kill -9). A charge whose answer reached the client was
 * committed on the standby too, so it survives; while no primary serves, requests get 503 with
 * Retry-After; afterwards every answered request is charged exactly once, nothing is charged
 * for one that failed, no hold stays open, and the audit replays the log clean.
 */
describeWithEngines(['patroni', 'etcd', 'haproxy'], 'issue 43: the PostgreSQL primary killed under load', () => {
  const children: ChildProcess[] = [];
  let gateways: Call[] = [];
  const env = { SVC_RATE_LIMITS_LIVE: 'rpm=1000000,tpm=1000000000,concurrent=1000' };

  beforeAll(async () => {
    await topology('pg-ha', 'down');
    await topology('pg-ha', 'up');
    for (let i = 0; i < 2; i++) {
      const g = await spawnGateway(DATABASE_URL, ADMIN_TOKEN, env);
      children.push(g.child);
      keepLog(g.child, `gateway-${i}`);
      gateways.push(api(g.url));
    }
    const worker = await spawnWorker({ ...process.env, DATABASE_URL, SVC_ADMIN_TOKEN: ADMIN_TOKEN, REDIS_URL: '' });
    children.push(worker);
    keepLog(worker, 'worker');
  }, 300_000);

  afterAll(async () => {
    for (const child of children) {
      child.removeAllListeners('exit');
      if (child.exitCode === null && child.signalCode === null) {
        const exited = once(child, 'exit');
        child.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
        child.kill('SIGKILL');
      }
    }
    gateways = [];
    // SVC_KEEP_TOPOLOGY=1 leaves the cluster up to look into after a run.
    if (!process.env.SVC_KEEP_TOPOLOGY) await topology('pg-ha', 'down');
  }, 120_000);

  it('loses no answered charge, charges no failure, answers 503 with Retry-After meanwhile, and audits clean', async () => {
    const accounts: { id: string; key: string }[] = [];
    for (let i = 0; i < ACCOUNTS; i++) {
      const id = (await gateways[0]('POST', '/admin/accounts', { body: { initial_credits_usd: 50 }, headers: admin })).json.id as string;
      const key = (await gateways[0]('POST', `/admin/accounts/${id}/keys`, { body: {}, headers: admin })).json.key as string;
      accounts.push({ id, key });
    }

    const started = Date.now();
    const outcomes: Outcome[] = [];
    let n = 0;
    const client = async () => {
      while (Date.now() - started < LOAD_MS) {
        const i = n++;
        const account = i % ACCOUNTS;
        const stream = i % 3 === 0;
        const body = {
          model: 'sim/echo',
          max_tokens: 16,
          messages: [{ role: 'user', content: `failover ${i}` }],
          ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
        };
        const at = Date.now() - started;
        let r: Awaited<ReturnType<Call>>;
        try {
          r = await gateways[i % gateways.length]('POST', '/v1/chat/completions', { key: accounts[account].key, body });
        } catch (err) {
          outcomes.push({ account, status: 0, cost: 0n, id: null, code: String(err), retryAfter: null, at, doneAt: Date.now() - started, stream });
          continue;
        }
        let cost = 0n;
        let status = r.status;
        if (r.status === 200 && stream) {
          const frames = (r.json as string)
            .split('\n\n')
            .filter((f) => f.startsWith('data: ') && f !== 'data: [DONE]')
            .map((f) => JSON.parse(f.slice(6)));
          // A stream that ends in an error frame told its client it failed: it counts as not answered.
          const last = frames[frames.length - 1];
          if (frames.some((f) => f.error) || !last?.usage) status = -1;
          else cost = usdToNano(last.usage.cost);
        } else if (r.status === 200) cost = usdToNano(r.json.usage.cost);
        outcomes.push({
          account,
          status,
          cost,
          id: r.headers.get('x-svc-generation-id'),
          code: r.json?.error?.code,
          retryAfter: r.headers.get('retry-after'),
          at,
          doneAt: Date.now() - started,
          stream,
        });
        if (r.status !== 200) await new Promise((resolve) => setTimeout(resolve, 200));
      }
    };
    const killer = (async () => {
      await new Promise((resolve) => setTimeout(resolve, KILL_AFTER_MS));
      return { node: await topology('pg-ha', 'kill-primary'), at: Date.now() - started };
    })();
    await Promise.all(Array.from({ length: CONNECTIONS }, client));
    const killed = await killer;

    const answered = outcomes.filter((o) => o.status === 200);
    const failed = outcomes.filter((o) => o.status !== 200);
    // Never a 500 and never a dropped connection: during the switch the answer is the spec's 503 with Retry-After.
    expect(failed.filter((o) => o.status !== 503)).toEqual([]);
    for (const o of failed) expect(o.retryAfter).not.toBeNull();
    // Service came back: the load's last seconds were answered.
    expect(answered.filter((o) => o.at > LOAD_MS - 5_000).length).toBeGreaterThan(0);
    // The seconds without service: the longest time in which no request was answered.
    const answeredAt = answered.map((o) => o.doneAt).sort((a, b) => a - b);
    const gap = Math.max(...answeredAt.slice(1).map((t, j) => t - answeredAt[j]));
    console.log(
      `pg-failover (logs in ${LOG_DIR}): ${outcomes.length} requests, ${answered.length} answered, ${failed.length} refused 503; primary ${killed.node} killed at ${killed.at} ms; longest time without an answer ${(gap / 1000).toFixed(1)} s`,
    );
    expect(failed.length).toBeGreaterThan(0);

    // Exactly one charge per answered request, none for a refused one, no hold left open.
    for (const [i, { key }] of accounts.entries()) {
      const mine = answered.filter((o) => o.account === i);
      const credits = await until(
        `account ${i}'s holds to close`,
        async () => {
          const r = await gateways[0]('GET', '/v1/credits', { key });
          return r.status === 200 && r.json.data.open_holds === 0 ? r.json.data : null;
        },
        90_000,
        500,
      );
      expect(usdToNano(credits.total_usage)).toBe(mine.reduce((sum, o) => sum + o.cost, 0n));
      expect(usdToNano(credits.balance)).toBeGreaterThanOrEqual(0n);
      expect(new Set(mine.map((o) => o.id)).size).toBe(mine.length);
    }
    for (const o of answered.filter((_, j) => j % 25 === 0)) {
      const g = await gateways[1]('GET', `/v1/generation?id=${o.id}`, { key: accounts[o.account].key });
      expect(g.status).toBe(200);
      expect(usdToNano(g.json.data.total_cost)).toBe(o.cost);
    }

    // The log replays to the same balances, the invariants hold, and the read models equal a rebuild.
    const audit = await promisify(execFile)(process.execPath, [CLI, 'ledger', 'audit', '--json'], { env: { ...process.env, DATABASE_URL } });
    const report = JSON.parse(audit.stdout);
    expect(report.violations).toEqual([]);
    expect(report.projections.mismatches).toEqual([]);
  }, 300_000);
});
