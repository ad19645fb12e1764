import type { Admission, AdmissionRequest, AdmissionResult } from './admission';
import type { StoredResponse } from './idempotency';
import type { ConcurrencyLimiter, RateLimiter, Slot, SlotResult, WindowResult } from './rate-limiter';
import { EdgeStoreUnavailable } from './redis';
import type { CachedResponse, ResponseCache } from './response-cache';

/*
 * What the edge does while Redis is unreachable: rate and concurrency limits fall back to this
 * process's own memory (held per process, not across gateways, until Redis is back); the cache is
 * skipped; idempotency has no wrapper, its callers answer 503 rather than risk a double charge.
 * Each command still goes to Redis first: the client fails fast while disconnected, so this costs
 * nothing and the shared limits resume by themselves once it reconnects.
 */

export type OnDegraded = (what: string, err: unknown) => void;

/** Reports the switch to the fallback once per outage, not on every request. */
class Degradation {
  private degraded = false;

  constructor(
    private readonly what: string,
    private readonly onDegraded?: OnDegraded,
  ) {}

  get active(): boolean {
    return this.degraded;
  }

  async run<T>(primary: () => Promise<T>, fallback: (err: EdgeStoreUnavailable) => Promise<T>): Promise<T> {
    let result: T;
    try {
      result = await primary();
    } catch (err) {
      if (!(err instanceof EdgeStoreUnavailable)) throw err;
      if (!this.degraded) {
        this.degraded = true;
        this.onDegraded?.(this.what, err);
      }
      return fallback(err);
    }
    this.degraded = false;
    return result;
  }
}

export class FallbackRateLimiter implements RateLimiter {
  private readonly degradation: Degradation;

  constructor(
    private readonly primary: RateLimiter,
    private readonly fallback: RateLimiter,
    onDegraded?: OnDegraded,
  ) {
    this.degradation = new Degradation('rate_limiter', onDegraded);
  }

  /** True while the last answer came from the in-memory fallback. */
  get degraded(): boolean {
    return this.degradation.active;
  }

  consume(bucket: string, limit: number, points?: number): Promise<WindowResult> {
    return this.degradation.run(
      () => this.primary.consume(bucket, limit, points),
      () => this.fallback.consume(bucket, limit, points),
    );
  }

  record(bucket: string, limit: number, points: number): Promise<WindowResult> {
    return this.degradation.run(
      () => this.primary.record(bucket, limit, points),
      () => this.fallback.record(bucket, limit, points),
    );
  }

  peek(bucket: string, limit: number): Promise<WindowResult> {
    return this.degradation.run(
      () => this.primary.peek(bucket, limit),
      () => this.fallback.peek(bucket, limit),
    );
  }
}

/**
 * A slot is released on the store that granted it (its own `release` is bound to it). When that
 * store is Redis and Redis is gone, the request does not wait: its process keeps retrying the
 * release (SlotLeases) until it lands or the short lease frees the slot anyway, and a finished
 * request must not fail on its way out.
 */
function forgivingSlot(slot: Slot): Slot {
  return {
    async release() {
      try {
        await slot.release();
      } catch (err) {
        if (!(err instanceof EdgeStoreUnavailable)) throw err;
      }
    },
  };
}

function withForgivingSlot(result: SlotResult): SlotResult {
  return result.slot ? { ...result, slot: forgivingSlot(result.slot) } : result;
}

export class FallbackConcurrencyLimiter implements ConcurrencyLimiter {
  private readonly degradation: Degradation;

  constructor(
    private readonly primary: ConcurrencyLimiter,
    private readonly fallback: ConcurrencyLimiter,
    onDegraded?: OnDegraded,
  ) {
    this.degradation = new Degradation('concurrency', onDegraded);
  }

  get degraded(): boolean {
    return this.degradation.active;
  }

  async acquire(bucket: string, limit: number, maxHoldMs: number): Promise<SlotResult> {
    const result = await this.degradation.run(
      () => this.primary.acquire(bucket, limit, maxHoldMs),
      () => this.fallback.acquire(bucket, limit, maxHoldMs),
    );
    return withForgivingSlot(result);
  }
}

export class FallbackAdmission implements Admission {
  private readonly degradation: Degradation;

  constructor(
    private readonly primary: Admission,
    private readonly fallback: Admission,
    onDegraded?: OnDegraded,
  ) {
    this.degradation = new Degradation('admission', onDegraded);
  }

  get degraded(): boolean {
    return this.degradation.active;
  }

  async admit(request: AdmissionRequest): Promise<AdmissionResult> {
    const result = await this.degradation.run(
      () => this.primary.admit(request),
      () => this.fallback.admit(request),
    );
    return { ...result, slot: withForgivingSlot(result.slot) };
  }
}

export type CacheLookup = { state: 'hit'; entry: CachedResponse } | { state: 'miss' } | { state: 'bypassed' };

/** The cache while its store may be down: a lost store reads as a miss and drops writes. */
export class BypassResponseCache implements ResponseCache {
  private readonly degradation: Degradation;

  constructor(
    private readonly inner: ResponseCache,
    onDegraded?: OnDegraded,
  ) {
    this.degradation = new Degradation('cache', onDegraded);
  }

  /** Like `get`, but tells a miss from a bypass (say, for an `x-cache: bypass` header). */
  async lookup(key: string): Promise<CacheLookup> {
    return this.degradation.run(
      async (): Promise<CacheLookup> => {
        const entry = await this.inner.get(key);
        return entry ? { state: 'hit', entry } : { state: 'miss' };
      },
      async () => ({ state: 'bypassed' }),
    );
  }

  async get(key: string): Promise<CachedResponse | null> {
    const found = await this.lookup(key);
    return found.state === 'hit' ? found.entry : null;
  }

  /** While the store is down the entry is simply not kept. */
  async put(key: string, response: StoredResponse, ttlSeconds: number): Promise<void> {
    await this.degradation.run(
      () => this.inner.put(key, response, ttlSeconds),
      async () => undefined,
    );
  }

  /** While the store is down nothing is deleted; the entry's TTL still ends it. */
  async delete(key: string): Promise<void> {
    await this.degradation.run(
      () => this.inner.delete(key),
      async () => undefined,
    );
  }
}
