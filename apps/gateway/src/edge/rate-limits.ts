import { Inject, Injectable } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Caller, Operation } from '@svc/identity';
import { type PromptAdmission, rateLimitBucket as bucket, rateLimitHeaders, TokenWindows, tokensExceeded, tooManyRequests as tooMany } from '@svc/metering';
import { CLOCK, type Clock, CONFIG, type Config, type DomainError, EDGE_STORES, type EdgeStores, type WindowResult } from '@svc/platform';

/**
 * A slot is renewed while its request lives (SlotLeases, issue 41 E); one still held this long
 * after its request's longest life stops being renewed (a lost 'close' event) and lapses.
 */
const SLOT_GRACE_MS = 60_000;

/**
 * Spec 8 rate limits, per key and across every gateway process sharing Redis: requests per
 * minute and concurrent requests on every /v1 call, tokens per minute (input + output) on model
 * calls. The `x-ratelimit-*` headers go on every authenticated /v1 response, error or not.
 *
 * A model call's tokens are counted by the metered pipeline (TokenWindows, @svc/metering),
 * whose limits, buckets, headers and refusal counts these share.
 */
/** Client addresses this process remembers as refused; more are forgotten oldest first. */
const MAX_REFUSED_ADDRESSES = 10_000;
/** Confirmation code requests per client address per minute (issue 41 S2). */
export const STEP_UP_CODES_PER_ADDRESS = 10;

@Injectable()
export class RateLimitService {
  /** Client address -> until when (epoch ms on the injected clock) its requests are refused. */
  private readonly refusedAddresses = new Map<string, number>();

  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(EDGE_STORES) private readonly edge: EdgeStores,
    @Inject(CONFIG) private readonly config: Pick<Config, 'authFailureLimit' | 'upstreamTimeoutMs'>,
    private readonly tokens: TokenWindows,
  ) {}

  /**
   * Issue 14.13: guessing keys must not be free. An address over its failed authentications
   * is refused before its key is looked up, from this process's memory (no round trip); each
   * process learns it when the shared window refuses one of its own failures, so N processes
   * let at most N - 1 more through.
   */
  refuseIfGuessing(address: string): void {
    const until = this.refusedAddresses.get(address);
    if (until === undefined) return;
    const left = until - this.clock.now().getTime();
    if (left > 0) throw this.refused(tooManyFailures(left));
    this.refusedAddresses.delete(address);
  }

  /** Counts a failed authentication of `address`; throws the 429 once it is over the limit. */
  async failedAuthentication(address: string): Promise<void> {
    const window = await this.edge.rateLimiter.record(`authfail:${address}`, this.config.authFailureLimit, 1);
    if (window.allowed) return;
    this.refusedAddresses.delete(address);
    this.refusedAddresses.set(address, this.clock.now().getTime() + window.resetMs);
    if (this.refusedAddresses.size > MAX_REFUSED_ADDRESSES) this.refusedAddresses.delete(this.refusedAddresses.keys().next().value!);
    throw this.refused(tooManyFailures(window.resetMs));
  }

  /**
   * Issue 41 S2: each confirmation code is an e-mail, so one client address may ask for at most
   * STEP_UP_CODES_PER_ADDRESS a minute, whatever accounts it uses (the per-account limit is the
   * step-up stream's), counted in the shared window like the failed authentications.
   */
  async stepUpCodeRequest(address: string): Promise<void> {
    const window = await this.edge.rateLimiter.consume(`stepup:${address}`, STEP_UP_CODES_PER_ADDRESS);
    if (window.allowed) return;
    throw this.refused(
      tooMany(
        `At most ${STEP_UP_CODES_PER_ADDRESS} confirmation codes a minute are sent for one client address; retry later.`,
        'step_up_rate_limited',
        window.resetMs,
      ),
    );
  }

  private refused(error: DomainError): DomainError {
    return this.tokens.refused(error);
  }

  /**
   * Counts the request and takes a concurrency slot, given back when the response is over, in
   * one decision: a refused request counts nowhere and holds no slot. With `promptTokens` (a
   * model call whose prompt is counted), the prompt is counted in the tokens window in the same
   * decision. Throws the 429 for the first limit reached; the headers are on the reply either
   * way, and the tokens window's are returned. `slotMs`: how long the slot may be held at most
   * (a realtime session's whole life, spec 8), else an upstream call's. The slot itself lives by
   * a short lease its process renews until the response is over, however it ends (answered,
   * failed, client gone, stream cut): all of them emit 'close'.
   */
  async admit(
    caller: Caller,
    operation: Operation,
    reply: FastifyReply,
    { slotMs, promptTokens }: { slotMs?: number; promptTokens?: number } = {},
  ): Promise<Record<string, string>> {
    const limits = this.tokens.limitsOf(caller);
    const admitted = await this.edge.admission.admit({
      requests: { bucket: bucket('rpm', caller), limit: limits.requests_per_minute },
      // Only model calls spend tokens: a key out of tokens can still read its usage.
      tokens: { bucket: bucket('tpm', caller), limit: limits.tokens_per_minute, enforce: operation === 'model_call', prompt: promptTokens },
      slots: {
        bucket: bucket('concurrent', caller),
        limit: limits.concurrent_requests,
        maxHoldMs: (slotMs ?? this.config.upstreamTimeoutMs) + SLOT_GRACE_MS,
      },
    });
    setWindowHeaders(reply, 'requests', admitted.requests);
    const tokensHeaders = rateLimitHeaders('tokens', admitted.tokens);
    void reply.headers(tokensHeaders);
    switch (admitted.refused) {
      case 'requests':
        throw this.refused(
          tooMany(`This key is limited to ${limits.requests_per_minute} requests per minute.`, 'requests_limit_exceeded', admitted.requests.resetMs),
        );
      case 'tokens':
        throw this.refused(tokensExceeded(limits, admitted.tokens.resetMs, promptTokens || undefined));
      case 'concurrency':
        throw this.refused(
          tooMany(
            `This key is limited to ${limits.concurrent_requests} concurrent requests; retry when one has finished.`,
            'concurrent_requests_limit_exceeded',
            1000,
          ),
        );
    }
    const slot = admitted.slot.slot;
    if (slot) {
      const release = () => void slot.release().catch(() => undefined);
      // 'close' comes once the response is over, streamed or not, or the client has gone; a client
      // gone while admission waited on the store closed it already, and it will not come again.
      if ((reply.raw as { closed?: boolean }).closed === true) release();
      else reply.raw.once('close', release);
    }
    return tokensHeaders;
  }

  /**
   * A model call's admission left to the moment its prompt is counted: one decision and one
   * round trip for both (DeferredAdmission).
   */
  defer(caller: Caller, reply: FastifyReply): DeferredAdmission {
    return new DeferredAdmission((promptTokens) => this.admit(caller, 'model_call', reply, { promptTokens }));
  }

  /**
   * Spec 8, issue 15.3: the headers on an answer that admission never reached (a key refused
   * for its scope or restrictions, a route that does not exist): the windows as they stand,
   * counting nothing.
   */
  async reportWindows(caller: Caller, reply: FastifyReply): Promise<void> {
    const limits = this.tokens.limitsOf(caller);
    const [requests, tokens] = await Promise.all([
      this.edge.rateLimiter.peek(bucket('rpm', caller), limits.requests_per_minute),
      this.edge.rateLimiter.peek(bucket('tpm', caller), limits.tokens_per_minute),
    ]);
    setWindowHeaders(reply, 'requests', requests);
    setWindowHeaders(reply, 'tokens', tokens);
  }
}

