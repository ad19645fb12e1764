import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createConnection, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import calculateSlot from 'cluster-key-slot';
import fc from 'fast-check';
import type { Cluster } from 'ioredis';
import { describeWithEngines, topologyWith } from '../../../../test/support/topology';
import { ManualClock } from '../clock';
import { RedisAdmission } from './admission';
import { idempotencyEntryKey, RedisIdempotencyStore } from './idempotency';
import { createEdgeStores } from './index';
import { RedisConcurrencyLimiter, RedisRateLimiter, rateWindowKey, redisSlotLeases, slotsKey } from './rate-limiter';
import { closeRedis, connectRedisCluster, pingRedis, type RedisNode, whenReady } from './redis';
import { RedisResponseCache } from './response-cache';
import { edgeStoreContract, response } from './testing/contract';
import { twoClientsContract } from './testing/two-clients';

/**
 * An instance of scripts/topology/redis-cluster.sh of this suite's own, three masters and their
 * replicas, on ports below Linux's ephemeral range (32768-60999): under a whole test run's
 * connections, one of the default ports (57001-57006) can be a client socket's for a while,
 * and its node then cannot bind it. Its own directory, so a cluster an operator started is
 * left alone.
 */
const PORTS = [27001, 27002, 27003, 27004, 27005, 27006];
const TOPOLOGY = { SVC_TOPOLOGY_DIR: join(tmpdir(), 'svc-topology-edge-cluster-spec'), SVC_REDIS_CLUSTER_PORTS: PORTS.join(' ') };
const NODES: RedisNode[] = PORTS.map((port) => ({ host: '127.0.0.1', port }));
/**
 * MONITOR on a plain socket, calling `onCall` with each command's arguments (the command first).
 * ioredis' own monitor() can fail with "Command queue state error" when a monitored command (the
 * cluster client's CLUSTER SLOTS) arrives while its connection switches to monitoring.
 */
async function monitorNode(host: string, port: number, onCall: (args: string[]) => void): Promise<Socket> {
  const socket = createConnection({ host, port });
  socket.setEncoding('utf8');
  let monitoring!: () => void;
  const ok = new Promise<void>((resolve) => (monitoring = resolve));
  let buffered = '';
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    for (let end = buffered.indexOf('\r\n'); end >= 0; end = buffered.indexOf('\r\n')) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      if (line === '+OK') monitoring();
      // +1795971523.678587 [0 127.0.0.1:55670] "evalsha" "<sha>" "3" "<key>" ...: each argument quoted, quotes escaped.
      else onCall([...line.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]));
    }
  });
  await once(socket, 'connect');
  socket.write('MONITOR\r\n');
  await ok;
  return socket;
}

const RUN_PREFIX = `edge-cluster-test:${randomUUID()}`;
let prefixes = 0;
const nextPrefix = (): string => `${RUN_PREFIX}:${++prefixes}`;

describe('the keys of one subject on a Redis Cluster', () => {
  it('put the requests and tokens windows and the slots of one subject in one hash slot, whatever the subject', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1 }),
        fc.string({ minLength: 1 }).filter((p) => !/[{}]/.test(p)),
        (subject, prefix) => {
          const slots = new Set([
            calculateSlot(rateWindowKey(prefix, `rpm:${subject}`)),
            calculateSlot(rateWindowKey(prefix, `tpm:${subject}`)),
            calculateSlot(slotsKey(prefix, `concurrent:${subject}`)),
          ]);
          expect(slots.size).toBe(1);
        },
      ),
    );
  });

  it('name the subject as the hash tag, readably', () => {
    expect(rateWindowKey('edge', 'rpm:key_abc')).toBe('edge:rl:{key_abc}:rpm');
    expect(slotsKey('edge', 'concurrent:key_abc')).toBe('edge:slots:{key_abc}:concurrent');
    expect(rateWindowKey('edge', 'authfail:::1')).toBe('edge:rl:{::1}:authfail');
    expect(rateWindowKey('edge', 'global')).toBe('edge:rl:{global}');
  });

  it('refuses a key prefix with a brace, which would become the hash tag', () => {
    expect(() => createEdgeStores({ redisUrl: null, clock: new ManualClock(), keyPrefix: 'edge{1}' })).toThrow(/keyPrefix must not contain/);
  });
});

