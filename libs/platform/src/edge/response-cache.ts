import type { Clock } from '../clock';
import type { StoredResponse } from './idempotency';
import { guarded, hashPart, type RedisClient, storageBoundMs } from './redis';

export interface CachedResponse {
  response: StoredResponse;
  storedAt: number;
  ttlSeconds: number;
}

export interface ResponseCache {
  /** null when absent or expired per the injected clock */
  get(key: string): Promise<CachedResponse | null>;
  put(key: string, response: StoredResponse, ttlSeconds: number): Promise<void>;
  delete(key: string): Promise<void>;
}

/** Spec: a cache entry lives 1 s to 24 h. */
export const CACHE_TTL_MIN_SECONDS = 1;
export const CACHE_TTL_MAX_SECONDS = 86_400;
export const MEMORY_CACHE_MAX_ENTRIES = 10_000;

export function checkTtlSeconds(ttlSeconds: number): void {
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < CACHE_TTL_MIN_SECONDS || ttlSeconds > CACHE_TTL_MAX_SECONDS) {
    throw new RangeError(`ttlSeconds must be an integer in ${CACHE_TTL_MIN_SECONDS}..${CACHE_TTL_MAX_SECONDS}, got ${ttlSeconds}`);
  }
}

export function isFresh(entry: CachedResponse, now: number): boolean {
  return now < entry.storedAt + entry.ttlSeconds * 1000;
}

export class RedisResponseCache implements ResponseCache {
  constructor(
    private readonly redis: RedisClient,
    private readonly clock: Clock,
    private readonly keyPrefix: string,
  ) {}

  /** No hash tag, as idempotency entries (idempotencyEntryKey): one key per command, spread over a Cluster's masters. */
  private entryKey(key: string): string {
    return `${this.keyPrefix}:cache:${hashPart(key)}`;
  }

  async get(key: string): Promise<CachedResponse | null> {
    const raw = await guarded('cache.get', () => this.redis.get(this.entryKey(key)));
    if (raw === null) return null;
    const entry = JSON.parse(raw) as CachedResponse;
    return isFresh(entry, this.clock.now().getTime()) ? entry : null;
  }

  async put(key: string, response: StoredResponse, ttlSeconds: number): Promise<void> {
    checkTtlSeconds(ttlSeconds);
    const entry: CachedResponse = { response, storedAt: this.clock.now().getTime(), ttlSeconds };
    await guarded('cache.put', () => this.redis.set(this.entryKey(key), JSON.stringify(entry), 'PX', storageBoundMs(ttlSeconds * 1000)));
  }

  async delete(key: string): Promise<void> {
    await guarded('cache.delete', () => this.redis.del(this.entryKey(key)));
  }
}

/** Least recently used entries go first once `maxEntries` is reached; expired ones go on read. */
export class MemoryResponseCache implements ResponseCache {
  // A Map iterates in insertion order; re-inserting on each hit keeps the coldest entry first.
  private readonly entries = new Map<string, CachedResponse>();

  constructor(
    private readonly clock: Clock,
    private readonly maxEntries = MEMORY_CACHE_MAX_ENTRIES,
  ) {
    if (!Number.isSafeInteger(maxEntries) || maxEntries < 1) throw new RangeError(`maxEntries must be a positive integer, got ${maxEntries}`);
  }

  get size(): number {
    return this.entries.size;
  }

  async get(key: string): Promise<CachedResponse | null> {
    const entry = this.entries.get(key);
    if (!entry) return null;
    this.entries.delete(key);
    if (!isFresh(entry, this.clock.now().getTime())) return null;
    this.entries.set(key, entry);
    return structuredClone(entry);
  }

  async put(key: string, response: StoredResponse, ttlSeconds: number): Promise<void> {
    checkTtlSeconds(ttlSeconds);
    this.entries.delete(key);
    this.entries.set(key, { response: structuredClone(response), storedAt: this.clock.now().getTime(), ttlSeconds });
    for (const oldest of this.entries.keys()) {
      if (this.entries.size <= this.maxEntries) break;
      this.entries.delete(oldest);
    }
  }

  async delete(key: string): Promise<void> {
    this.entries.delete(key);
  }
}
