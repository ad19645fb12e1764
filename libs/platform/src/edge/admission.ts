import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock';
import {
  checkLimit,
  checkMaxHold,
  checkPoints,
  KeyedQueue,
  rateWindowKey,
  refusedResetMs,
  slotsKey,
  WINDOW_SECONDS,
  windowResult,
  type MemoryConcurrencyLimiter,
  type MemoryRateLimiter,
  type SlotResult,
  type WindowResult,
} from './rate-limiter';
import { guarded, luaScript, type RedisClient, runScript, storageBoundMs } from './redis';
import type { SlotLeases } from './slot-leases';

/**
 * One request's admission (spec 8): a count in its requests-per-minute window, its
 * tokens-per-minute window looked at (or its prompt counted there, when the prompt is known
 * already) and a concurrency slot, decided together. A refused request counts nowhere and holds
 * no slot, and the whole decision is one round trip to the store.
 */
export interface AdmissionRequest {
  requests: { bucket: string; limit: number };
  /**
   * `enforce`: a window already at its limit refuses (model calls); otherwise it is only
   * reported. `prompt`: tokens counted in the window with the request, refused ('tokens') when
   * they would take it past its limit, as `RateLimiter.consume` counts them; enforced whatever
   * `enforce` says.
   */
  tokens: { bucket: string; limit: number; enforce: boolean; prompt?: number };
  /** `maxHoldMs`: the longest the slot is held (ConcurrencyLimiter.acquire); it lives by short renewed leases until then. */
  slots: { bucket: string; limit: number; maxHoldMs: number };
}

export interface AdmissionResult {
  /** The first limit the request met, in this order; null when admitted. */
  refused: 'requests' | 'tokens' | 'concurrency' | null;
  requests: WindowResult;
  /** With a prompt: the window once it is counted, or as it stands when refused. */
  tokens: WindowResult;
  /** Its slot is non-null only when admitted. */
  slot: SlotResult;
}

export interface Admission {
  admit(request: AdmissionRequest): Promise<AdmissionResult>;
}

function checkRequest({ requests, tokens, slots }: AdmissionRequest): void {
  checkLimit(requests.limit);
  checkLimit(tokens.limit);
  if (tokens.prompt !== undefined) checkPoints(tokens.prompt, 0);
  checkLimit(slots.limit);
  checkMaxHold(slots.maxHoldMs);
}

/**
 * The windows are the rate limiter's own keys, read and counted as its conditional increment
 * does (rate-limiter.ts), so `RateLimiter.consume` and `record` on the same buckets see what
 * admission counted; the slots are the concurrency limiter's leases.
 * KEYS: requests window, tokens window, slots. ARGV: requests limit, window seconds, tokens
 * limit, enforce tokens (1/0), now ms, lease end ms, slot limit, slot id, slots storage bound ms,
 * prompt tokens to count (0: none).
 * Replies {refused or '', requests used, requests pttl, tokens used, tokens pttl, slots held}.
 */
const ADMIT_LUA = luaScript(`
local requests = tonumber(redis.call('get', KEYS[1]) or '0')
local requests_ttl = redis.call('pttl', KEYS[1])
local tokens = tonumber(redis.call('get', KEYS[2]) or '0')
local tokens_ttl = redis.call('pttl', KEYS[2])
if tokens_ttl <= 0 then tokens = 0 end
redis.call('zremrangebyscore', KEYS[3], '-inf', ARGV[5])
local held = redis.call('zcard', KEYS[3])
local prompt = tonumber(ARGV[10])
local refused = ''
if requests + 1 > tonumber(ARGV[1]) then
  refused = 'requests'
elseif prompt > 0 and tokens + prompt > tonumber(ARGV[3]) then
  refused = 'tokens'
elseif ARGV[4] == '1' and tokens >= tonumber(ARGV[3]) then
  refused = 'tokens'
elseif held >= tonumber(ARGV[7]) then
  refused = 'concurrency'
end
if refused ~= '' then
  return {refused, requests, requests_ttl, tokens, tokens_ttl, held}
end
redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX')
requests = redis.call('incrby', KEYS[1], 1)
requests_ttl = redis.call('pttl', KEYS[1])
if requests_ttl == -1 then
  redis.call('expire', KEYS[1], ARGV[2])
  requests_ttl = 1000 * ARGV[2]
end
if prompt > 0 then
  redis.call('set', KEYS[2], 0, 'EX', ARGV[2], 'NX')
  tokens = redis.call('incrby', KEYS[2], prompt)
  tokens_ttl = redis.call('pttl', KEYS[2])
  if tokens_ttl == -1 then
    redis.call('expire', KEYS[2], ARGV[2])
    tokens_ttl = 1000 * ARGV[2]
  end
end
redis.call('zadd', KEYS[3], ARGV[6], ARGV[8])
if redis.call('pttl', KEYS[3]) < tonumber(ARGV[9]) then
  redis.call('pexpire', KEYS[3], ARGV[9])
end
return {'', requests, requests_ttl, tokens, tokens_ttl, held + 1}
`);

type Refusal = AdmissionResult['refused'];

export class RedisAdmission implements Admission {
  constructor(
    private readonly redis: RedisClient,
    private readonly clock: Clock,
    private readonly keyPrefix: string,
    /** The concurrency limiter's (RedisConcurrencyLimiter.leases), so one batch renews every slot of the process. */
    private readonly leases: SlotLeases,
  ) {}

