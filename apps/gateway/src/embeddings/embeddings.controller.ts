import { Body, Controller, Headers, HttpCode, Post, Res, UseGuards } from '@nestjs/common';
import { Embeddings } from '@svc/billing';
import type { FastifyReply } from 'fastify';
import type { Caller } from '@svc/identity';
import { embeddingsRequest } from '@svc/interfaces';
import { EdgeResponses } from '../edge/replay';
import { AdmitWithPrompt, ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';

const ROUTE = '/v1/embeddings';

/** Spec 4.7; Idempotency-Key applies (a billed POST), the response cache does not (spec 4.2). */
@Controller('v1')
@UseGuards(ApiKeyGuard)
@Requires('model_call')
export class EmbeddingsController {
  constructor(
    private readonly embeddings: Embeddings,
    private readonly edge: EdgeResponses,
  ) {}

  @Post('embeddings')
  @HttpCode(200)
  @AdmitWithPrompt()
  async create(
    @CallerParam() caller: Caller,
    @Body() body: unknown,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const call = embeddingsRequest(body);
    await this.edge.serve({ caller, route: ROUTE, body, headers, cacheable: false }, reply, async (tags) => {
      const { generationId, headers: notices, body: answer } = await this.embeddings.create(caller, call, tags);
      return { generationId, headers: { ...notices, 'x-svc-generation-id': generationId }, json: answer };
    });
  }
}
