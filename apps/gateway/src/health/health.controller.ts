import { Controller, Get, Header, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { HealthService, type Readiness } from './health.service';

/**
 * Issue 22: probes for orchestrators and load balancers. Outside /v1: no key, no rate limit, no
 * CORS; the bodies say only which dependency is down. The liveness probe, and a readiness probe
 * answered 200, are left out of the request log (isQuietProbe): a probe every few seconds would
 * bury the requests.
 */
@Controller('health')
export class HealthController {
  constructor(private readonly health: HealthService) {}

  /** 200 whenever the process serves HTTP: it checks nothing, so a dependency's outage never gets the process restarted. */
  @Get('live')
  @Header('cache-control', 'no-store')
  live(): { status: 'ok' } {
    return { status: 'ok' };
  }

  /**
   * 200 when every dependency answers and the projections are within the bound (`degraded` when
   * only Redis is down: the gateway serves on without it), else 503 with the same body naming what failed.
   */
  @Get('ready')
  @Header('cache-control', 'no-store')
  async ready(@Res({ passthrough: true }) reply: FastifyReply): Promise<Readiness> {
    const readiness = await this.health.readiness();
    void reply.status(readiness.status === 'not_ready' ? 503 : 200);
    return readiness;
  }
}
