import { ManualClock } from '../../clock';
import { IDEMPOTENCY_RETENTION_MS, type IdempotencyStore, type StoredResponse } from '../idempotency';
import type { Admission, AdmissionRequest } from '../admission';
import type { ConcurrencyLimiter, RateLimiter } from '../rate-limiter';
import type { ResponseCache } from '../response-cache';
import { SLOT_LEASE, type SlotLeases } from '../slot-leases';

/** The behaviour every adapter pair must share; memory.spec.ts and redis.spec.ts run it. */
export interface ContractStores {
  rateLimiter: RateLimiter;
  concurrency: ConcurrencyLimiter;
  /** On the same windows and slots as rateLimiter and concurrency. */
  admission: Admission;
  /** The leases of every slot concurrency and admission grant, with the default timings (SLOT_LEASE). */
  slotLeases: SlotLeases;
  idempotency: IdempotencyStore;
  cache: ResponseCache;
}

export type ContractFactory = (clock: ManualClock) => ContractStores | Promise<ContractStores>;

export function response(overrides: Partial<StoredResponse> = {}): StoredResponse {
  return {
    status: 200,
    headers: { 'content-type': 'application/json', 'x-request-id': 'req_1' },
    kind: 'json',
    body: '{"id":"chatcmpl_1","choices":[{"message":{"content":"héllo \\u2028 ✓"}}]}',
    sourceId: 'req_1',
    ...overrides,
  };
}

function count<T>(items: T[], match: (item: T) => boolean): number {
  return items.filter(match).length;
}

const LOCK_MS = 30_000;
/** The longest hold of the slots the tests take; shorter than the lease, so it is their lease. */
const HOLD_MS = 10_000;
const { leaseMs: LEASE_MS } = SLOT_LEASE;
/** A request that may run for minutes (a stream, a realtime session). */
const LONG_HOLD_MS = 60 * 60_000;

