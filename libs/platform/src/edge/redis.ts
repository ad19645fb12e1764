import { createHash } from 'node:crypto';
import { Writable } from 'node:stream';
import { Cluster, Redis } from 'ioredis';

/**
 * One Redis server (REDIS_URL) or a Redis Cluster (REDIS_CLUSTER_NODES): the edge stores use
 * either through the command interface both share.
 */
export type RedisClient = Redis | Cluster;

/** A node of a Redis Cluster the client first asks for the cluster's layout. */
export interface RedisNode {
  host: string;
  port: number;
}

/**
 * A Redis-backed edge store could not answer (connection down, command timed out or refused).
 * The resilient wrappers switch to their in-memory twin on this error; idempotency callers map
 * it to a 503 rather than run a billed request twice.
 */
export class EdgeStoreUnavailable extends Error {
  override readonly name = 'EdgeStoreUnavailable';
  constructor(
    readonly operation: string,
    cause: unknown,
  ) {
    super(`edge store unavailable during ${operation}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

const CONNECT_TIMEOUT_MS = 1_000;
/** Bounds a command on a half-open socket too, where no 'close' ever arrives. */
const COMMAND_TIMEOUT_MS = 1_000;
const MAX_RECONNECT_DELAY_MS = 1_000;
/**
 * How often a Cluster client asks for the slots' owners even when nothing failed: a replica
 * promoted after its master was lost is found within this, besides the refreshes a closed
 * connection or a MOVED reply start at once.
 */
export const SLOTS_REFRESH_INTERVAL_MS = 2_000;

/** Never gives up: a gateway must pick Redis up again on its own once it is back. */
export function reconnectDelayMs(attempt: number): number {
  return Math.min(100 * attempt, MAX_RECONNECT_DELAY_MS);
}

/** Fail fast: a command is tried once, and neither a connection nor an answer is waited for long. */
const FAIL_FAST = { maxRetriesPerRequest: 1, connectTimeout: CONNECT_TIMEOUT_MS, commandTimeout: COMMAND_TIMEOUT_MS } as const;

/** Every failed reconnect emits 'error'; one report per outage is enough for an operator. */
function reportOncePerOutage<T extends RedisClient>(client: T, onError?: (err: Error) => void): T {
  let reported = false;
  client.on('error', (err: Error) => {
    if (reported) return;
    reported = true;
    onError?.(err);
  });
  client.on('ready', () => {
    reported = false;
  });
  return client;
}

/**
 * The commands issued in one turn of the event loop (those of concurrent requests) go in one
 * write: the socket is corked at the turn's first command and uncorked once the turn is over.
 * That halved Redis's CPU per billed request at 64 connections (0.24 -> 0.10 ms), as ioredis's
 * auto-pipelining did. Not that: its pipeline gives each instance a `length` getter of its own
 * (Object.defineProperty in the constructor), which kept every command of the turn, with the
 * callbacks of the requests waiting on them, in the old generation until a full collection: 0.7
 * KB of every command, and full collections every second or two under load (docs/BENCHMARKS.md,
 * twenty-fourth round). Each command is still a command of its own, answered as it comes.
 */
class TurnBatchedRedis extends Redis {
  private corked = false;

  override sendCommand(...args: Parameters<Redis['sendCommand']>): unknown {
    const socket = args[1] ?? this.stream;
    if (!this.corked && this.status === 'ready' && socket instanceof Writable) {
      socket.cork();
      this.corked = true;
      setImmediate(() => {
        this.corked = false;
        // The socket corked, whatever the client's stream is now: a reconnect replaces it.
        socket.uncork();
      });
    }
    return super.sendCommand(...args);
  }
}

/**
 * A client that fails fast while Redis is down, so a request answers from the in-memory fallback
 * (or a 503) at once instead of queueing behind a dead connection.
 */
export function connectRedis(url: string, onError?: (err: Error) => void): Redis {
  const redis = new TurnBatchedRedis(url, {
    ...FAIL_FAST,
    enableOfflineQueue: false,
    retryStrategy: reconnectDelayMs,
  });
  return reportOncePerOutage(redis, onError);
}

/**
 * The same fail-fast client on a Redis Cluster: each command goes to the master of its key's
 * hash slot (MOVED and ASK replies are followed), so a lost master fails only the commands of
 * its slots, until its replica is promoted and found by the next slot refresh.
 */
export function connectRedisCluster(nodes: readonly RedisNode[], onError?: (err: Error) => void): Cluster {
  const cluster = new Cluster(
    nodes.map(({ host, port }) => ({ host, port })),
    {
      enableOfflineQueue: false,
      // No auto-pipelining here either (a single server corks its socket instead, see
      // TurnBatchedRedis); on a Cluster it would also misgroup: ioredis groups a turn's
      // commands by the slot of their first argument, which for EVALSHA is the script's hash,
      // not a key, so scripts of different slots land in one pipeline, which it refuses ("All
      // keys in the pipeline should belong to the same slots allocation group").
      enableAutoPipelining: false,
      // Writes and reads alike go to masters: a replica may be behind, and a rate limit read there would let more through.
      scaleReads: 'master',
      slotsRefreshInterval: SLOTS_REFRESH_INTERVAL_MS,
      slotsRefreshTimeout: CONNECT_TIMEOUT_MS,
      clusterRetryStrategy: reconnectDelayMs,
      redisOptions: FAIL_FAST,
    },
  );
  // A node's connection ended (its server lost): ask for the slots' owners now rather than at
  // the next interval, so the promoted replica is used as soon as the cluster names it.
  cluster.on('-node', () => cluster.refreshSlotsCache());
  return reportOncePerOutage(cluster, onError);
}

/** Resolves true once the client can take commands, false when `timeoutMs` passes first. */
export function whenReady(redis: RedisClient, timeoutMs: number): Promise<boolean> {
  if (redis.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const onReady = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      resolve(false);
    }, timeoutMs);
    redis.once('ready', onReady);
  });
}

/** `ping` within `timeoutMs`, or a rejection with a short message of its own. */
async function withinMs<T>(what: string, timeoutMs: number, ping: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer to ${what} in ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([ping, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * PING within `timeoutMs`: rejects at once while not connected, and when the answer is late (a
 * half-open socket), with a short message of its own either way. On a Cluster, every master
 * that serves slots must answer: one lost (until its replica is promoted) fails the check.
 */
export async function pingRedis(redis: RedisClient, timeoutMs: number): Promise<void> {
  if (redis.status !== 'ready') throw new Error(`not connected (${redis.status})`);
  if (!(redis instanceof Cluster)) {
    await withinMs('PING', timeoutMs, redis.ping());
    return;
  }
  const connected = new Map(redis.nodes('master').map((node) => [`${node.options.host}:${node.options.port}`, node]));
  const serving = new Set(redis.slots.map((owners) => owners[0]).filter((owner) => owner !== undefined));
  await Promise.all(
    [...serving].map((owner) => {
      const node = connected.get(owner);
      if (node === undefined) throw new Error(`master ${owner} not connected`);
      return withinMs(`PING from master ${owner}`, timeoutMs, node.ping());
    }),
  );
}

/** Quits politely when connected; a client that cannot reach its server is just dropped. */
export async function closeRedis(redis: RedisClient): Promise<void> {
  if (redis.status === 'ready') {
    try {
      await redis.quit();
      return;
    } catch {
      // Lost on the way: dropping the connection below ends it all the same.
    }
  }
  redis.disconnect();
}

/** Runs `op`, turning any failure of the store into EdgeStoreUnavailable. */
export async function guarded<T>(operation: string, op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    throw err instanceof EdgeStoreUnavailable ? err : new EdgeStoreUnavailable(operation, err);
  }
}

export interface LuaScript {
  lua: string;
  sha: string;
}

export function luaScript(lua: string): LuaScript {
  return { lua, sha: createHash('sha1').update(lua).digest('hex') };
}

/** EVALSHA first so the script body crosses the wire only after a server restart (NOSCRIPT). */
export async function runScript(redis: RedisClient, script: LuaScript, keys: string[], args: (string | number)[]): Promise<unknown> {
  try {
    return await redis.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (err) {
    if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
    return redis.eval(script.lua, keys.length, ...keys, ...args);
  }
}

/**
 * Redis expiry as a storage bound only: the logical expiry is checked against the injected
 * clock, so the key must outlive it (twice its span, at least a minute more) or a test that
 * moves its clock forward would find the key gone early.
 */
export function storageBoundMs(logicalMs: number): number {
  return Math.ceil(logicalMs + Math.max(logicalMs, 60_000));
}

/** A Redis key part from any string, fixed length, so user input can neither collide nor bloat keys. */
export function hashPart(...parts: string[]): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex');
}
