import { Body, Controller, Headers, HttpCode, Post, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Caller } from '@svc/identity';
import { moderate, moderationRequest } from '@svc/interfaces';
import { EdgeResponses } from '../edge/replay';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { Metering } from '@svc/metering';

const ROUTE = '/v1/moderations';

/**
 * Spec 4.13: free. No hold and no charge, but the answer carries the service's id (spec 1 rule
 * 2) and a generation record of cost 0; without `model`, the catalog's first moderation model
 * the key may use answers.
 */
@Controller('v1')
@UseGuards(ApiKeyGuard)
@Requires('model_call')
export class ModerationsController {
  constructor(
    private readonly metering: Metering,
    private readonly edge: EdgeResponses,
  ) {}

  @Post('moderations')
  @HttpCode(200)
  async create(
    @CallerParam() caller: Caller,
    @Body() body: unknown,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const call = moderationRequest(body);
    await this.edge.serve({ caller, route: ROUTE, body, headers, cacheable: false }, reply, async ({ clientRequestId }) => {
      const {
        id,
        target,
        value,
        headers: notices,
      } = await this.metering.runFree(caller, 'moderation', { model: call.model, endpoint: ROUTE, clientRequestId }, (t) => moderate(t, call));
      return {
        generationId: id,
        headers: { ...notices, 'x-svc-generation-id': id },
        json: { ...value.json, id, model: target.model.id, usage: { cost: 0 } },
      };
    });
  }
}