export function edgeStoreContract(name: string, make: ContractFactory): void {
  describe(`${name} edge stores`, () => {
    let clock: ManualClock;
    let stores: ContractStores;

    beforeEach(async () => {
      clock = new ManualClock();
      stores = await make(clock);
    });

    describe('rate limiter', () => {
      it('allows exactly the limit, then refuses with nothing remaining until the window resets', async () => {
        const { rateLimiter } = stores;
        const allowed = [];
        for (let i = 0; i < 3; i++) allowed.push(await rateLimiter.consume('rpm:a', 3));
        expect(allowed.map((r) => [r.allowed, r.remaining])).toEqual([
          [true, 2],
          [true, 1],
          [true, 0],
        ]);
        const refused = await rateLimiter.consume('rpm:a', 3);
        expect(refused).toMatchObject({ allowed: false, limit: 3, remaining: 0 });
        expect(refused.resetMs).toBeGreaterThan(0);
        expect(refused.resetMs).toBeLessThanOrEqual(60_000);
      });

      it('counts nothing for a refused consume', async () => {
        const { rateLimiter } = stores;
        expect(await rateLimiter.consume('tpm:a', 5, 3)).toMatchObject({ allowed: true, remaining: 2 });
        expect(await rateLimiter.consume('tpm:a', 5, 3)).toMatchObject({ allowed: false, remaining: 2 });
        expect(await rateLimiter.consume('tpm:a', 5, 2)).toMatchObject({ allowed: true, remaining: 0 });
      });

      it('refuses a consume larger than the whole limit with a finite reset', async () => {
        const refused = await stores.rateLimiter.consume('tpm:big', 5, 6);
        expect(refused).toMatchObject({ allowed: false, remaining: 5 });
        expect(refused.resetMs).toBeGreaterThan(0);
        expect(refused.resetMs).toBeLessThanOrEqual(60_000);
        expect(await stores.rateLimiter.peek('tpm:big', 5)).toMatchObject({ allowed: true, remaining: 5 });
      });

      it('records past the limit, after which peek and consume refuse', async () => {
        const { rateLimiter } = stores;
        expect(await rateLimiter.record('tpm:b', 10, 4)).toMatchObject({ allowed: true, remaining: 6 });
        expect(await rateLimiter.record('tpm:b', 10, 11)).toMatchObject({ allowed: false, remaining: 0 });
        const peeked = await rateLimiter.peek('tpm:b', 10);
        expect(peeked).toMatchObject({ allowed: false, remaining: 0 });
        expect(peeked.resetMs).toBeGreaterThan(0);
        expect((await rateLimiter.consume('tpm:b', 10)).allowed).toBe(false);
      });

      it('peeks without counting', async () => {
        const { rateLimiter } = stores;
        expect(await rateLimiter.peek('rpm:p', 2)).toEqual({ allowed: true, limit: 2, remaining: 2, resetMs: 0 });
        await rateLimiter.peek('rpm:p', 2);
        expect((await rateLimiter.consume('rpm:p', 2)).allowed).toBe(true);
        expect(await rateLimiter.peek('rpm:p', 2)).toMatchObject({ allowed: true, remaining: 1 });
        expect((await rateLimiter.consume('rpm:p', 2)).allowed).toBe(true);
        expect(await rateLimiter.peek('rpm:p', 2)).toMatchObject({ allowed: false, remaining: 0 });
      });

      it('keeps buckets apart', async () => {
        const { rateLimiter } = stores;
        expect((await rateLimiter.consume('rpm:x', 1)).allowed).toBe(true);
        expect((await rateLimiter.consume('rpm:x', 1)).allowed).toBe(false);
        expect((await rateLimiter.consume('rpm:y', 1)).allowed).toBe(true);
      });

      it('keeps one count per bucket when its limit changes', async () => {
        const { rateLimiter } = stores;
        for (let i = 0; i < 3; i++) expect((await rateLimiter.consume('rpm:lowered', 10)).allowed).toBe(true);
        expect(await rateLimiter.consume('rpm:lowered', 3)).toMatchObject({ allowed: false, remaining: 0 });
        expect(await rateLimiter.consume('rpm:lowered', 4)).toMatchObject({ allowed: true, remaining: 0 });
      });

      it('lets exactly the limit through 50 concurrent consumes', async () => {
        const results = await Promise.all(Array.from({ length: 50 }, () => stores.rateLimiter.consume('rpm:race', 10)));
        expect(count(results, (r) => r.allowed)).toBe(10);
        expect(await stores.rateLimiter.peek('rpm:race', 10)).toMatchObject({ remaining: 0 });
      });

      it('lets exactly what fits through concurrent multi-point consumes', async () => {
        const results = await Promise.all(Array.from({ length: 20 }, () => stores.rateLimiter.consume('tpm:race', 10, 3)));
        expect(count(results, (r) => r.allowed)).toBe(3);
        expect(await stores.rateLimiter.peek('tpm:race', 10)).toMatchObject({ allowed: true, remaining: 1 });
      });

      it('rejects nonsense points and limits', async () => {
        await expect(stores.rateLimiter.consume('rpm:z', 10, 0)).rejects.toThrow(RangeError);
        await expect(stores.rateLimiter.consume('rpm:z', 10, 1.5)).rejects.toThrow(RangeError);
        await expect(stores.rateLimiter.record('rpm:z', -1, 1)).rejects.toThrow(RangeError);
      });
    });

    describe('concurrency limiter', () => {
      it('grants up to the limit, refuses beyond it, and a release frees a slot', async () => {
        const { concurrency } = stores;
        const first = await concurrency.acquire('conc:a', 2, HOLD_MS);
        const second = await concurrency.acquire('conc:a', 2, HOLD_MS);
        expect([first.allowed, first.remaining, second.allowed, second.remaining]).toEqual([true, 1, true, 0]);
        const refused = await concurrency.acquire('conc:a', 2, HOLD_MS);
        expect(refused).toEqual({ allowed: false, limit: 2, remaining: 0, slot: null });
        await first.slot!.release();
        const third = await concurrency.acquire('conc:a', 2, HOLD_MS);
        expect(third).toMatchObject({ allowed: true, remaining: 0 });
      });

      it('frees a slot once only, however often it is released', async () => {
        const { concurrency } = stores;
        const first = await concurrency.acquire('conc:b', 2, HOLD_MS);
        await concurrency.acquire('conc:b', 2, HOLD_MS);
        await first.slot!.release();
        await first.slot!.release();
        expect((await concurrency.acquire('conc:b', 2, HOLD_MS)).allowed).toBe(true);
        expect((await concurrency.acquire('conc:b', 2, HOLD_MS)).allowed).toBe(false);
      });

      it("frees a crashed holder's slot when its lease ends by the injected clock", async () => {
        const { concurrency } = stores;
        expect((await concurrency.acquire('conc:c', 1, HOLD_MS)).allowed).toBe(true);
        clock.advance(HOLD_MS - 1);
        expect((await concurrency.acquire('conc:c', 1, HOLD_MS)).allowed).toBe(false);
        clock.advance(1);
        expect((await concurrency.acquire('conc:c', 1, HOLD_MS)).allowed).toBe(true);
      });

      it('grants exactly the limit to concurrent acquires', async () => {
        const results = await Promise.all(Array.from({ length: 30 }, () => stores.concurrency.acquire('conc:race', 5, HOLD_MS)));
        expect(count(results, (r) => r.allowed)).toBe(5);
      });

      it('keeps buckets apart', async () => {
        expect((await stores.concurrency.acquire('conc:x', 1, HOLD_MS)).allowed).toBe(true);
        expect((await stores.concurrency.acquire('conc:y', 1, HOLD_MS)).allowed).toBe(true);
        expect((await stores.concurrency.acquire('conc:x', 1, HOLD_MS)).allowed).toBe(false);
      });
    });

    describe('concurrency slots as short leases renewed while their request lives (spec 8, issue 41 E)', () => {
      const admitting = (name: string, maxHoldMs: number): AdmissionRequest => ({
        requests: { bucket: `rpm:${name}`, limit: 100 },
        tokens: { bucket: `tpm:${name}`, limit: 100, enforce: false },
        slots: { bucket: `conc:${name}`, limit: 1, maxHoldMs },
      });

      it('keeps a slot held across many leases while its process renews it, then frees it one lease after the renewals stop', async () => {
        const { concurrency, slotLeases } = stores;
        expect((await concurrency.acquire('conc:stream', 1, LONG_HOLD_MS)).allowed).toBe(true);
        for (let lease = 0; lease < 4; lease++) {
          clock.advance(LEASE_MS - 1);
          await slotLeases.renew();
          expect((await concurrency.acquire('conc:stream', 1, LONG_HOLD_MS)).allowed).toBe(false);
        }
        // Its process is gone (or its release was lost): no renewal comes any more.
        clock.advance(LEASE_MS - 1);
        expect((await concurrency.acquire('conc:stream', 1, LONG_HOLD_MS)).allowed).toBe(false);
        clock.advance(1);
        expect((await concurrency.acquire('conc:stream', 1, LONG_HOLD_MS)).allowed).toBe(true);
      });

      it('frees an unrenewed slot after one short lease, not after its longest hold', async () => {
        const { concurrency } = stores;
        expect((await concurrency.acquire('conc:crashed', 1, LONG_HOLD_MS)).allowed).toBe(true);
        clock.advance(LEASE_MS - 1);
        expect((await concurrency.acquire('conc:crashed', 1, LONG_HOLD_MS)).allowed).toBe(false);
        clock.advance(1);
        expect((await concurrency.acquire('conc:crashed', 1, LONG_HOLD_MS)).allowed).toBe(true);
      });

      it('renews the slot admission granted the same way, and frees it one lease after the renewals stop', async () => {
        const { admission, slotLeases } = stores;
        expect((await admission.admit(admitting('renewed', LONG_HOLD_MS))).refused).toBeNull();
        clock.advance(LEASE_MS - 1);
        await slotLeases.renew();
        clock.advance(LEASE_MS - 1);
        expect((await admission.admit(admitting('renewed', LONG_HOLD_MS))).refused).toBe('concurrency');
        clock.advance(1);
        expect((await admission.admit(admitting('renewed', LONG_HOLD_MS))).refused).toBeNull();
      });

      it('stops renewing a slot at its longest hold, so a request whose release never comes lets it go then', async () => {
        const { concurrency, slotLeases } = stores;
        const maxHoldMs = LEASE_MS + LEASE_MS / 2;
        expect((await concurrency.acquire('conc:lost-close', 1, maxHoldMs)).allowed).toBe(true);
        clock.advance(LEASE_MS - 1);
        await slotLeases.renew();
        clock.advance(LEASE_MS / 2);
        await slotLeases.renew();
        expect((await concurrency.acquire('conc:lost-close', 1, maxHoldMs)).allowed).toBe(false);
        clock.advance(1);
        await slotLeases.renew();
        expect((await concurrency.acquire('conc:lost-close', 1, maxHoldMs)).allowed).toBe(true);
      });

      it('never brings back a slot that lapsed or was released before its renewal, so the limit still holds', async () => {
        const { concurrency, slotLeases } = stores;
        expect((await concurrency.acquire('conc:lapsed', 1, LONG_HOLD_MS)).allowed).toBe(true);
        clock.advance(LEASE_MS);
        const next = await concurrency.acquire('conc:lapsed', 1, LONG_HOLD_MS);
        expect(next.allowed).toBe(true);
        // The lapsed slot's holder renews late, not knowing it lapsed; its place is taken.
        await slotLeases.renew();
        await next.slot!.release();
        await slotLeases.renew();
        const third = await concurrency.acquire('conc:lapsed', 1, LONG_HOLD_MS);
        expect(third.allowed).toBe(true);
        await slotLeases.renew();
        expect((await concurrency.acquire('conc:lapsed', 1, LONG_HOLD_MS)).allowed).toBe(false);
        expect(slotLeases.size).toBe(1);
      });
    });

    describe('admission', () => {
      const request = (name: string, limits: { requests?: number; tokens?: number; slots?: number; enforce?: boolean } = {}): AdmissionRequest => ({
        requests: { bucket: `rpm:${name}`, limit: limits.requests ?? 10 },
        tokens: { bucket: `tpm:${name}`, limit: limits.tokens ?? 100, enforce: limits.enforce ?? true },
        slots: { bucket: `conc:${name}`, limit: limits.slots ?? 10, maxHoldMs: HOLD_MS },
      });

      it('counts the request in the window the rate limiter reads and takes a slot the concurrency limiter counts', async () => {
        const admitted = await stores.admission.admit(request('a', { requests: 3, slots: 2 }));
        expect(admitted).toMatchObject({ refused: null, requests: { allowed: true, limit: 3, remaining: 2 }, tokens: { allowed: true, remaining: 100 } });
        expect(admitted.slot).toMatchObject({ allowed: true, limit: 2, remaining: 1 });
        expect(await stores.rateLimiter.peek('rpm:a', 3)).toMatchObject({ remaining: 2 });
        expect(await stores.concurrency.acquire('conc:a', 2, HOLD_MS)).toMatchObject({ allowed: true, remaining: 0 });
        expect((await stores.concurrency.acquire('conc:a', 2, HOLD_MS)).allowed).toBe(false);
        await admitted.slot.slot!.release();
        expect((await stores.concurrency.acquire('conc:a', 2, HOLD_MS)).allowed).toBe(true);
      });

      it('refuses past the requests limit, counting nothing and holding no slot', async () => {
        for (let i = 0; i < 2; i++) expect((await stores.admission.admit(request('b', { requests: 2, slots: 5 }))).refused).toBeNull();
        const refused = await stores.admission.admit(request('b', { requests: 2, slots: 5 }));
        expect(refused).toMatchObject({ refused: 'requests', requests: { allowed: false, remaining: 0 }, slot: { allowed: false, slot: null } });
        expect(refused.requests.resetMs).toBeGreaterThan(0);
        expect(refused.requests.resetMs).toBeLessThanOrEqual(60_000);
        // Two slots held by the admitted requests, none by the refused one.
        expect(await stores.concurrency.acquire('conc:b', 5, HOLD_MS)).toMatchObject({ allowed: true, remaining: 2 });
      });

      it('refuses a window of tokens at its limit only when told to enforce it, and never counts tokens', async () => {
        expect((await stores.rateLimiter.consume('tpm:c', 50, 50)).allowed).toBe(true);
        const refused = await stores.admission.admit(request('c', { tokens: 50 }));
        expect(refused).toMatchObject({ refused: 'tokens', tokens: { allowed: false, remaining: 0 }, requests: { remaining: 10 } });
        expect(refused.tokens.resetMs).toBeGreaterThan(0);
        expect(await stores.rateLimiter.peek('rpm:c', 10)).toMatchObject({ remaining: 10 });
        const reported = await stores.admission.admit(request('c', { tokens: 50, enforce: false }));
        expect(reported).toMatchObject({ refused: null, tokens: { allowed: false, remaining: 0 } });
        expect(await stores.rateLimiter.peek('tpm:c', 50)).toMatchObject({ remaining: 0 });
        expect(await stores.rateLimiter.peek('rpm:c', 10)).toMatchObject({ remaining: 9 });
      });

      it('counts a prompt in the tokens window with the request, as the rate limiter counts it', async () => {
        const prompt = (n: number) => ({ ...request('p', { tokens: 100 }), tokens: { bucket: 'tpm:p', limit: 100, enforce: true, prompt: n } });
        const admitted = await stores.admission.admit(prompt(60));
        expect(admitted).toMatchObject({ refused: null, tokens: { allowed: true, remaining: 40 }, requests: { remaining: 9 } });
        expect(admitted.tokens.resetMs).toBeGreaterThan(0);
        expect(await stores.rateLimiter.peek('tpm:p', 100)).toMatchObject({ remaining: 40 });
        // Past the limit: refused, and neither the tokens nor the request counted, no slot held.
        const refused = await stores.admission.admit(prompt(41));
        expect(refused).toMatchObject({ refused: 'tokens', tokens: { allowed: false, remaining: 40 }, slot: { slot: null } });
        expect(refused.tokens.resetMs).toBeGreaterThan(0);
        expect(await stores.rateLimiter.peek('tpm:p', 100)).toMatchObject({ remaining: 40 });
        expect(await stores.rateLimiter.peek('rpm:p', 10)).toMatchObject({ remaining: 9 });
        expect(await stores.concurrency.acquire('conc:p', 10, HOLD_MS)).toMatchObject({ remaining: 8 });
        // Exactly up to the limit passes; a prompt refused by another limit counts nothing either.
        expect((await stores.admission.admit(prompt(40))).tokens).toMatchObject({ allowed: true, remaining: 0 });
        const full = { ...request('q', { requests: 1 }), tokens: { bucket: 'tpm:q', limit: 100, enforce: true, prompt: 5 } };
        expect((await stores.admission.admit(full)).refused).toBeNull();
        expect((await stores.admission.admit(full)).refused).toBe('requests');
        expect(await stores.rateLimiter.peek('tpm:q', 100)).toMatchObject({ remaining: 95 });
      });

      it('admits exactly the prompts that fit when they race for the last tokens', async () => {
        const prompt = { ...request('r', { requests: 100, slots: 100 }), tokens: { bucket: 'tpm:r', limit: 100, enforce: true, prompt: 30 } };
        const results = await Promise.all(Array.from({ length: 10 }, () => stores.admission.admit(prompt)));
        expect(count(results, (r) => r.refused === null)).toBe(3);
        expect(count(results, (r) => r.refused === 'tokens')).toBe(7);
        expect(await stores.rateLimiter.peek('tpm:r', 100)).toMatchObject({ remaining: 10 });
        expect(await stores.rateLimiter.peek('rpm:r', 100)).toMatchObject({ remaining: 97 });
      });

      it('refuses when every slot is held, without counting the request', async () => {
        const held = await stores.concurrency.acquire('conc:d', 1, HOLD_MS);
        const refused = await stores.admission.admit(request('d', { slots: 1 }));
        expect(refused).toMatchObject({
          refused: 'concurrency',
          requests: { allowed: true, remaining: 10 },
          slot: { allowed: false, remaining: 0, slot: null },
        });
        expect(await stores.rateLimiter.peek('rpm:d', 10)).toMatchObject({ remaining: 10 });
        await held.slot!.release();
        expect((await stores.admission.admit(request('d', { slots: 1 }))).refused).toBeNull();
      });

      it('frees the slot of a crashed holder when its lease ends by the injected clock', async () => {
        expect((await stores.admission.admit(request('e', { slots: 1 }))).refused).toBeNull();
        clock.advance(HOLD_MS - 1);
        expect((await stores.admission.admit(request('e', { slots: 1 }))).refused).toBe('concurrency');
        clock.advance(1);
        expect((await stores.admission.admit(request('e', { slots: 1 }))).refused).toBeNull();
      });

      it('admits exactly the tighter limit of concurrent requests, and counts only those', async () => {
        const byRequests = await Promise.all(Array.from({ length: 30 }, () => stores.admission.admit(request('f', { requests: 7, slots: 20 }))));
        expect(count(byRequests, (r) => r.refused === null)).toBe(7);
        expect(count(byRequests, (r) => r.refused === 'requests')).toBe(23);
        const bySlots = await Promise.all(Array.from({ length: 30 }, () => stores.admission.admit(request('g', { requests: 20, slots: 4 }))));
        expect(count(bySlots, (r) => r.refused === null)).toBe(4);
        expect(await stores.rateLimiter.peek('rpm:g', 20)).toMatchObject({ remaining: 16 });
      });

      it('rejects nonsense limits', async () => {
        await expect(stores.admission.admit(request('h', { requests: -1 }))).rejects.toThrow(RangeError);
        await expect(stores.admission.admit({ ...request('h'), tokens: { bucket: 'tpm:h', limit: 1, enforce: true, prompt: -1 } })).rejects.toThrow(RangeError);
        await expect(stores.admission.admit({ ...request('h'), slots: { bucket: 'conc:h', limit: 1, maxHoldMs: 0 } })).rejects.toThrow(RangeError);
      });
    });

    idempotencyStoreContract(() => ({ clock, idempotency: stores.idempotency }));

    describe('response cache', () => {
      it('returns what was put, stamped by the injected clock', async () => {
        await stores.cache.put('c1', response(), 60);
        expect(await stores.cache.get('c1')).toEqual({ response: response(), storedAt: clock.now().getTime(), ttlSeconds: 60 });
      });

      it('expires an entry by the injected clock', async () => {
        await stores.cache.put('c1', response(), 2);
        clock.advance(1_999);
        expect(await stores.cache.get('c1')).not.toBeNull();
        clock.advance(1);
        expect(await stores.cache.get('c1')).toBeNull();
      });

      it('keeps the full day a 86400 s entry is allowed', async () => {
        await stores.cache.put('c1', response(), 86_400);
        clock.advance(86_400_000 - 1);
        expect(await stores.cache.get('c1')).not.toBeNull();
      });

      it('deletes, overwrites, and keeps keys apart', async () => {
        const { cache } = stores;
        await cache.put('c1', response({ body: 'one' }), 60);
        await cache.put('c2', response({ body: 'two' }), 60);
        await cache.delete('c1');
        expect(await cache.get('c1')).toBeNull();
        expect((await cache.get('c2'))?.response.body).toBe('two');
        await cache.put('c2', response({ body: 'three' }), 60);
        expect((await cache.get('c2'))?.response.body).toBe('three');
      });

      it('refuses TTLs outside 1..86400 s', async () => {
        for (const ttl of [0, 86_401, 1.5]) {
          await expect(stores.cache.put('c1', response(), ttl)).rejects.toThrow(RangeError);
        }
        expect(await stores.cache.get('c1')).toBeNull();
      });
    });
  });
}

