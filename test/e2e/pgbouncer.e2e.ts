import { execFile, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { ACK_WAIT_MS } from '@svc/identity';
import { generateEncryptionKey, usdToNano } from '@svc/platform';
import { processLogs } from '../support/process-logs';
import { api, type Call } from '../support/gateway';
import { spawnGateway } from '../support/second-gateway';
import { describeWithEngines, topology } from '../support/topology';
import { until } from '../support/until';
import { spawnWorker } from '../support/worker';

const ADMIN_TOKEN = 'admin-token-for-pgbouncer-tests';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const CLI = join(__dirname, '..', '..', 'dist', 'src', 'cli.js');
/** scripts/topology/pgbouncer.sh's port. */
const PGBOUNCER_PORT = 26432;
/**
 * Its server connections per database (default_pool_size), fewer here than by default: the
 * statements of three processes queue for them, and the pools open client connections meanwhile.
 */
const PGBOUNCER_POOL_SIZE = 8;
/** Each gateway's statement pool: together more client connections than PgBouncer has server ones. */
const GATEWAY_POOL_MAX = 20;
const ACCOUNTS = 6;
const CONNECTIONS = 24;
const LOAD_MS = 10_000;
const BATCH_LINES = 30;
/** The application name of every session (DATABASE_SESSION_URL) the processes open. */
const SESSION_NAME = 'svc-pgb-session';

const logs = processLogs('pgbouncer');
const LOG_DIR = logs.dir;
const keepLog = logs.keep;

interface Outcome {
  account: number;
  status: number;
  cost: bigint;
  id: string | null;
  retryAfter: string | null;
}

/** One sample of PgBouncer's pool for the test's database, and of PostgreSQL's backends on it. */
interface Sample {
  clients: number;
  servers: number;
  backends: number;
}

/**
 * Many gateways without exhausting PostgreSQL (docs/operations.md, "Connections per process"):
 * two gateway processes and a worker send their statements through PgBouncer in transaction
 * pooling mode and keep their LISTEN sessions (DATABASE_SESSION_URL) straight to PostgreSQL.
 * Under chat load on several accounts, a hot one and streams among them, every answered request
 * is charged once, a key revoked on one gateway is refused by the other as soon as the DELETE
 * has answered (spec 5.5: the invalidation travels by NOTIFY to the other's LISTEN session), the
 * worker's batch completes, the audit is clean, and PostgreSQL never sees more than PgBouncer's
 * pool plus the sessions, however many client connections the pools open.
 */
describeWithEngines(['pgbouncer'], 'gateways and a worker behind PgBouncer in transaction mode', () => {
  const children: ChildProcess[] = [];
  let gateways: Call[] = [];
  const urls: string[] = [];
  let database: string;
  let direct: URL;
  let env: NodeJS.ProcessEnv;
  let monitor: Client;
  let console_: Client;

  beforeAll(async () => {
    // PgBouncer in front of the run's PostgreSQL server; a database of the test's own, since
    // PgBouncer drops the search_path the other suites set per connection (`options`).
    direct = new URL(process.env.DATABASE_URL!);
    await topology('pgbouncer', 'down');
    // Not through topology(): the script needs these in its environment.
    await promisify(execFile)(join(__dirname, '..', '..', 'scripts', 'topology', 'pgbouncer.sh'), ['up'], {
      env: {
        ...process.env,
        SVC_PGBOUNCER_UPSTREAM_HOST: direct.hostname,
        SVC_PGBOUNCER_UPSTREAM_PORT: direct.port || '5432',
        SVC_PGBOUNCER_POOL_SIZE: String(PGBOUNCER_POOL_SIZE),
      },
      timeout: 60_000,
    });
    database = `svc_pgb_${randomBytes(6).toString('hex')}`;
    const admin = new Client({ connectionString: direct.toString() });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${database}`);
    await admin.end();
    direct.pathname = `/${database}`;
    direct.search = '';
    const session = new URL(direct);
    session.searchParams.set('application_name', SESSION_NAME);
    const pooled = `postgres://${direct.username}@127.0.0.1:${PGBOUNCER_PORT}/${database}`;
    const shared = {
      DATABASE_URL: pooled,
      DATABASE_SESSION_URL: session.toString(),
      SVC_ENCRYPTION_KEY: generateEncryptionKey(),
      SVC_RATE_LIMITS_LIVE: 'rpm=1000000,tpm=1000000000,concurrent=1000',
    };
    env = { ...process.env, ...shared, SVC_ADMIN_TOKEN: ADMIN_TOKEN, REDIS_URL: '' };
    for (let i = 0; i < 2; i++) {
      const g = await spawnGateway(pooled, ADMIN_TOKEN, { ...shared, DATABASE_POOL_MAX: String(GATEWAY_POOL_MAX) });
      children.push(g.child);
      keepLog(g.child, `gateway-${i}`);
      gateways.push(api(g.url));
      urls.push(g.url);
    }
    const worker = await spawnWorker(env);
    children.push(worker);
    keepLog(worker, 'worker');
    monitor = new Client({ connectionString: direct.toString(), application_name: 'svc-pgb-monitor' });
    await monitor.connect();
    console_ = new Client({ connectionString: `postgres://postgres@127.0.0.1:${PGBOUNCER_PORT}/pgbouncer` });
    await console_.connect();
  }, 120_000);

  afterAll(async () => {
    for (const child of children) {
      child.removeAllListeners('exit');
      if (child.exitCode === null && child.signalCode === null) {
        const exited = once(child, 'exit');
        child.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000).unref())]);
        child.kill('SIGKILL');
      }
    }
    gateways = [];
    await console_?.end().catch(() => undefined);
    await monitor?.end().catch(() => undefined);
    // SVC_KEEP_TOPOLOGY=1 leaves PgBouncer and the database to look into after a run.
    if (process.env.SVC_KEEP_TOPOLOGY) return;
    await topology('pgbouncer', 'down');
    if (database) {
      const admin = new Client({ connectionString: process.env.DATABASE_URL });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.end();
    }
  }, 60_000);

  const sample = async (): Promise<Sample> => {
    const { rows } = await console_.query<Record<string, string>>('SHOW POOLS');
    const pool = rows.find((r) => r.database === database);
    const n = (column: string) => Number(pool?.[column] ?? 0);
    const backends = await monitor.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
      [database],
    );
    return {
      clients: n('cl_active') + n('cl_waiting'),
      servers: n('sv_active') + n('sv_idle') + n('sv_used') + n('sv_tested') + n('sv_login'),
      backends: backends.rows[0].n,
    };
  };
  /**
   * The sessions on DATABASE_SESSION_URL (its application name): the event store's LISTEN in the
   * process that runs the projections, and each gateway's authentication cache lease.
   */
  const sessions = async () => {
    const { rows } = await monitor.query<{ listen: number; lease: number }>(
      `SELECT count(*) FILTER (WHERE query = 'LISTEN eventstore_appended')::int AS listen,
              count(*) FILTER (WHERE query <> 'LISTEN eventstore_appended')::int AS lease
         FROM pg_stat_activity WHERE datname = $1 AND application_name = $2`,
      [database, SESSION_NAME],
    );
    return rows[0];
  };

  it('bills every answer once, keeps revocation immediate, completes the worker batch, and opens at most the pool on PostgreSQL', async () => {
    const [one, two] = gateways;
    const accounts: { id: string; key: string }[] = [];
    for (let i = 0; i < ACCOUNTS; i++) {
      const id = (await one('POST', '/admin/accounts', { body: { initial_credits_usd: 50 }, headers: admin })).json.id as string;
      const key = (await one('POST', `/admin/accounts/${id}/keys`, { body: {}, headers: admin })).json.key as string;
      accounts.push({ id, key });
    }
    const management = (await one('POST', `/admin/accounts/${accounts[1].id}/keys`, { body: { scope: 'management' }, headers: admin })).json.key as string;
    // Each gateway holds a lease, the worker (which runs the projections) LISTENs for appends: each a session of its own.
    expect(
      await until('every session to be open', async () => {
        const s = await sessions();
        return s.listen === 1 && s.lease === 2 ? s : null;
      }),
    ).toEqual({ listen: 1, lease: 2 });

    // The worker's job: a batch on an account of its own, submitted as the load starts.
    const batchAccount = (await one('POST', '/admin/accounts', { body: { initial_credits_usd: 5 }, headers: admin })).json.id as string;
    const batchKey = (await one('POST', `/admin/accounts/${batchAccount}/keys`, { body: {}, headers: admin })).json.key as string;
    const lines = Array.from({ length: BATCH_LINES }, (_, i) =>
      JSON.stringify({
        custom_id: `r${i}`,
        method: 'POST',
        url: '/v1/chat/completions',
        body: { model: 'sim/echo', messages: [{ role: 'user', content: `line ${i}` }], max_tokens: 20 },
      }),
    ).join('\n');
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob([`${lines}\n`]), 'input.jsonl');
    const uploaded = await fetch(`${urls[1]}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${batchKey}` }, body: form });
    expect(uploaded.status).toBe(200);
    const created = await two('POST', '/v1/batches', {
      key: batchKey,
      body: { input_file_id: ((await uploaded.json()) as { id: string }).id, endpoint: '/v1/chat/completions', completion_window: '24h' },
    });
    expect(created.status).toBe(200);

    const started = Date.now();
    const samples: Sample[] = [];
    const sampling = (async () => {
      while (Date.now() - started < LOAD_MS + 500) {
        samples.push(await sample());
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })();

    // Chat load: half of it on the hot account 0, every third request streamed, dealt over both gateways.
    const outcomes: Outcome[] = [];
    let n = 0;
    const client = async () => {
      while (Date.now() - started < LOAD_MS) {
        const i = n++;
        const account = i % 2 === 0 ? 0 : 1 + (i % (ACCOUNTS - 1));
        const stream = i % 3 === 0;
        const body = {
          model: 'sim/echo',
          max_tokens: 16,
          messages: [{ role: 'user', content: `pgbouncer ${i}` }],
          ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
        };
        const r = await gateways[i % 2]('POST', '/v1/chat/completions', { key: accounts[account].key, body });
        let cost = 0n;
        let status = r.status;
        if (r.status === 200 && stream) {
          const frames = (r.json as string)
            .split('\n\n')
            .filter((f) => f.startsWith('data: ') && f !== 'data: [DONE]')
            .map((f) => JSON.parse(f.slice(6)));
          const last = frames[frames.length - 1];
          if (frames.some((f) => f.error) || !last?.usage) status = -1;
          else cost = usdToNano(last.usage.cost);
        } else if (r.status === 200) cost = usdToNano(r.json.usage.cost);
        outcomes.push({ account, status, cost, id: r.headers.get('x-svc-generation-id'), retryAfter: r.headers.get('retry-after') });
      }
    };

    // Meanwhile, keys revoked on gateway one while gateway two has them cached (spec 5.5).
    const revocations = (async () => {
      const took: number[] = [];
      for (let round = 0; round < 4; round++) {
        const made = await one('POST', '/v1/keys', { key: management, body: { name: `revoked ${round}` } });
        expect(made.status).toBe(201);
        for (let w = 0; w < 3; w++) expect((await two('GET', '/v1/key', { key: made.json.key })).status).toBe(200);
        const at = Date.now();
        expect((await one('DELETE', `/v1/keys/${made.json.data.id}`, { key: management })).status).toBe(200);
        took.push(Date.now() - at);
        // No wait: the DELETE answered only once gateway two had emptied its cache.
        const after = await two('GET', '/v1/key', { key: made.json.key });
        expect(after.status).toBe(401);
        expect(after.json.error.type).toBe('authentication_error');
      }
      return took;
    })();

    await Promise.all(Array.from({ length: CONNECTIONS }, client));
    const revoked = await revocations;
    await sampling;

    const answered = outcomes.filter((o) => o.status === 200);
    const refused = outcomes.filter((o) => o.status !== 200);
    // A hot account may be asked to retry (503 with Retry-After); nothing else may fail.
    expect(refused.filter((o) => o.status !== 503 || o.retryAfter === null)).toEqual([]);
    expect(answered.length).toBeGreaterThan(outcomes.length * 0.9);
    // Acknowledged by NOTIFY on the other gateway's session, not by its lease running out.
    for (const ms of revoked) expect(ms).toBeLessThan(ACK_WAIT_MS);

    for (const [i, { key }] of accounts.entries()) {
      const mine = answered.filter((o) => o.account === i);
      const credits = await until(
        `account ${i}'s holds to close`,
        async () => {
          const r = await two('GET', '/v1/credits', { key });
          return r.status === 200 && r.json.data.open_holds === 0 ? r.json.data : null;
        },
        30_000,
        200,
      );
      const charged = mine.reduce((sum, o) => sum + o.cost, 0n);
      expect(usdToNano(credits.total_usage)).toBe(charged);
      expect(usdToNano('50') - usdToNano(credits.balance)).toBe(charged);
      expect(new Set(mine.map((o) => o.id)).size).toBe(mine.length);
    }
    for (const o of answered.filter((_, j) => j % 20 === 0)) {
      const g = await gateways[(o.account + 1) % 2]('GET', `/v1/generation?id=${o.id}`, { key: accounts[o.account].key });
      expect(g.status).toBe(200);
      expect(usdToNano(g.json.data.total_cost)).toBe(o.cost);
    }

    const batch = await until(
      'the batch to complete',
      async () => {
        const b = (await one('GET', `/v1/batches/${created.json.id}`, { key: batchKey })).json;
        return ['completed', 'failed'].includes(b.status) ? b : null;
      },
      30_000,
      250,
    );
    expect(batch).toMatchObject({ status: 'completed', request_counts: { total: BATCH_LINES, completed: BATCH_LINES, failed: 0 } });
    const output = await (await fetch(`${urls[0]}/v1/files/${batch.output_file_id}/content`, { headers: { authorization: `Bearer ${batchKey}` } })).text();
    const batchCost = output
      .trim()
      .split('\n')
      .reduce((sum, line) => sum + usdToNano(String(JSON.parse(line).response.body.usage.cost)), 0n);
    const batchCredits = await until('the batch holds to close', async () => {
      const r = await one('GET', '/v1/credits', { key: batchKey });
      return r.json.data.open_holds === 0 ? r.json.data : null;
    });
    expect(usdToNano('5') - usdToNano(batchCredits.balance)).toBe(batchCost);

    const audit = await promisify(execFile)(process.execPath, [CLI, 'ledger', 'audit', '--json'], { env });
    const report = JSON.parse(audit.stdout);
    expect(report.violations).toEqual([]);
    expect(report.projections.mismatches).toEqual([]);

    // PostgreSQL saw PgBouncer's pool and the three sessions, never the pools' client connections.
    const peak = (of: keyof Sample) => Math.max(...samples.map((s) => s[of]));
    const s = await sessions();
    console.log(
      `pgbouncer (logs in ${LOG_DIR}): ${outcomes.length} requests, ${answered.length} answered, ${refused.length} asked to retry; ` +
        `revocations answered in ${revoked.join(', ')} ms; peak ${peak('clients')} client connections on PgBouncer, ${peak('servers')} server connections ` +
        `(pool ${PGBOUNCER_POOL_SIZE}), ${peak('backends')} PostgreSQL backends on the database; sessions: ${s.listen} LISTEN, ${s.lease} leases`,
    );
    expect(peak('servers')).toBeLessThanOrEqual(PGBOUNCER_POOL_SIZE);
    expect(peak('clients')).toBeGreaterThan(PGBOUNCER_POOL_SIZE);
    expect(peak('backends')).toBeLessThanOrEqual(PGBOUNCER_POOL_SIZE + 3);
    expect(s).toEqual({ listen: 1, lease: 2 });
  }, 120_000);
});
