type KeyEnvironment = 'live' | 'test';

export interface RateLimits {
  requests_per_minute: number;
  tokens_per_minute: number;
  concurrent_requests: number;
}

export type RateLimitDefaults = Readonly<Record<KeyEnvironment, RateLimits>>;

/**
 * Spec 8: identical for every account, no usage tiers; test keys are lower (spec 5.2). An
 * operator may change them (SVC_RATE_LIMITS_LIVE / SVC_RATE_LIMITS_TEST), for every account alike.
 */
export const DEFAULT_RATE_LIMITS: RateLimitDefaults = {
  live: { requests_per_minute: 600, tokens_per_minute: 2_000_000, concurrent_requests: 64 },
  test: { requests_per_minute: 60, tokens_per_minute: 200_000, concurrent_requests: 8 },
};

/** A key can only lower its requests and tokens per minute (spec 5.4, 8). */
export function effectiveRateLimits(
  environment: KeyEnvironment,
  rpmLimit: number | null,
  tpmLimit: number | null,
  defaults: RateLimitDefaults = DEFAULT_RATE_LIMITS,
): RateLimits {
  const base = defaults[environment];
  return {
    requests_per_minute: Math.min(base.requests_per_minute, rpmLimit ?? Infinity),
    tokens_per_minute: Math.min(base.tokens_per_minute, tpmLimit ?? Infinity),
    concurrent_requests: base.concurrent_requests,
  };
}

const FIELDS: Record<string, keyof RateLimits> = { rpm: 'requests_per_minute', tpm: 'tokens_per_minute', concurrent: 'concurrent_requests' };

/**
 * `rpm=600,tpm=2000000,concurrent=64`, each part optional: what it leaves out keeps `base`.
 * Throws an Error naming the part at fault.
 */
export function parseRateLimits(text: string, base: RateLimits): RateLimits {
  const limits = { ...base };
  for (const part of text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const m = /^(rpm|tpm|concurrent)=(\d+)$/.exec(part);
    if (!m || Number(m[2]) < 1 || !Number.isSafeInteger(Number(m[2]))) {
      throw new Error(`expected rpm=N,tpm=N,concurrent=N with positive integers, got ${JSON.stringify(part)}`);
    }
    limits[FIELDS[m[1]]] = Number(m[2]);
  }
  return limits;
}
