import type { Clock } from '../clock';
import { guarded, hashPart, luaScript, type RedisClient, runScript, storageBoundMs } from './redis';

export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  /** `binary` bodies (speech audio) are kept as base64 text. */
  kind: 'json' | 'sse' | 'binary';
  body: string;
  sourceId: string;
}

export type IdempotencyBegin = { state: 'started' } | { state: 'in_progress' } | { state: 'mismatch' } | { state: 'replay'; response: StoredResponse };

export interface IdempotencyStore {
  /** Atomically claims (scope,key) for a request whose body hashes to `fingerprint`; the claim lasts `lockMs` unless completed. */
  begin(scope: string, key: string, fingerprint: string, lockMs: number): Promise<IdempotencyBegin>;
  /**
   * Stores the finished response for 24 h (from the injected clock) — replaces the claim. A live
   * claim of another body (ours lapsed and another request took the key) is left alone.
   */
  complete(scope: string, key: string, fingerprint: string, response: StoredResponse): Promise<void>;
  /** Drops the claim (the request failed; a retry with the same key may run again). A completed response stays. */
  abandon(scope: string, key: string): Promise<void>;
}

/** Spec: a finished response is replayed for 24 hours per API key. */
export const IDEMPOTENCY_RETENTION_MS = 24 * 60 * 60 * 1000;
export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;

export function checkIdempotencyKey(key: string): void {
  if (key.length === 0 || key.length > IDEMPOTENCY_KEY_MAX_LENGTH) {
    throw new RangeError(`an Idempotency-Key has 1 to ${IDEMPOTENCY_KEY_MAX_LENGTH} characters, got ${key.length}`);
  }
}

function checkLockMs(lockMs: number): void {
  if (!Number.isFinite(lockMs) || lockMs <= 0) throw new RangeError(`lockMs must be positive, got ${lockMs}`);
}

/** What a live entry means to a new request with `fingerprint`. */
function verdict(fingerprint: string, storedFingerprint: string, response: StoredResponse | null): IdempotencyBegin {
  if (storedFingerprint !== fingerprint) return { state: 'mismatch' };
  return response === null ? { state: 'in_progress' } : { state: 'replay', response };
}

/*
 * Each entry is a hash: fp (body fingerprint), until (ms by the injected clock after which the
 * entry counts as absent: the lock's end while running, the retention's end once completed)
 * and, once completed, response (JSON). Every decision happens inside one script, so two
 * gateways racing on one key cannot both start.
 */

/** KEYS[1] entry; ARGV now, fingerprint, lock end, storage bound ms. Replies nil (claimed) or {fp, response|nil}. */
const BEGIN_LUA = luaScript(`
local entry = redis.call('hmget', KEYS[1], 'until', 'fp', 'response')
if entry[1] and tonumber(entry[1]) > tonumber(ARGV[1]) then
  return {entry[2], entry[3]}
end
redis.call('del', KEYS[1])
redis.call('hset', KEYS[1], 'fp', ARGV[2], 'until', ARGV[3])
redis.call('pexpire', KEYS[1], ARGV[4])
return false
`);

/** KEYS[1] entry; ARGV now, fingerprint, retention end, response, storage bound ms. */
const COMPLETE_LUA = luaScript(`
local entry = redis.call('hmget', KEYS[1], 'until', 'fp')
if entry[1] and tonumber(entry[1]) > tonumber(ARGV[1]) and entry[2] ~= ARGV[2] then
  return 0
end
redis.call('del', KEYS[1])
redis.call('hset', KEYS[1], 'fp', ARGV[2], 'until', ARGV[3], 'response', ARGV[4])
redis.call('pexpire', KEYS[1], ARGV[5])
return 1
`);

/** KEYS[1] entry. Only a running claim is dropped. */
const ABANDON_LUA = luaScript(`
if redis.call('hexists', KEYS[1], 'response') == 0 then
  return redis.call('del', KEYS[1])
end
return 0
`);

