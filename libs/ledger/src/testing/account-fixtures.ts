import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import { accountDecider, type AccountEvent, type GenerationStats, type KeyLimit, type PlaceHold } from '../account';
import type { MeterUsage } from '../pricing';

/** Event and command builders for the account decider's given/when/then tests. */
export const A = 'acc1';

/** A spec whose clock reads `at`: time moves by building another one. */
export const specAt = (at: string) => deciderSpec(accountDecider, () => new Date(at));

export const opened: AccountEvent = { type: 'AccountOpened', data: { account_id: A } };

export const credited = (nano: bigint): AccountEvent => ({
  type: 'CreditsAdded',
  data: { account_id: A, amount_nano: nano.toString(), reason: 'signup' },
});

export const stats = (over: Partial<GenerationStats> = {}): GenerationStats => ({
  model: 'sim/echo',
  provider: 'sim',
  endpoint: '/v1/chat/completions',
  prompt_tokens: 10,
  completion_tokens: 5,
  cached_tokens: 0,
  reasoning_tokens: 0,
  latency_ms: 12,
  ttft_ms: null,
  ...over,
});

export const placeHold = (holdId: string, amountNano: bigint, over: Partial<PlaceHold> = {}): PlaceHold => ({
  type: 'PlaceHold',
  holdId,
  keyId: 'k1',
  amountNano,
  model: 'sim/echo',
  endpoint: '/v1/chat/completions',
  ttlMs: 15 * 60_000,
  ...over,
});

export const held = (
  hold_id: string,
  nano: bigint,
  { key = 'k1', expires = '2026-11-02T10:15:00.000Z', limit = null }: { key?: string; expires?: string; limit?: KeyLimit | null } = {},
): AccountEvent => ({
  type: 'HoldPlaced',
  data: {
    account_id: A,
    hold_id,
    key_id: key,
    amount_nano: nano.toString(),
    model: 'sim/echo',
    endpoint: '/v1/chat/completions',
    expires_at: expires,
    key_limit: limit && { limit_nano: limit.limitNano.toString(), reset: limit.reset },
  },
});

/** The meters of a charge that names tokens only: its prompt, cached and completion tokens. */
const tokenMeters = ({ prompt_tokens, cached_tokens, completion_tokens }: GenerationStats): MeterUsage => ({
  ...(prompt_tokens ? { input: prompt_tokens } : {}),
  ...(cached_tokens ? { cached_input: cached_tokens } : {}),
  ...(completion_tokens ? { output: completion_tokens } : {}),
});

/** A charge as the account decides it, and as the store hands it out (old charges through the upcaster): with its meters. */
export const charged = (
  hold_id: string,
  nano: bigint,
  at: string,
  {
    key = 'k1',
    exceeded = 0n,
    stats: generation = stats(),
    usage = tokenMeters(generation),
  }: { key?: string; exceeded?: bigint; stats?: GenerationStats; usage?: MeterUsage } = {},
): AccountEvent => ({
  type: 'UsageCharged',
  data: {
    account_id: A,
    hold_id,
    key_id: key,
    amount_nano: nano.toString(),
    charged_at: at,
    exceeded_hold_nano: exceeded.toString(),
    ...generation,
    usage,
  },
});

export const released = (hold_id: string, key = 'k1'): AccountEvent => ({
  type: 'HoldReleased',
  data: { account_id: A, hold_id, key_id: key, reason: 'error', error_code: 'upstream_503' },
});

export const expired = (hold_id: string, nano: bigint, expires_at: string, key = 'k1'): AccountEvent => ({
  type: 'HoldExpired',
  data: { account_id: A, hold_id, key_id: key, amount_nano: nano.toString(), expires_at },
});

export const dailyLimitSet = (nano: bigint | null): AccountEvent => ({
  type: 'DailyLimitSet',
  data: { account_id: A, limit_nano: nano === null ? null : nano.toString() },
});
