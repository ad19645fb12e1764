import { execFile, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import calculateSlot from 'cluster-key-slot';
import type { Cluster } from 'ioredis';
import { closeRedis, connectRedisCluster, DEFAULT_KEY_PREFIX, rateWindowKey, usdToNano, whenReady } from '@svc/platform';
import { processLogs } from '../support/process-logs';
import { api, freshPgSchemaUrl, type Call } from '../support/gateway';
import { spawnGateway } from '../support/second-gateway';
import { describeWithEngines, topologyWith } from '../support/topology';
import { until } from '../support/until';
import { spawnWorker } from '../support/worker';

const ADMIN_TOKEN = 'admin-token-for-redis-failover';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const CLI = join(__dirname, '..', '..', 'dist', 'src', 'cli.js');
/**
 * An instance of scripts/topology/redis-cluster.sh of this suite's own (ports, directory), so
 * killing its master never hits the cluster the edge stores' spec runs on meanwhile; its ports
 * are below Linux's ephemeral range, where no client socket can hold one (as one did 57014).
 */
const PORTS = [27011, 27012, 27013, 27014, 27015, 27016];
const TOPOLOGY = { SVC_TOPOLOGY_DIR: join(tmpdir(), 'svc-topology-redis-failover'), SVC_REDIS_CLUSTER_PORTS: PORTS.join(' ') };
const REDIS_CLUSTER_NODES = PORTS.map((port) => `127.0.0.1:${port}`).join(',');
const ACCOUNTS = 9;
const CONNECTIONS = 12;
/** The load runs this long; the master is killed after KILL_AFTER_MS of it. */
const LOAD_MS = 16_000;
const KILL_AFTER_MS = 4_000;

const cluster = (...args: string[]) => topologyWith(TOPOLOGY, 'redis-cluster', ...args);

const logs = processLogs('redis-failover');
const LOG_DIR = logs.dir;
const keepLog = logs.keep;

interface Attempt {
  account: number;
  idempotencyKey: string | null;
  /** 0: no answer at all (a dropped connection). */
  status: number;
  code: string | null;
  message: string;
  retryAfter: string | null;
  /** The generation billed, or replayed. */
  id: string | null;
  replayed: boolean;
  cost: bigint;
  content: string | null;
  at: number;
  doneAt: number;
}

/** The slot ranges each master serves: `masters` prints "port from-to from-to ...". */
async function masters(): Promise<{ port: number; ranges: [number, number][] }[]> {
  return (await cluster('masters'))
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [port, ...ranges] = line.trim().split(/\s+/);
      return { port: Number(port), ranges: ranges.map((r) => r.split('-').map(Number) as [number, number]).map(([a, b]) => [a, b ?? a]) };
    });
}

const owner = (all: Awaited<ReturnType<typeof masters>>, slot: number) => all.find((m) => m.ranges.some(([a, b]) => slot >= a && slot <= b))!.port;

/**
 * Redis Cluster under two gateways and a worker: three masters, each with a replica, hold the
 * rate limits, concurrency slots and idempotency keys. A master is lost as a machine is (kill
 * -9) under chat load on several accounts, with and without Idempotency-Key. Until its replica
 * is promoted (cluster-node-timeout 2 s, then the election) and the gateways' slot refresh finds
 * it, the keys of its slots cannot be read: limits are kept in each gateway's memory, and a
 * request whose Idempotency-Key lives there is refused with the documented 503. Nothing else
 * fails; no retry is charged twice; every answered request is charged once and the ledger
 * audit is clean.
 */
