import { Catch, Inject, Logger, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import { ApiError, CLOCK, type Clock } from '@svc/platform';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { toAnthropicError } from '@svc/interfaces';
import { RateLimitService } from '../edge/rate-limits';
import { ApiKeyGuard, deferredAdmissionOf } from './auth.guard';
import { toApiError } from './error-mapping';
import { methodNotAllowed } from './methods';
import { failedGenerationOf } from '@svc/metering';

/**
 * Every error leaves as the spec's error object; unexpected ones are logged, never echoed.
 * On the messages interface (spec 2.1, 4.3) it leaves in that vendor's shape,
 * `{type: 'error', error: {type, message}}`, whatever raised it: the key guard, the rate
 * limits, validation, billing or the upstream.
 */
@Catch()
export class ApiErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('http');

  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly keys: ApiKeyGuard,
    private readonly rateLimits: RateLimitService,
  ) {}

  catch(err: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const reply = http.getResponse<FastifyReply>();
    const request = http.getRequest<FastifyRequest>();
    const mapped = toApiError(err, this.clock.now());
    // No route took the request: a path served with other methods is 405, not 404 (issue 41 item 6).
    const apiError = (mapped.code === 'route_not_found' && request ? methodNotAllowed(request) : null) ?? mapped;
    if (apiError.status >= 500 && apiError.code === 'internal_error' && !clientLeft(err, reply)) {
      this.logger.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    }
    if (!canAnswer(reply)) return;
    const generationId = failedGenerationOf(err);
    if (generationId) void reply.header('x-svc-generation-id', generationId);
    // Never let the answer to an error become an unhandled rejection: it would end the process.
    this.send(apiError, request, reply).catch((e: unknown) => this.logger.error(e instanceof Error ? (e.stack ?? e.message) : String(e)));
  }

  private async send(error: ApiError, request: FastifyRequest | undefined, reply: FastifyReply): Promise<void> {
    // Spec 8: a request whose admission waited for its prompt, and failed before it, is admitted
    // now: it counts, and a key over its limits gets their 429 rather than this error.
    const admission = deferredAdmissionOf(request);
    const apiError = admission
      ? await admission.settle().then(
          () => error,
          (refusal: unknown) => toApiError(refusal, this.clock.now()),
        )
      : error;
    // No route ran, so no guard: a valid key still gets its rate-limit headers (spec 8: every /v1 response).
    if ((apiError.code === 'route_not_found' || apiError.code === 'method_not_allowed') && request && /^\/v1(\/|\?|$)/.test(request.url)) {
      const caller = await this.keys.callerOf(request);
      if (caller) await this.rateLimits.reportWindows(caller, reply).catch(() => undefined);
    }
    if (!canAnswer(reply)) return;
    const body = isMessagesPath(request?.url) ? toAnthropicError(apiError.status, apiError.toBody()) : apiError.toBody();
    // A stream that failed before its first byte already set its event-stream type: the error object is JSON.
    void reply.status(apiError.status).headers(apiError.headers).type('application/json; charset=utf-8').send(body);
  }
}

/**
 * A client that left before the answer's first byte: Fastify reports the answer's stream, cut
 * by the socket's close, as failed. Nothing failed; the request's log line says the client
 * closed it, and a generation already under way is billed whole (spec 1 rule 4).
 */
function clientLeft(err: unknown, reply: FastifyReply): boolean {
  return (err as { code?: unknown } | null)?.code === 'ERR_STREAM_PREMATURE_CLOSE' && reply.raw.destroyed;
}

/** Whether anything can still be said: not once the answer went out, nor to a client that left. */
function canAnswer(reply: FastifyReply): boolean {
  return !reply.sent && !reply.raw.destroyed;
}

/** `/v1/messages` and everything under it (`/v1/messages/count_tokens`), query string aside. */
export function isMessagesPath(url: string | undefined): boolean {
  const path = (url ?? '').split('?')[0];
  return path === '/v1/messages' || path.startsWith('/v1/messages/');
}
