import { Body, Controller, Headers, HttpCode, Post, Res, UseGuards } from '@nestjs/common';
import { Messages } from '@svc/billing';
import type { FastifyReply } from 'fastify';
import type { Caller } from '@svc/identity';
import { EdgeResponses } from '../edge/replay';
import { openEventStream, presentBilled } from '../edge/billed-answer';
import { AdmitWithPrompt, ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';

const ROUTE = '/v1/messages';

/**
 * Spec 4.3 and 4.4: the other vendor's Messages format, for every chat model. Its SDKs send the
 * key as `x-api-key` and an `anthropic-version` header, which is accepted and not needed. Errors
 * on these routes leave in that vendor's shape (see ApiErrorFilter).
 */
@Controller('v1/messages')
@UseGuards(ApiKeyGuard)
export class MessagesController {
  constructor(
    private readonly messages: Messages,
    private readonly edge: EdgeResponses,
  ) {}

  @Post()
  @HttpCode(200)
  @Requires('model_call')
  @AdmitWithPrompt()
  async create(
    @CallerParam() caller: Caller,
    @Body() body: unknown,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    // Validated before the edge takes an idempotency claim: a malformed request is only a 400.
    const request = this.messages.read(body);
    await this.edge.serve({ caller, route: ROUTE, body, headers, cacheable: true }, reply, async (tags) =>
      presentBilled(await this.messages.answer(caller, request, tags, openEventStream)),
    );
  }

  @Post('count_tokens')
  @HttpCode(200)
  @Requires('lookup')
  countTokens(@CallerParam() caller: Caller, @Body() body: unknown): { input_tokens: number } {
    return this.messages.countTokens(caller, body);
  }
}