describeWithEngines(['redis-server', 'redis-cli'], 'edge stores on a Redis Cluster of three masters (scripts/topology/redis-cluster.sh)', () => {
  let cluster: Cluster;

  /** Every key of this run on each master, by the master's port. */
  async function runKeysByMaster(): Promise<Map<number, string[]>> {
    const byMaster = new Map<number, string[]>();
    for (const node of cluster.nodes('master')) {
      const keys: string[] = [];
      let cursor = '0';
      do {
        const [next, batch] = await node.scan(cursor, 'MATCH', `${RUN_PREFIX}:*`, 'COUNT', 1000);
        keys.push(...batch);
        cursor = next;
      } while (cursor !== '0');
      byMaster.set(node.options.port!, keys);
    }
    return byMaster;
  }

  beforeAll(async () => {
    await topologyWith(TOPOLOGY, 'redis-cluster', 'up');
    cluster = connectRedisCluster(NODES);
    if (!(await whenReady(cluster, 10_000))) throw new Error(`the Redis Cluster on ${PORTS.join(', ')} is not reachable`);
  }, 180_000);

  afterAll(async () => {
    if (cluster) {
      for (const [port, keys] of await runKeysByMaster().catch(() => new Map<number, string[]>())) {
        const node = cluster.nodes('master').find((n) => n.options.port === port);
        for (const key of keys) await node?.del(key);
      }
      await closeRedis(cluster);
    }
    // SVC_KEEP_TOPOLOGY=1 leaves the cluster up to look into after a run.
    if (!process.env.SVC_KEEP_TOPOLOGY) await topologyWith(TOPOLOGY, 'redis-cluster', 'down');
  }, 60_000);

  edgeStoreContract('redis cluster', (clock) => {
    const prefix = nextPrefix();
    const slotLeases = redisSlotLeases(cluster, clock);
    return {
      rateLimiter: new RedisRateLimiter(cluster, prefix),
      concurrency: new RedisConcurrencyLimiter(cluster, clock, prefix, slotLeases),
      admission: new RedisAdmission(cluster, clock, prefix, slotLeases),
      slotLeases,
      idempotency: new RedisIdempotencyStore(cluster, clock, prefix),
      cache: new RedisResponseCache(cluster, clock, prefix),
    };
  });

  describe('shared by two gateways, each with its own cluster client', () => {
    let other: Cluster;

    beforeAll(async () => {
      other = connectRedisCluster(NODES.slice(3));
      expect(await whenReady(other, 10_000)).toBe(true);
    });

    afterAll(async () => {
      await closeRedis(other);
    });

    twoClientsContract(() => [cluster, other], nextPrefix);
  });

  it('runs every script with the keys of one hash slot, and renews the slots of many subjects per slot', async () => {
    const prefix = nextPrefix();
    const clock = new ManualClock();
    const calls: string[][] = [];
    const monitors = await Promise.all(
      cluster.nodes('master').map((node) =>
        monitorNode(node.options.host ?? '127.0.0.1', node.options.port ?? 0, (args) => {
          if (!/^eval(sha)?$/i.test(args[0])) return;
          const keys = args.slice(3, 3 + Number(args[2]));
          if (keys.some((key) => key.startsWith(`${prefix}:`))) calls.push(keys);
        }),
      ),
    );
    const settle = () => new Promise((resolve) => setTimeout(resolve, 300));
    try {
      const leases = redisSlotLeases(cluster, clock);
      const admission = new RedisAdmission(cluster, clock, prefix, leases);
      const concurrency = new RedisConcurrencyLimiter(cluster, clock, prefix, leases);
      const subjects = Array.from({ length: 12 }, (_, i) => `key_${i}`);
      const held = [];
      for (const subject of subjects) {
        const admitted = await admission.admit({
          requests: { bucket: `rpm:${subject}`, limit: 10 },
          tokens: { bucket: `tpm:${subject}`, limit: 100, enforce: true },
          slots: { bucket: `concurrent:${subject}`, limit: 5, maxHoldMs: 60_000 },
        });
        expect(admitted.refused).toBeNull();
        held.push(admitted.slot.slot!, (await concurrency.acquire(`concurrent:${subject}`, 5, 60_000)).slot!);
      }
      clock.advance(1_000);
      await settle();
      const beforeRenewal = calls.length;
      await leases.renew();
      await settle();
      // A script's first call on a master is sent twice (EVALSHA, NOSCRIPT, then EVAL): counted once.
      const renewals = new Set(calls.slice(beforeRenewal).map((keys) => keys.join(' '))).size;
      expect(leases.size).toBe(subjects.length * 2);
      await Promise.all(held.map((slot) => slot.release()));
      const idempotency = new RedisIdempotencyStore(cluster, clock, prefix);
      await idempotency.begin('key_0', 'k', 'fp', 30_000);
      await idempotency.complete('key_0', 'k', 'fp', response());
      await idempotency.abandon('key_0', 'k');
      // The monitors see the last calls a moment after they are answered.
      await settle();

      expect(calls.length).toBeGreaterThanOrEqual(subjects.length * 3);
      for (const keys of calls) expect(new Set(keys.map((key) => calculateSlot(key))).size).toBe(1);
      // Admission's three keys in one call; one renewal of every slot of the process, one call per hash slot.
      expect(calls.filter((keys) => keys.length === 3).length).toBe(subjects.length);
      const slotsOfSubjects = new Set(subjects.map((s) => calculateSlot(slotsKey(prefix, `concurrent:${s}`))));
      expect(slotsOfSubjects.size).toBeGreaterThan(1);
      expect(renewals).toBe(slotsOfSubjects.size);
      expect(calls).toContainEqual([idempotencyEntryKey(prefix, 'key_0', 'k')]);
    } finally {
      for (const monitor of monitors) monitor.destroy();
    }
  });

  it("spreads the run's keys over every master", async () => {
    const byMaster = await runKeysByMaster();
    expect(byMaster.size).toBe(3);
    for (const keys of byMaster.values()) expect(keys.length).toBeGreaterThan(0);
  });

  it('builds stores on the cluster from its nodes, which another client sees, and pings every master', async () => {
    const prefix = nextPrefix();
    const clock = new ManualClock();
    const stores = createEdgeStores({ redisUrl: null, redisClusterNodes: NODES.slice(0, 1), clock, keyPrefix: prefix });
    try {
      expect(stores.backend).toBe('redis');
      expect(await stores.ready(10_000)).toBe(true);
      await stores.ping(1_000);
      expect((await stores.rateLimiter.consume('rpm:key_x', 2)).allowed).toBe(true);
      expect(await new RedisRateLimiter(cluster, prefix).peek('rpm:key_x', 2)).toMatchObject({ remaining: 1 });
      await stores.cache.put('c', response(), 60);
      expect(await new RedisResponseCache(cluster, clock, prefix).get('c')).not.toBeNull();
      await expect(pingRedis(cluster, 1_000)).resolves.toBeUndefined();
    } finally {
      await stores.close();
    }
  });

  it('refuses to be given one Redis and a cluster at once', () => {
    expect(() => createEdgeStores({ redisUrl: 'redis://127.0.0.1:6379', redisClusterNodes: NODES, clock: new ManualClock() })).toThrow(RangeError);
  });
});
