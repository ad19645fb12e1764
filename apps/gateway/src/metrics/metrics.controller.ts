import { Controller, Get, Inject, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { SERVICE_METRICS, type ServiceMetrics } from '@svc/metrics';
import { AdminGuard } from '../admin/admin.guard';

/**
 * Issue 22: `GET /metrics` in the Prometheus text format, on the gateway's port, for the
 * operator's token (the operator API's guard). Not mounted when SVC_METRICS_PORT serves it.
 */
@Controller('metrics')
@UseGuards(AdminGuard)
export class MetricsController {
  constructor(@Inject(SERVICE_METRICS) private readonly serviceMetrics: ServiceMetrics) {}

  @Get()
  async metrics(@Res({ passthrough: true }) reply: FastifyReply): Promise<string> {
    const { contentType, body } = await this.serviceMetrics.exposition();
    void reply.header('content-type', contentType).header('cache-control', 'no-store');
    return body;
  }
}
