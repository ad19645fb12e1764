import { Body, Controller, Headers, HttpCode, Post, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Caller } from '@svc/identity';
import { rerankAnswer, rerankOperation, rerankRequest } from '@svc/interfaces';
import { nanoToUsd } from '@svc/platform';
import { EdgeResponses } from '../edge/replay';
import { AdmitWithPrompt, ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { Metering } from '@svc/metering';

const ROUTE = '/v1/rerank';

/** Spec 4.12: billed per search unit through the metering pipeline; Idempotency-Key applies (a billed POST). */
@Controller('v1')
@UseGuards(ApiKeyGuard)
@Requires('model_call')
export class RerankController {
  constructor(
    private readonly metering: Metering,
    private readonly edge: EdgeResponses,
  ) {}

  @Post('rerank')
  @HttpCode(200)
  @AdmitWithPrompt()
  async rerank(
    @CallerParam() caller: Caller,
    @Body() body: unknown,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const call = rerankRequest(body);
    await this.edge.serve({ caller, route: ROUTE, body, headers, cacheable: false }, reply, async ({ clientRequestId, idempotency, admission }) => {
      const { metered, target, answer, usage, charged } = await this.metering.run(caller, rerankOperation, call, {
        model: call.model,
        provider: call.provider,
        clientRequestId,
        idempotency,
        admission,
      });
      const { id } = metered.reservation;
      return {
        generationId: id,
        headers: { ...metered.headers, 'x-svc-generation-id': id },
        json: rerankAnswer(id, target.model.id, call, answer, usage.search_units ?? 0, nanoToUsd(charged)),
      };
    });
  }
}
