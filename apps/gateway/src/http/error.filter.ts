import { Catch, Inject, Logger, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import { CLOCK, type Clock } from '../../../../libs/platform/src/clock';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { toAnthropicError } from '../../../../libs/interfaces/src/messages';
import { toApiError } from './error-mapping';

/**
 * Every error leaves as the spec's error object; unexpected ones are logged, never echoed.
 * On the messages interface (spec 2.1, 4.3) it leaves in that vendor's shape,
 * `{type: 'error', error: {type, message}}`, whatever raised it: the key guard, the rate
 * limits, validation, billing or the upstream.
 */
@Catch()
export class ApiErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('http');

  constructor(@Inject(CLOCK) private readonly clock: Clock) {}

  catch(err: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const reply = http.getResponse<FastifyReply>();
    const apiError = toApiError(err, this.clock.now());
    if (apiError.status >= 500 && apiError.code === 'internal_error') {
      this.logger.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    }
    if (reply.sent) return;
    const body = isMessagesPath(http.getRequest<FastifyRequest>()?.url) ? toAnthropicError(apiError.status, apiError.toBody()) : apiError.toBody();
    void reply.status(apiError.status).headers(apiError.headers).send(body);
  }
}

/** `/v1/messages` and everything under it (`/v1/messages/count_tokens`), query string aside. */
export function isMessagesPath(url: string | undefined): boolean {
  const path = (url ?? '').split('?')[0];
  return path === '/v1/messages' || path.startsWith('/v1/messages/');
}
