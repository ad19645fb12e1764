type KeyEnvironment = 'live' | 'test';

export interface RateLimits {
  requests_per_minute: number;
  tokens_per_minute: number;
  concurrent_requests: number;
}

/**
 * Spec 8: identical for every account, no usage tiers; test keys are lower (spec 5.2). A key
 * can only lower its requests and tokens per minute.
 */
export const DEFAULT_RATE_LIMITS: Readonly<Record<KeyEnvironment, RateLimits>> = {
  live: { requests_per_minute: 600, tokens_per_minute: 2_000_000, concurrent_requests: 64 },
  test: { requests_per_minute: 60, tokens_per_minute: 200_000, concurrent_requests: 8 },
};

export function effectiveRateLimits(environment: KeyEnvironment, rpmLimit: number | null, tpmLimit: number | null): RateLimits {
  const defaults = DEFAULT_RATE_LIMITS[environment];
  return {
    requests_per_minute: Math.min(defaults.requests_per_minute, rpmLimit ?? Infinity),
    tokens_per_minute: Math.min(defaults.tokens_per_minute, tpmLimit ?? Infinity),
    concurrent_requests: defaults.concurrent_requests,
  };
}
