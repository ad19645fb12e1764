import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, type Server, type Socket, connect } from 'node:net';
import type { Redis } from 'ioredis';
import { systemClock } from '../clock';
import { freePort, startRedisServer, stopRedisServer } from './testing/redis-server';
import { type AdmissionRequest, RedisAdmission } from './admission';
import { createEdgeStores, type EdgeStores } from './index';
import { RedisConcurrencyLimiter, redisSlotLeases, slotsKey } from './rate-limiter';
import { closeRedis, connectRedis, EdgeStoreUnavailable, whenReady } from './redis';
import type { SlotLeaseTimings } from './slot-leases';

/*
 * Spec 8 concurrency slots when Redis freezes or is cut off, on a redis-server of the suite's own
 * (SIGSTOP/SIGCONT, a proxy it cuts): the shared server of the other suites is never touched.
 * Real time throughout, since the freeze is; the leases are shortened to keep the suite quick.
 */

/**
 * Renewals further apart than the client's 1 s command timeout (redis.ts), as in production (10 s):
 * with them 1 s apart, a renewal that times out in a freeze makes the next tick find it still
 * pending and skip, which left a lease only 1 s of slack, lost on a loaded machine.
 */
const LEASE: SlotLeaseTimings = { leaseMs: 4_000, renewMs: 1_500 };
/** What the gateway asks for an upstream call: its 120 s timeout plus 60 s grace (rate-limits.ts). */
const GATEWAY_HOLD_MS = 180_000;
/** Longer than the lease, so a slot cannot outlive the freeze by having been taken just before it. */
const FREEZE_MS = 5_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How long until `check` first resolves true; throws once `withinMs` has passed. */
async function msUntil(check: () => Promise<boolean>, withinMs: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await check().catch(() => false)) return Date.now() - started;
    if (Date.now() - started > withinMs) throw new Error(`still not so after ${withinMs} ms`);
    await sleep(100);
  }
}

async function evalCalls(admin: Redis): Promise<number> {
  const stats = await admin.info('commandstats');
  let calls = 0;
  for (const [, count] of stats.matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+)/gm)) calls += Number(count);
  return calls;
}

/** A TCP proxy to Redis whose connections can be cut while Redis itself keeps its data. */
async function startProxy(target: number): Promise<{ port: number; cut(): Promise<void>; restore(): Promise<void> }> {
  const port = await freePort();
  const sockets = new Set<Socket>();
  let server: Server;
  const listen = () =>
    new Promise<void>((resolve) => {
      server = createServer((client) => {
        const upstream = connect(target, '127.0.0.1');
        for (const socket of [client, upstream]) {
          sockets.add(socket);
          socket.on('error', () => undefined);
          socket.on('close', () => {
            sockets.delete(socket);
            client.destroy();
            upstream.destroy();
          });
        }
        client.pipe(upstream);
        upstream.pipe(client);
      });
      server.listen(port, '127.0.0.1', resolve);
    });
  await listen();
  return {
    port,
    async cut() {
      await new Promise((resolve) => {
        server.close(resolve);
        for (const socket of sockets) socket.destroy();
      });
    },
    restore: listen,
  };
}