function setWindowHeaders(reply: FastifyReply, what: 'requests' | 'tokens', window: WindowResult): void {
  void reply.headers(rateLimitHeaders(what, window));
}

function tooManyFailures(retryAfterMs: number): DomainError {
  return tooMany(
    'Too many requests from this address failed to authenticate; retry later with a valid API key.',
    'too_many_failed_authentications',
    retryAfterMs,
  );
}

/**
 * Spec 8 for a model call whose admission waits for its prompt (PromptAdmission): the pipeline
 * admits the request and counts the prompt in one decision, the one round trip to the shared
 * store before the hold. Whatever comes before that admits the request without its prompt
 * (`settle`): the edge before an idempotency claim or a cache lookup, the error filter before an
 * error goes out (a malformed request is counted, and a key over its limits gets the 429, as
 * when admission came first). The pipeline then counts the prompt alone.
 */
export class DeferredAdmission {
  private admitted: Promise<Record<string, string>> | null = null;

  constructor(private readonly admit: (promptTokens?: number) => Promise<Record<string, string>>) {}

  /** Whether the request has been admitted, or is being (refused or not). */
  get made(): boolean {
    return this.admitted !== null;
  }

  readonly withPrompt: PromptAdmission = async (promptTokens) => {
    if (this.admitted === null) return (this.admitted = this.admit(promptTokens));
    await this.admitted;
    return null;
  };

  /** Admits the request without its prompt, unless that was done already; throws its refusal either way. */
  async settle(): Promise<void> {
    await (this.admitted ??= this.admit());
  }
}