describeWithEngines(['redis-server', 'redis-cli'], 'Redis Cluster: a master killed under load', () => {
  const children: ChildProcess[] = [];
  let gateways: Call[] = [];
  let databaseUrl: string;
  let probe: Cluster | undefined;

  beforeAll(async () => {
    await cluster('down');
    databaseUrl = await freshPgSchemaUrl('redis_failover');
    await cluster('up');
    const env = { REDIS_CLUSTER_NODES, SVC_RATE_LIMITS_LIVE: 'rpm=1000000,tpm=1000000000,concurrent=1000' };
    const [one, two, worker] = await Promise.all([
      spawnGateway(databaseUrl, ADMIN_TOKEN, env),
      spawnGateway(databaseUrl, ADMIN_TOKEN, env),
      spawnWorker({ ...process.env, DATABASE_URL: databaseUrl, SVC_ADMIN_TOKEN: ADMIN_TOKEN, REDIS_URL: '', REDIS_CLUSTER_NODES: '' }),
    ]);
    for (const [child, name] of [
      [one.child, 'gateway-0'],
      [two.child, 'gateway-1'],
      [worker, 'worker'],
    ] as const) {
      children.push(child);
      keepLog(child, name);
    }
    gateways = [api(one.url), api(two.url)];
    probe = connectRedisCluster(PORTS.map((port) => ({ host: '127.0.0.1', port })));
    if (!(await whenReady(probe, 10_000))) throw new Error('the test cluster is not reachable');
  }, 180_000);

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
    if (probe) await closeRedis(probe);
    // SVC_KEEP_TOPOLOGY=1 leaves the cluster up to look into after a run.
    if (!process.env.SVC_KEEP_TOPOLOGY) await cluster('down');
  }, 120_000);

  it('answers or refuses with 503 while the replica takes over, charges no retry twice, and audits clean', async () => {
    const accounts: { id: string; key: string; keyId: string }[] = [];
    for (let i = 0; i < ACCOUNTS; i++) {
      const id = (await gateways[0]('POST', '/admin/accounts', { body: { initial_credits_usd: 50 }, headers: admin })).json.id as string;
      const created = await gateways[0]('POST', `/admin/accounts/${id}/keys`, { body: {}, headers: admin });
      accounts.push({ id, key: created.json.key as string, keyId: created.json.data.id as string });
    }
    // The master whose slots hold the most accounts' windows and slots: the busiest to lose.
    const before = await masters();
    expect(before).toHaveLength(3);
    const windowSlot = (keyId: string) => calculateSlot(rateWindowKey(DEFAULT_KEY_PREFIX, `rpm:${keyId}`));
    const load = new Map(before.map((m) => [m.port, accounts.filter((a) => owner(before, windowSlot(a.keyId)) === m.port).length]));
    const victim = [...load.entries()].sort((a, b) => b[1] - a[1])[0][0];
    const victimKey = `failover-probe:{${accounts.find((a) => owner(before, windowSlot(a.keyId)) === victim)!.keyId}}`;

    const started = Date.now();
    const attempts: Attempt[] = [];
    const send = async (account: number, idempotencyKey: string | null, n: number, via = n % gateways.length): Promise<Attempt> => {
      const body = { model: 'sim/echo', max_tokens: 16, messages: [{ role: 'user', content: `redis failover ${n}` }] };
      const at = Date.now() - started;
      const headers: Record<string, string> = idempotencyKey ? { 'idempotency-key': idempotencyKey } : {};
      let attempt: Attempt;
      try {
        const r = await gateways[via]('POST', '/v1/chat/completions', { key: accounts[account].key, body, headers });
        attempt = {
          account,
          idempotencyKey,
          status: r.status,
          code: r.json?.error?.code ?? null,
          message: r.json?.error?.message ?? '',
          retryAfter: r.headers.get('retry-after'),
          id: r.headers.get('x-svc-generation-id'),
          replayed: r.headers.get('idempotent-replayed') === 'true',
          cost: r.status === 200 ? usdToNano(r.json.usage.cost) : 0n,
          content: r.status === 200 ? (r.json.choices[0].message.content as string) : null,
          at,
          doneAt: Date.now() - started,
        };
      } catch (err) {
        attempt = {
          account,
          idempotencyKey,
          status: 0,
          code: String(err),
          message: '',
          retryAfter: null,
          id: null,
          replayed: false,
          cost: 0n,
          content: null,
          at,
          doneAt: Date.now() - started,
        };
      }
      attempts.push(attempt);
      return attempt;
    };
    /** Each request with Idempotency-Key is sent again as a client whose answer was lost would: same key, same body, the other gateway. */
    const pairs: [Attempt, Attempt][] = [];
    let n = 0;
    const client = async () => {
      while (Date.now() - started < LOAD_MS) {
        const i = n++;
        const account = i % ACCOUNTS;
        if (i % 2 === 0) {
          await send(account, null, i);
          continue;
        }
        const idempotencyKey = randomUUID();
        const first = await send(account, idempotencyKey, i);
        pairs.push([first, await send(account, idempotencyKey, i, (i + 1) % gateways.length)]);
        if (first.status !== 200) await new Promise((resolve) => setTimeout(resolve, 200));
      }
    };
    const killer = (async () => {
      await new Promise((resolve) => setTimeout(resolve, KILL_AFTER_MS));
      const at = Date.now() - started;
      await cluster('kill-master', String(victim));
      // How long a key of the lost master's slots cannot be written, as a gateway's client sees it;
      // meanwhile a gateway's readiness names Redis (every master serving slots is pinged).
      const readiness = new Set<string>();
      for (;;) {
        const health = await gateways[0]('GET', '/health/ready');
        readiness.add(`${health.json.status} (redis ${health.json.checks.redis.status})`);
        if (
          await probe!.set(victimKey, '1', 'PX', 60_000).then(
            () => true,
            () => false,
          )
        )
          return { at, servedAfterMs: Date.now() - started - at, readiness };
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    await Promise.all(Array.from({ length: CONNECTIONS }, client));
    const killed = await killer;

    writeFileSync(
      join(LOG_DIR, 'attempts.json'),
      JSON.stringify(attempts, (_, v) => (typeof v === 'bigint' ? v.toString() : v), 1),
    );
    const refused = attempts.filter((a) => a.status !== 200);
    // Never a 500 and never a dropped connection; a request without Idempotency-Key is always answered (limits from memory meanwhile).
    expect(refused.filter((a) => ![503, 409].includes(a.status))).toEqual([]);
    expect(refused.filter((a) => a.idempotencyKey === null)).toEqual([]);
    // A 503 is the documented one: the key's store cannot answer, retry in a second.
    for (const a of refused.filter((r) => r.status === 503)) expect([a.code, a.retryAfter]).toEqual(['idempotency_unavailable', '1']);
    expect(refused.filter((a) => a.status === 503).length).toBeGreaterThan(0);
    // A retry of a request that was answered: its answer again, or a refusal; never run and charged again.
    for (const [first, retry] of pairs.filter(([f]) => f.status === 200)) {
      if (retry.status === 200) expect([retry.replayed, retry.id, retry.content]).toEqual([true, first.id, first.content]);
      else if (retry.status === 409) {
        // Redis lost the key (a write the replica had not got) or still holds its claim: the account's log refuses the repeat.
        expect(['idempotency_completed', 'idempotency_conflict']).toContain(retry.code);
        if (retry.code === 'idempotency_completed') expect(retry.message).toContain(first.id);
      } else expect(retry.status).toBe(503);
    }
    // Only a retry meets a 409: a first request never does.
    expect(pairs.filter(([first]) => first.status === 409)).toEqual([]);

    const charged = attempts.filter((a) => a.status === 200 && !a.replayed);
    const degraded = refused.filter((a) => a.status === 503).map((a) => a.doneAt);
    const firstRefusal = Math.min(...degraded);
    const lastRefusal = Math.max(...degraded);
    const answered = (from: number, to: number) => charged.filter((a) => a.doneAt >= from && a.doneAt < to).length;
    console.log(
      `redis-failover (logs in ${LOG_DIR}): ${attempts.length} requests (${pairs.length} with Idempotency-Key, each sent twice), ` +
        `${charged.length} charged, ${attempts.filter((a) => a.replayed).length} replayed, ${degraded.length} refused 503, ` +
        `${refused.filter((a) => a.status === 409).length} refused 409; master ${victim} (${load.get(victim)} of ${ACCOUNTS} accounts' windows) killed at ${killed.at} ms; ` +
        `its slots served again after ${(killed.servedAfterMs / 1000).toFixed(1)} s; 503s from ${((firstRefusal - killed.at) / 1000).toFixed(1)} s to ${((lastRefusal - killed.at) / 1000).toFixed(1)} s after the kill; ` +
        `charged answers per second before / during / after: ${(answered(0, killed.at) / (killed.at / 1000)).toFixed(0)} / ` +
        `${(answered(killed.at, lastRefusal) / Math.max((lastRefusal - killed.at) / 1000, 0.001)).toFixed(0)} / ${(answered(lastRefusal, LOAD_MS) / ((LOAD_MS - lastRefusal) / 1000)).toFixed(0)}`,
    );
    // The replica took over within seconds, and the last seconds of the load were served with Idempotency-Key too.
    expect(killed.servedAfterMs).toBeLessThan(10_000);
    expect(killed.readiness).toContain('degraded (redis fail)');
    for (const gateway of gateways) {
      await until('readiness with the promoted replica', async () => (await gateway('GET', '/health/ready')).json.status === 'ready', 10_000, 200);
    }
    expect(pairs.filter(([first]) => first.status === 200 && first.doneAt > LOAD_MS - 3_000).length).toBeGreaterThan(0);
    expect(await cluster('masters')).not.toContain(String(victim));

    // Exactly one charge per answered request, none for a refused one or a replay, no hold left open.
    for (const [i, { key }] of accounts.entries()) {
      const mine = charged.filter((a) => a.account === i);
      const expected = mine.reduce((sum, a) => sum + a.cost, 0n);
      // The balance is a read model the worker keeps: it may be a few events behind the last answer.
      let credits: { open_holds: number; total_usage: string } | null = null;
      await until(
        `account ${i}'s holds to close and its charges to be read`,
        async () => {
          const r = await gateways[0]('GET', '/v1/credits', { key });
          if (r.status === 200) credits = r.json.data;
          return credits?.open_holds === 0 && usdToNano(credits.total_usage) === expected;
        },
        30_000,
        250,
      ).catch(() => undefined);
      expect(credits).toMatchObject({ open_holds: 0 });
      expect(usdToNano(credits!.total_usage)).toBe(expected);
      expect(new Set(mine.map((a) => a.id)).size).toBe(mine.length);
    }

    // The log replays to the same balances, the invariants hold, and the read models equal a rebuild.
    const audit = await promisify(execFile)(process.execPath, [CLI, 'ledger', 'audit', '--json'], { env: { ...process.env, DATABASE_URL: databaseUrl } });
    const report = JSON.parse(audit.stdout);
    expect(report.violations).toEqual([]);
    expect(report.projections.mismatches).toEqual([]);
  }, 180_000);
});