describe('concurrency slots through a Redis freeze and a cut connection (spec 8, issue 41 E)', () => {
  const prefix = `edge-slots:${randomUUID()}`;
  let port: number;
  let server: ChildProcess | null = null;
  /** Another gateway's view: answers only from Redis, never from a fallback. */
  let probe: Redis;
  let stores: EdgeStores;

  const request = (key: string, limit: number): AdmissionRequest => ({
    requests: { bucket: `rpm:${key}`, limit: 1_000_000 },
    tokens: { bucket: `tpm:${key}`, limit: 1_000_000, enforce: false },
    slots: { bucket: `conc:${key}`, limit, maxHoldMs: GATEWAY_HOLD_MS },
  });

  /** The slots of `bucket` Redis holds now. */
  const redisSlotsHeld = (bucket: string) => probe.zcard(slotsKey(prefix, bucket));

  beforeAll(async () => {
    port = await freePort();
    server = await startRedisServer(port);
    const url = `redis://127.0.0.1:${port}`;
    probe = connectRedis(url);
    stores = createEdgeStores({ redisUrl: url, clock: systemClock, keyPrefix: prefix, slotLease: LEASE });
    expect(await whenReady(probe, 5_000)).toBe(true);
    expect(await stores.ready()).toBe(true);
  });

  afterAll(async () => {
    server?.kill('SIGCONT');
    await stores?.close();
    if (probe) await closeRedis(probe);
    await stopRedisServer(server);
  });

  it('renews every slot a process holds in one Redis call per tick, keeping them held past their lease', async () => {
    const leases = redisSlotLeases(probe, systemClock, LEASE);
    const concurrency = new RedisConcurrencyLimiter(probe, systemClock, prefix, leases);
    try {
      const buckets = ['renew:a', 'renew:b', 'renew:c', 'renew:d'];
      const slots = [];
      for (const bucket of buckets) {
        for (let i = 0; i < 10; i++) slots.push((await concurrency.acquire(bucket, 10, GATEWAY_HOLD_MS)).slot!);
      }
      expect(slots.every((slot) => slot !== null)).toBe(true);
      const before = await evalCalls(probe);
      await sleep(LEASE.leaseMs + LEASE.renewMs / 2);
      // Three ticks for 40 slots, give or take one for timer jitter on a busy machine.
      const renewals = (await evalCalls(probe)) - before;
      expect(renewals).toBeGreaterThanOrEqual(2);
      expect(renewals).toBeLessThanOrEqual(4);
      for (const bucket of buckets) expect((await concurrency.acquire(bucket, 10, GATEWAY_HOLD_MS)).allowed).toBe(false);
      await Promise.all(slots.map((slot) => slot.release()));
      expect(leases.size).toBe(0);
      for (const bucket of buckets) expect((await concurrency.acquire(bucket, 10, GATEWAY_HOLD_MS)).allowed).toBe(true);
    } finally {
      await leases.close();
    }
  });

  it('lets a key with a small concurrency limit run requests again within one lease after Redis resumes from a freeze', async () => {
    const other = new RedisAdmission(probe, systemClock, prefix, redisSlotLeases(probe, systemClock, LEASE));
    const admitted = async (key: string, limit: number) => {
      const result = await other.admit(request(key, limit));
      await result.slot.slot?.release();
      return result.refused === null;
    };
    // Two requests hold the key's two slots; a long stream holds another key's only one.
    const first = await stores.admission.admit(request('frozen', 2));
    const second = await stores.admission.admit(request('frozen', 2));
    const stream = await stores.admission.admit(request('stream', 1));
    expect([first.refused, second.refused, stream.refused]).toEqual([null, null, null]);

    server!.kill('SIGSTOP');
    const frozenAt = Date.now();
    // The two requests end during the freeze (their releases time out), and more keep arriving:
    // each admission times out and runs from memory, while its script waits in Redis's socket.
    await Promise.all([first.slot.slot!.release(), second.slot.slot!.release()]);
    let arrived = 0;
    const arrivals = Array.from({ length: 3 }, async () => {
      while (Date.now() - frozenAt < FREEZE_MS) {
        const late = await stores.admission.admit(request('frozen', 2));
        arrived++;
        await sleep(50);
        await late.slot.slot?.release();
      }
    });
    await Promise.all(arrivals);
    expect(arrived).toBeGreaterThanOrEqual(6);
    server!.kill('SIGCONT');

    // Both slots of the key free again, as another gateway sees them in Redis.
    const usableAfter = await msUntil(async () => {
      const both = await Promise.all([other.admit(request('frozen', 2)), other.admit(request('frozen', 2))]);
      await Promise.all(both.map((result) => result.slot.slot?.release()));
      return both.every((result) => result.refused === null);
    }, LEASE.leaseMs + 2_000);
    expect(usableAfter).toBeLessThanOrEqual(LEASE.leaseMs + 500);
    await sleep(LEASE.leaseMs);
    // The stream lived through the freeze and still holds its slot, renewed past many leases.
    expect(await admitted('stream', 1)).toBe(false);
    await stream.slot.slot!.release();
    expect(await admitted('stream', 1)).toBe(true);
  }, 30_000);

  it('sends the releases of one turn of the event loop in one Redis call, and each later one in its own', async () => {
    // Renewals 5 s apart: none falls inside the counts below.
    const leases = redisSlotLeases(probe, systemClock, { leaseMs: 20_000, renewMs: 5_000 });
    const concurrency = new RedisConcurrencyLimiter(probe, systemClock, prefix, leases);
    try {
      const slots = [];
      for (const bucket of ['turn:a', 'turn:a', 'turn:b', 'turn:c', 'turn:c']) slots.push((await concurrency.acquire(bucket, 2, GATEWAY_HOLD_MS)).slot!);
      const last = slots.pop()!;
      const before = await evalCalls(probe);
      await Promise.all(slots.map((slot) => slot.release()));
      expect((await evalCalls(probe)) - before).toBe(1);
      for (const bucket of ['turn:a', 'turn:b']) expect(await redisSlotsHeld(bucket)).toBe(0);
      expect(await redisSlotsHeld('turn:c')).toBe(1);

      const alone = await evalCalls(probe);
      await last.release();
      // Released twice: the second finds nothing to send.
      await last.release();
      expect((await evalCalls(probe)) - alone).toBe(1);
      expect(await redisSlotsHeld('turn:c')).toBe(0);
      expect(leases.size).toBe(0);
    } finally {
      await leases.close();
    }
  });

  it('sends the releases of its last turn before it closes', async () => {
    const leases = redisSlotLeases(probe, systemClock, { leaseMs: 20_000, renewMs: 5_000 });
    const slot = (await new RedisConcurrencyLimiter(probe, systemClock, prefix, leases).acquire('closing', 1, GATEWAY_HOLD_MS)).slot!;
    const released = slot.release();
    await leases.close();
    // Asked right after the close, on the connection the release goes on.
    expect(await redisSlotsHeld('closing')).toBe(0);
    await released;
  });

  it('retries a release that failed while the connection was cut until it lands, long before the lease ends', async () => {
    const proxy = await startProxy(port);
    const cutOff = connectRedis(`redis://127.0.0.1:${proxy.port}`);
    const leases = redisSlotLeases(cutOff, systemClock, { leaseMs: 20_000, renewMs: 5_000 });
    try {
      expect(await whenReady(cutOff, 5_000)).toBe(true);
      const taken = await new RedisConcurrencyLimiter(cutOff, systemClock, prefix, leases).acquire('cut', 1, GATEWAY_HOLD_MS);
      expect(taken.allowed).toBe(true);
      await proxy.cut();
      await msUntil(async () => cutOff.status !== 'ready', 2_000);
      await expect(taken.slot!.release()).rejects.toBeInstanceOf(EdgeStoreUnavailable);
      expect(leases.pendingReleases).toBe(1);
      await sleep(1_500);
      const seen = new RedisConcurrencyLimiter(probe, systemClock, prefix, redisSlotLeases(probe, systemClock, LEASE));
      const stillHeld = await seen.acquire('cut', 1, GATEWAY_HOLD_MS);
      expect(stillHeld.allowed).toBe(false);

      await proxy.restore();
      // Reconnecting takes up to 1 s, the retries are at most 4 s apart; the lease has 20 s.
      const freedAfter = await msUntil(async () => {
        const result = await seen.acquire('cut', 1, GATEWAY_HOLD_MS);
        await result.slot?.release();
        return result.allowed;
      }, 8_000);
      expect(freedAfter).toBeLessThan(6_000);
      // Another connection can see the slot free before this one has read the release's reply
      // (a loaded host): the release is forgotten once that reply is in, soon after.
      await msUntil(async () => leases.pendingReleases === 0, 2_000);
    } finally {
      await leases.close();
      await closeRedis(cutOff);
      await proxy.cut();
    }
  }, 30_000);
});
