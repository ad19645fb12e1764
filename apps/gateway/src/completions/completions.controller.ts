import { Body, Controller, Headers, HttpCode, Post, Res, UseGuards } from '@nestjs/common';
import { LegacyCompletions } from '@svc/billing';
import type { FastifyReply } from 'fastify';
import type { Caller } from '@svc/identity';
import { EdgeResponses } from '../edge/replay';
import { openEventStream, presentBilled } from '../edge/billed-answer';
import { AdmitWithPrompt, ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';

const ROUTE = '/v1/completions';

/** Spec 4.6: legacy text completions. */
@Controller('v1')
@UseGuards(ApiKeyGuard)
@Requires('model_call')
export class CompletionsController {
  constructor(
    private readonly completions: LegacyCompletions,
    private readonly edge: EdgeResponses,
  ) {}

  @Post('completions')
  @HttpCode(200)
  @AdmitWithPrompt()
  async create(
    @CallerParam() caller: Caller,
    @Body() body: unknown,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    // Validated before the edge takes an idempotency claim: a malformed request is only a 400.
    const request = this.completions.read(body);
    await this.edge.serve({ caller, route: ROUTE, body, headers, cacheable: true }, reply, async (tags) =>
      presentBilled(await this.completions.answer(caller, request, tags, openEventStream)),
    );
  }
}