/**
 * The Redis key of (scope, key). Hashed: keys are client input, and `a:b`+`c` must not meet
 * `a`+`b:c`. Exported so a test can read an entry as Redis holds it. No hash tag: every script
 * here touches this one key, and on a Redis Cluster the entries (answers kept 24 h) then spread
 * over every master by their hash instead of piling up, with a busy API key's, on one.
 */
export function idempotencyEntryKey(keyPrefix: string, scope: string, key: string): string {
  return `${keyPrefix}:idem:${hashPart(scope, key)}`;
}

export class RedisIdempotencyStore implements IdempotencyStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly clock: Clock,
    private readonly keyPrefix: string,
  ) {}

  async begin(scope: string, key: string, fingerprint: string, lockMs: number): Promise<IdempotencyBegin> {
    checkIdempotencyKey(key);
    checkLockMs(lockMs);
    const now = this.clock.now().getTime();
    const reply = (await guarded('idempotency.begin', () =>
      runScript(this.redis, BEGIN_LUA, [idempotencyEntryKey(this.keyPrefix, scope, key)], [now, fingerprint, now + lockMs, storageBoundMs(lockMs)]),
    )) as [string, string | null] | null;
    if (reply === null) return { state: 'started' };
    const [storedFingerprint, response] = reply;
    return verdict(fingerprint, storedFingerprint, response === null ? null : (JSON.parse(response) as StoredResponse));
  }

  async complete(scope: string, key: string, fingerprint: string, response: StoredResponse): Promise<void> {
    const now = this.clock.now().getTime();
    await guarded('idempotency.complete', () =>
      runScript(
        this.redis,
        COMPLETE_LUA,
        [idempotencyEntryKey(this.keyPrefix, scope, key)],
        [now, fingerprint, now + IDEMPOTENCY_RETENTION_MS, JSON.stringify(response), storageBoundMs(IDEMPOTENCY_RETENTION_MS)],
      ),
    );
  }

  async abandon(scope: string, key: string): Promise<void> {
    await guarded('idempotency.abandon', () => runScript(this.redis, ABANDON_LUA, [idempotencyEntryKey(this.keyPrefix, scope, key)], []));
  }
}

interface MemoryEntry {
  fingerprint: string;
  until: number;
  response: StoredResponse | null;
}

/** Sweeps lapsed entries every so many writes, so a long-running process does not keep them all. */
const SWEEP_EVERY = 1_000;

export class MemoryIdempotencyStore implements IdempotencyStore {
  private readonly entries = new Map<string, MemoryEntry>();
  private writes = 0;

  constructor(private readonly clock: Clock) {}

  async begin(scope: string, key: string, fingerprint: string, lockMs: number): Promise<IdempotencyBegin> {
    checkIdempotencyKey(key);
    checkLockMs(lockMs);
    const now = this.clock.now().getTime();
    const id = entryId(scope, key);
    const entry = this.live(id, now);
    if (entry) return verdict(fingerprint, entry.fingerprint, entry.response === null ? null : structuredClone(entry.response));
    this.write(id, { fingerprint, until: now + lockMs, response: null }, now);
    return { state: 'started' };
  }

  async complete(scope: string, key: string, fingerprint: string, response: StoredResponse): Promise<void> {
    const now = this.clock.now().getTime();
    const id = entryId(scope, key);
    const entry = this.live(id, now);
    if (entry && entry.fingerprint !== fingerprint) return;
    this.write(id, { fingerprint, until: now + IDEMPOTENCY_RETENTION_MS, response: structuredClone(response) }, now);
  }

  async abandon(scope: string, key: string): Promise<void> {
    const id = entryId(scope, key);
    if (this.entries.get(id)?.response === null) this.entries.delete(id);
  }

  private live(id: string, now: number): MemoryEntry | null {
    const entry = this.entries.get(id);
    return entry && entry.until > now ? entry : null;
  }

  private write(id: string, entry: MemoryEntry, now: number): void {
    this.entries.set(id, entry);
    if (++this.writes % SWEEP_EVERY !== 0) return;
    for (const [other, { until }] of this.entries) if (until <= now) this.entries.delete(other);
  }
}

function entryId(scope: string, key: string): string {
  return JSON.stringify([scope, key]);
}
