import { Inject, Injectable } from '@nestjs/common';
import type { Caller } from '@svc/identity';
import { SERVICE_METRICS, type ServiceMetrics } from '@svc/metrics';
import { CONFIG, type Config, DomainError, EDGE_STORES, type EdgeStores, effectiveRateLimits, type RateLimits, type WindowResult } from '@svc/platform';

/**
 * Spec 8's tokens per minute of a key, across every gateway process sharing Redis: what the
 * pipeline counts of a model call (TokenLimits). The edge admits requests with the same key's
 * limits, buckets and headers, so they are decided here once.
 *
 * Tokens are counted in two steps: the prompt when the request is admitted (so a burst of
 * large prompts cannot all slip in before any is counted), the output when it is known.
 */
@Injectable()
export class TokenWindows {
  constructor(
    @Inject(EDGE_STORES) private readonly edge: Pick<EdgeStores, 'rateLimiter'>,
    @Inject(CONFIG) private readonly config: Pick<Config, 'rateLimits'>,
    @Inject(SERVICE_METRICS) private readonly metrics: Pick<ServiceMetrics, 'refused'>,
  ) {}

  limitsOf(caller: Caller): RateLimits {
    return effectiveRateLimits(caller.environment, caller.rpm_limit, caller.tpm_limit, this.config.rateLimits);
  }

  /** Counts a model call's prompt before anything is held; 429 `tokens_limit_exceeded` when it would go over. */
  async consumePromptTokens(caller: Caller, promptTokens: number): Promise<WindowResult> {
    const limits = this.limitsOf(caller);
    const window = await this.edge.rateLimiter.consume(rateLimitBucket('tpm', caller), limits.tokens_per_minute, promptTokens);
    if (!window.allowed) throw this.refused(tokensExceeded(limits, window.resetMs, promptTokens));
    return window;
  }

  /** Counts what the model produced, once known. Never refuses: the answer is already out. */
  async recordCompletionTokens(caller: Caller, completionTokens: number): Promise<void> {
    if (completionTokens <= 0) return;
    await this.edge.rateLimiter.record(rateLimitBucket('tpm', caller), this.limitsOf(caller).tokens_per_minute, completionTokens);
  }

  /** Counts a refusal of the rate limits in the process's metrics by its code (issue 22); the error is thrown by the caller. */
  refused(error: DomainError): DomainError {
    this.metrics.refused(error.code ?? 'rate_limit_exceeded');
    return error;
  }
}

/** The shared window of one of a key's limits. */
export function rateLimitBucket(kind: 'rpm' | 'tpm' | 'concurrent', caller: Pick<Caller, 'keyId'>): string {
  return `${kind}:${caller.keyId}`;
}

/** OpenAI's headers; the reset as a duration (`12s`), as OpenAI writes it. */
export function rateLimitHeaders(what: 'requests' | 'tokens', window: WindowResult): Record<string, string> {
  return {
    [`x-ratelimit-limit-${what}`]: String(window.limit),
    [`x-ratelimit-remaining-${what}`]: String(window.remaining),
    [`x-ratelimit-reset-${what}`]: `${Math.ceil(window.resetMs / 1000)}s`,
  };
}

/** The tokens window once a request's prompt is counted in it, for its answer's headers. */
export function tokenWindowHeaders(window: WindowResult): Record<string, string> {
  return rateLimitHeaders('tokens', window);
}

/** Spec 7's 429 `rate_limit_error`, with Retry-After in whole seconds (the edge maps the kind). */
export function tooManyRequests(message: string, code: string, retryAfterMs: number): DomainError {
  return new DomainError(code, message, { retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)) }, 'rate_limited');
}

export function tokensExceeded(limits: RateLimits, resetMs: number, promptTokens?: number): DomainError {
  const prompt = promptTokens === undefined ? '' : ` This request's prompt counts ${promptTokens} tokens.`;
  return tooManyRequests(
    `This key is limited to ${limits.tokens_per_minute} tokens per minute (input plus output).${prompt}`,
    'tokens_limit_exceeded',
    resetMs,
  );
}