/**
 * The idempotency part of the contract on its own, for a store that wraps another (sealing).
 * `current` is read before each test, after the caller's own beforeEach has built the store.
 */
export function idempotencyStoreContract(current: () => { clock: ManualClock; idempotency: IdempotencyStore }): void {
  describe('idempotency store', () => {
    let clock: ManualClock;
    let stores: { idempotency: IdempotencyStore };

    beforeEach(() => {
      const given = current();
      clock = given.clock;
      stores = { idempotency: given.idempotency };
    });

    it('starts, reports in progress, then replays the exact stored response', async () => {
      const { idempotency } = stores;
      expect(await idempotency.begin('key_1', 'k', 'fp1', LOCK_MS)).toEqual({ state: 'started' });
      expect(await idempotency.begin('key_1', 'k', 'fp1', LOCK_MS)).toEqual({ state: 'in_progress' });
      const stored = response({ kind: 'sse', body: 'data: {"a":1}\n\ndata: [DONE]\n\n', headers: { 'content-type': 'text/event-stream' } });
      await idempotency.complete('key_1', 'k', 'fp1', stored);
      expect(await idempotency.begin('key_1', 'k', 'fp1', LOCK_MS)).toEqual({ state: 'replay', response: stored });
    });

    it('reports a different body as a mismatch, before and after completion', async () => {
      const { idempotency } = stores;
      await idempotency.begin('key_1', 'k', 'fp1', LOCK_MS);
      expect(await idempotency.begin('key_1', 'k', 'fp2', LOCK_MS)).toEqual({ state: 'mismatch' });
      await idempotency.complete('key_1', 'k', 'fp1', response());
      expect(await idempotency.begin('key_1', 'k', 'fp2', LOCK_MS)).toEqual({ state: 'mismatch' });
    });

    it('lets a retry start again after the claim is abandoned', async () => {
      const { idempotency } = stores;
      await idempotency.begin('key_1', 'k', 'fp1', LOCK_MS);
      await idempotency.abandon('key_1', 'k');
      expect(await idempotency.begin('key_1', 'k', 'fp1', LOCK_MS)).toEqual({ state: 'started' });
    });

    it('keeps a completed response when abandon comes late', async () => {
      const { idempotency } = stores;
      await idempotency.begin('key_1', 'k', 'fp1', LOCK_MS);
      await idempotency.complete('key_1', 'k', 'fp1', response());
      await idempotency.abandon('key_1', 'k');
      expect(await idempotency.begin('key_1', 'k', 'fp1', LOCK_MS)).toEqual({ state: 'replay', response: response() });
    });

    it('treats a claim whose lock ran out as absent', async () => {
      const { idempotency } = stores;
      await idempotency.begin('key_1', 'k', 'fp1', LOCK_MS);
      clock.advance(LOCK_MS - 1);
      expect(await idempotency.begin('key_1', 'k', 'fp2', LOCK_MS)).toEqual({ state: 'mismatch' });
      clock.advance(1);
      expect(await idempotency.begin('key_1', 'k', 'fp2', LOCK_MS)).toEqual({ state: 'started' });
    });

    it('does not let a lapsed request overwrite the claim that replaced it', async () => {
      const { idempotency } = stores;
      await idempotency.begin('key_1', 'k', 'fp1', LOCK_MS);
      clock.advance(LOCK_MS);
      await idempotency.begin('key_1', 'k', 'fp2', LOCK_MS);
      await idempotency.complete('key_1', 'k', 'fp1', response());
      expect(await idempotency.begin('key_1', 'k', 'fp2', LOCK_MS)).toEqual({ state: 'in_progress' });
    });

    it('replays for 24 hours after completion, then forgets', async () => {
      const { idempotency } = stores;
      await idempotency.begin('key_1', 'k', 'fp1', LOCK_MS);
      clock.advance(5_000);
      await idempotency.complete('key_1', 'k', 'fp1', response());
      clock.advance(IDEMPOTENCY_RETENTION_MS - 1);
      expect((await idempotency.begin('key_1', 'k', 'fp1', LOCK_MS)).state).toBe('replay');
      clock.advance(1);
      expect(await idempotency.begin('key_1', 'k', 'fp1', LOCK_MS)).toEqual({ state: 'started' });
    });

    it('keeps scopes apart, even when scope and key could be spliced differently', async () => {
      const { idempotency } = stores;
      expect(await idempotency.begin('key_1', 'k', 'fp1', LOCK_MS)).toEqual({ state: 'started' });
      expect(await idempotency.begin('key_2', 'k', 'fp2', LOCK_MS)).toEqual({ state: 'started' });
      expect(await idempotency.begin('a:b', 'c', 'fp1', LOCK_MS)).toEqual({ state: 'started' });
      expect(await idempotency.begin('a', 'b:c', 'fp2', LOCK_MS)).toEqual({ state: 'started' });
    });

    it('lets exactly one of concurrent requests with the same key start', async () => {
      const results = await Promise.all(Array.from({ length: 20 }, () => stores.idempotency.begin('key_1', 'race', 'fp1', LOCK_MS)));
      expect(count(results, (r) => r.state === 'started')).toBe(1);
      expect(count(results, (r) => r.state === 'in_progress')).toBe(19);
    });

    it('accepts keys up to 255 characters and refuses longer or empty ones', async () => {
      const { idempotency } = stores;
      expect(await idempotency.begin('key_1', 'x'.repeat(255), 'fp1', LOCK_MS)).toEqual({ state: 'started' });
      await expect(idempotency.begin('key_1', 'x'.repeat(256), 'fp1', LOCK_MS)).rejects.toThrow(RangeError);
      await expect(idempotency.begin('key_1', '', 'fp1', LOCK_MS)).rejects.toThrow(RangeError);
    });
  });
}