  async admit(request: AdmissionRequest): Promise<AdmissionResult> {
    checkRequest(request);
    const { requests, tokens, slots } = request;
    const slotsAt = slotsKey(this.keyPrefix, slots.bucket);
    const id = randomUUID();
    const now = this.clock.now().getTime();
    const until = this.leases.firstUntil(now, slots.maxHoldMs);
    const keys = [rateWindowKey(this.keyPrefix, requests.bucket), rateWindowKey(this.keyPrefix, tokens.bucket), slotsAt];
    const args = [
      requests.limit,
      WINDOW_SECONDS,
      tokens.limit,
      tokens.enforce ? 1 : 0,
      now,
      until,
      slots.limit,
      id,
      storageBoundMs(until - now),
      tokens.prompt ?? 0,
    ];
    let reply: [string, number, number, number, number, number];
    try {
      reply = (await guarded('admission.admit', () => runScript(this.redis, ADMIT_LUA, keys, args))) as typeof reply;
    } catch (err) {
      // Issue 41 E: a reply lost to a frozen Redis does not mean the script did not run. The
      // request goes on degraded (FallbackAdmission), so a slot Redis may still grant is released.
      this.leases.lost({ key: slotsAt, id }, until);
      throw err;
    }
    const [refusal, used, usedTtl, tokensUsed, tokensTtl, held] = reply;
    const refused = (refusal === '' ? null : refusal) as Refusal;
    const requestsWindow = windowResult(refused !== 'requests', requests.limit, used, refused === 'requests' ? refusedResetMs(usedTtl) : Math.max(usedTtl, 0));
    const remaining = Math.max(slots.limit - held, 0);
    const slot: SlotResult =
      refused === null
        ? { allowed: true, limit: slots.limit, remaining, slot: this.leases.hold({ key: slotsAt, id }, now, slots.maxHoldMs) }
        : { allowed: false, limit: slots.limit, remaining, slot: null };
    return { refused, requests: requestsWindow, tokens: admittedTokens(tokens, refused, tokensUsed, tokensTtl), slot };
  }
}

/**
 * The tokens window as admission leaves it. With a prompt it reads as `RateLimiter.consume`'s
 * answer: allowed once counted, or refused with what is used and when it resets; without one,
 * as a look at the window.
 */
function admittedTokens(tokens: AdmissionRequest['tokens'], refused: Refusal, used: number, ttlMs: number): WindowResult {
  if (!tokens.prompt) return windowResult(used < tokens.limit, tokens.limit, used, Math.max(ttlMs, 0));
  if (refused === 'tokens') return windowResult(false, tokens.limit, used, refusedResetMs(ttlMs));
  return windowResult(refused === null || used < tokens.limit, tokens.limit, used, Math.max(ttlMs, 0));
}

/**
 * The same decision on this process's own windows and slots (a single gateway, or Redis down):
 * the requests of one window are decided one after the other, each looking, taking its slot
 * and counting before the next looks.
 */
export class MemoryAdmission implements Admission {
  private readonly queue = new KeyedQueue();

  constructor(
    private readonly rate: MemoryRateLimiter,
    private readonly concurrency: MemoryConcurrencyLimiter,
  ) {}

  async admit(request: AdmissionRequest): Promise<AdmissionResult> {
    checkRequest(request);
    return this.queue.run(request.requests.bucket, () => this.decide(request));
  }

  private async decide({ requests, tokens, slots }: AdmissionRequest): Promise<AdmissionResult> {
    const [requestsWindow, tokensWindow] = await Promise.all([this.rate.peek(requests.bucket, requests.limit), this.rate.peek(tokens.bucket, tokens.limit)]);
    const none = { allowed: false, limit: slots.limit, remaining: 0, slot: null };
    if (!requestsWindow.allowed) {
      return { refused: 'requests', requests: { ...requestsWindow, resetMs: refusedResetMs(requestsWindow.resetMs) }, tokens: tokensWindow, slot: none };
    }
    const prompt = tokens.prompt ?? 0;
    const used = tokens.limit - tokensWindow.remaining;
    if (prompt > 0 && used + prompt > tokens.limit) {
      return {
        refused: 'tokens',
        requests: requestsWindow,
        tokens: { ...tokensWindow, allowed: false, resetMs: refusedResetMs(tokensWindow.resetMs) },
        slot: none,
      };
    }
    if (tokens.enforce && !tokensWindow.allowed) return { refused: 'tokens', requests: requestsWindow, tokens: tokensWindow, slot: none };
    const slot = await this.concurrency.acquire(slots.bucket, slots.limit, slots.maxHoldMs);
    if (!slot.allowed) return { refused: 'concurrency', requests: requestsWindow, tokens: tokensWindow, slot };
    // Only a count made outside admission in between (output tokens, another route's prompt)
    // can refuse either count below; the prompt goes first, so the request is never counted
    // for a prompt then refused.
    const promptCounted = prompt > 0 ? await this.rate.consume(tokens.bucket, tokens.limit, prompt) : tokensWindow;
    if (!promptCounted.allowed && prompt > 0) {
      // Counted meanwhile outside admission: refused after all, and the slot goes back.
      await slot.slot?.release();
      return { refused: 'tokens', requests: requestsWindow, tokens: promptCounted, slot: none };
    }
    const counted = await this.rate.consume(requests.bucket, requests.limit);
    if (!counted.allowed) {
      // Counted meanwhile outside admission: refused after all, and the slot goes back.
      await slot.slot?.release();
      return { refused: 'requests', requests: counted, tokens: promptCounted, slot: none };
    }
    return { refused: null, requests: counted, tokens: promptCounted, slot };
  }
}
