import { execFile, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { usdToNano } from '@svc/platform';
import { api, type Call } from '../support/gateway';
import { spawnGateway } from '../support/second-gateway';
import { describeWithEngines } from '../support/topology';
import { until } from '../support/until';
import { spawnWorker } from '../support/worker';

const ADMIN_TOKEN = 'admin-token-for-pg-replica-reads';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
/** A pg-ha instance of this suite's own (directory and ports), beside any other suite's. */
const HA_ENV = {
  SVC_TOPOLOGY_DIR: '/tmp/svc-topology-replica',
  SVC_HA_PG_PORTS: '25532 25533',
  SVC_HA_API_PORTS: '28108 28109',
  SVC_HA_ETCD_PORT: '22479',
  SVC_HA_PRIMARY_PORT: '25100',
  SVC_HA_REPLICA_PORT: '25101',
};
const NODE_PORTS: Record<string, number> = { pg1: 25532, pg2: 25533 };
const API_PORTS = [28108, 28109];
const DATABASE_URL = 'postgres://postgres@127.0.0.1:25100/postgres';
const DATABASE_READ_URL = 'postgres://postgres@127.0.0.1:25101/postgres';
const ROUNDS = 50;

async function pgHa(...args: string[]): Promise<string> {
  const script = join(__dirname, '..', '..', 'scripts', 'topology', 'pg-ha.sh');
  const { stdout } = await promisify(execFile)(script, args, { env: { ...process.env, ...HA_ENV }, timeout: 180_000 });
  return stdout.trim();
}

/** One statement on one node of the cluster, not through HAProxy. */
async function onNode<T>(port: number, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres` });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows as T[];
  } finally {
    await client.end();
  }
}

/**
 * Patroni's maintenance mode on or off, on every node. Patroni resumes a paused replay on its
 * next loop (PostgreSQL 14+ pauses replay on some parameter changes) unless it is in maintenance.
 */
async function patroniMaintenance(on: boolean): Promise<void> {
  await fetch(`http://127.0.0.1:${API_PORTS[0]}/config`, { method: 'PATCH', body: JSON.stringify({ pause: on ? true : null }) });
  await until(`Patroni's maintenance mode ${on ? 'on' : 'off'}`, async () => {
    const nodes = await Promise.all(API_PORTS.map(async (port) => (await (await fetch(`http://127.0.0.1:${port}/patroni`)).json()) as { pause?: boolean }));
    return nodes.every((n) => (n.pause === true) === on);
  });
}

/**
 * DATABASE_READ_URL: the pure read-model reads of a gateway (GET /v1/generation, GET
 * /v1/credits...) go to the synchronous standby, which flushes a commit before the primary
 * acknowledges it but may replay it later. A client that charged on one gateway and reads on
 * another still sees its charge every time: the read goes to the standby once it has replayed
 * the account's last write, else (after a brief wait) to the primary.
 */
describeWithEngines(['patroni', 'etcd', 'haproxy'], 'reads from a PostgreSQL standby, own writes kept', () => {
  const children: ChildProcess[] = [];
  let one: Call;
  let two: Call;
  let standbyPort: number;
  let primaryPort: number;

  beforeAll(async () => {
    await pgHa('down');
    await pgHa('up');
    const leader = await pgHa('primary');
    primaryPort = NODE_PORTS[leader];
    standbyPort = NODE_PORTS[leader === 'pg1' ? 'pg2' : 'pg1'];
    const env = { DATABASE_READ_URL, SVC_RATE_LIMITS_LIVE: 'rpm=1000000,tpm=1000000000,concurrent=1000' };
    // The worker first: it creates the schema the gateways then find.
    const worker = await spawnWorker({ ...process.env, DATABASE_URL, SVC_ADMIN_TOKEN: ADMIN_TOKEN, REDIS_URL: '' });
    children.push(worker);
    const [a, b] = await Promise.all([spawnGateway(DATABASE_URL, ADMIN_TOKEN, env), spawnGateway(DATABASE_URL, ADMIN_TOKEN, env)]);
    children.push(a.child, b.child);
    one = api(a.url);
    two = api(b.url);
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
    if (!process.env.SVC_KEEP_TOPOLOGY) await pgHa('down');
  }, 120_000);

  /** Gateway B's count of reads by where they were answered. */
  async function answeredOnTwo(): Promise<{ replica: number; primary: number }> {
    const text = (await two('GET', '/metrics', { headers: admin })).json as string;
    const count = (source: string) => Number(new RegExp(`^svc_read_model_reads_total\\{source="${source}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
    return { replica: count('replica'), primary: count('primary') };
  }

  /** Index and sequential scans of the tables GET /v1/credits and GET /v1/generation read, as the standby node counts them. */
  async function standbyScans(): Promise<number> {
    const [row] = await onNode<{ n: string }>(
      standbyPort,
      "SELECT coalesce(sum(coalesce(idx_scan, 0) + coalesce(seq_scan, 0)), 0)::text AS n FROM pg_stat_user_tables WHERE relname IN ('credit_accounts', 'generations')",
    );
    return Number(row.n);
  }

  /** A chat charged on gateway A, then its generation and the balance read at once on gateway B. */
  async function chargeThenRead(key: string, usedBefore: bigint): Promise<{ id: string; cost: bigint; generation: any; credits: any }> {
    const chat = await one('POST', '/v1/chat/completions', {
      key,
      body: { model: 'sim/echo', max_tokens: 8, messages: [{ role: 'user', content: 'replica' }] },
    });
    expect(chat.status).toBe(200);
    const id = chat.headers.get('x-svc-generation-id')!;
    const cost = usdToNano(chat.json.usage.cost);
    const [generation, credits] = await Promise.all([two('GET', `/v1/generation?id=${id}`, { key }), two('GET', '/v1/credits', { key })]);
    expect(generation.status).toBe(200);
    expect(generation.json.data.id).toBe(id);
    expect(usdToNano(generation.json.data.total_cost)).toBe(cost);
    expect(credits.status).toBe(200);
    expect(usdToNano(credits.json.data.total_usage)).toBe(usedBefore + cost);
    return { id, cost, generation: generation.json.data, credits: credits.json.data };
  }

  it('answers own writes from the standby once it has replayed them, from the primary while it has not, and back', async () => {
    const account = (await one('POST', '/admin/accounts', { body: { initial_credits_usd: 50 }, headers: admin })).json.id as string;
    const key = (await one('POST', `/admin/accounts/${account}/keys`, { body: {}, headers: admin })).json.key as string;
    let used = 0n;

    // 1. Replay running: every read on B sees the charge made on A, most of them from the standby.
    const before = await answeredOnTwo();
    const scansBefore = await standbyScans();
    const lags: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      used += (await chargeThenRead(key, used)).cost;
      const [lag] = await onNode<{ ms: string | null }>(primaryPort, 'SELECT extract(epoch FROM replay_lag) * 1000 AS ms FROM pg_stat_replication');
      if (lag?.ms != null) lags.push(Number(lag.ms));
    }
    const running = await answeredOnTwo();
    const replicaReads = running.replica - before.replica;
    const primaryReads = running.primary - before.primary;
    expect(replicaReads + primaryReads).toBe(2 * ROUNDS);
    // About 70% here; how many wait past the budget depends on the machine's load, so the bar is a quarter.
    expect(replicaReads).toBeGreaterThanOrEqual(ROUNDS / 2);
    // Independently of the metric: the standby node itself scanned the read-model tables at least once per read it answered
    // (its statistics reach the view within PostgreSQL's flush interval, up to 10 s for an idle session).
    await until('the standby to count its scans', async () => (await standbyScans()) - scansBefore >= replicaReads, 15_000, 250);
    // And a lone read of the balance, with nothing new to wait for, is the last query of one of the gateway's sessions on the standby.
    const lone = await answeredOnTwo();
    expect((await two('GET', '/v1/credits', { key })).status).toBe(200);
    expect((await answeredOnTwo()).replica - lone.replica).toBe(1);
    const sessions = await onNode<{ query: string }>(standbyPort, "SELECT query FROM pg_stat_activity WHERE application_name = 'svc-replica-reads'");
    expect(sessions.some((s) => /\bFROM credit_accounts\b/.test(s.query))).toBe(true);
    const [recovery] = await onNode<{ standby: boolean }>(standbyPort, 'SELECT pg_is_in_recovery() AS standby');
    expect(recovery.standby).toBe(true);

    // 2. Replay paused: the standby has the commits (flushed) but not in its tables; own writes are still read right, from the primary.
    await patroniMaintenance(true);
    await onNode(standbyPort, 'SELECT pg_wal_replay_pause()');
    try {
      const paused = await answeredOnTwo();
      for (let i = 0; i < 3; i++) {
        const { id, cost } = await chargeThenRead(key, used);
        used += cost;
        // The standby itself does not hold the generation B answered with, the primary does: the primary answered it.
        expect(await onNode(primaryPort, 'SELECT id FROM generations WHERE id = $1', [id])).toEqual([{ id }]);
        expect(await onNode(standbyPort, 'SELECT id FROM generations WHERE id = $1', [id])).toEqual([]);
      }
      expect(await onNode(standbyPort, 'SELECT pg_get_wal_replay_pause_state() AS state')).toEqual([{ state: 'paused' }]);
      const whilePaused = await answeredOnTwo();
      expect(whilePaused.primary - paused.primary).toBe(6);
      expect(whilePaused.replica - paused.replica).toBe(0);
    } finally {
      await onNode(standbyPort, 'SELECT pg_wal_replay_resume()');
      await patroniMaintenance(false);
    }

    // 3. Replay resumed: reads go back to the standby.
    const resumed = await answeredOnTwo();
    for (let i = 0; i < 10; i++) used += (await chargeThenRead(key, used)).cost;
    const after = await answeredOnTwo();
    expect(after.replica - resumed.replica).toBeGreaterThanOrEqual(5);

    // 4. Where the time goes: after a charge, when the credits projection has it on the primary node, and when on the standby node.
    const applied: number[] = [];
    const replayed: number[] = [];
    // One session on each node for the whole phase: a connection per poll would load the nodes more than the reads do.
    const pollers = await Promise.all(
      [primaryPort, standbyPort].map(async (port) => {
        const client = new Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres` });
        await client.connect();
        return client;
      }),
    );
    try {
      for (let i = 0; i < 10; i++) {
        const chat = await one('POST', '/v1/chat/completions', {
          key,
          body: { model: 'sim/echo', max_tokens: 8, messages: [{ role: 'user', content: 'timing' }] },
        });
        used += usdToNano(chat.json.usage.cost);
        const charged = performance.now();
        const [onPrimary, onStandby] = await Promise.all(
          pollers.map((client) =>
            until(
              'the node to hold the charge',
              async () => {
                const { rows } = await client.query<{ used: string }>('SELECT used_nano::text AS used FROM credit_accounts WHERE account_id = $1', [account]);
                return BigInt(rows[0].used) === used && performance.now() - charged;
              },
              10_000,
              2,
            ),
          ),
        );
        applied.push(onPrimary);
        replayed.push(Math.max(0, onStandby - onPrimary));
      }
    } finally {
      await Promise.all(pollers.map((client) => client.end()));
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    console.log(
      `pg-replica-reads: after a charge, the projection had it on the primary in median ${median(applied).toFixed(0)} ms (max ${Math.max(...applied).toFixed(0)}), ` +
        `the standby ${median(replayed).toFixed(0)} ms later (max ${Math.max(...replayed).toFixed(0)})`,
    );

    const sorted = [...lags].sort((a, b) => a - b);
    console.log(
      `pg-replica-reads: ${ROUNDS} rounds, reads on B answered by the standby ${replicaReads}/${2 * ROUNDS} (${Math.round((100 * replicaReads) / (2 * ROUNDS))}%), ` +
        `by the primary ${primaryReads}; replay_lag median ${sorted[Math.floor(sorted.length / 2)]?.toFixed(1) ?? 'n/a'} ms, max ${sorted[sorted.length - 1]?.toFixed(1) ?? 'n/a'} ms ` +
        `(${lags.length} samples); after resume ${after.replica - resumed.replica}/20 from the standby`,
    );
  }, 120_000);
});
