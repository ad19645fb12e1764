import { Catch, Inject, Logger, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import { CLOCK, type Clock } from '../../../../libs/platform/src/clock';
import type { FastifyReply } from 'fastify';
import { toApiError } from './error-mapping';

/** Every error leaves as the spec's error object; unexpected ones are logged, never echoed. */
@Catch()
export class ApiErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('http');

  constructor(@Inject(CLOCK) private readonly clock: Clock) {}

  catch(err: unknown, host: ArgumentsHost): void {
    const reply = host.switchToHttp().getResponse<FastifyReply>();
    const apiError = toApiError(err, this.clock.now());
    if (apiError.status >= 500 && apiError.code === 'internal_error') {
      this.logger.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    }
    if (reply.sent) return;
    void reply.status(apiError.status).headers(apiError.headers).send(apiError.toBody());
  }
}
