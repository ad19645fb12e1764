import { Body, Controller, Headers, HttpCode, Post, Res, UseGuards } from '@nestjs/common';
import { ChatCompletions } from '@svc/billing';
import type { FastifyReply } from 'fastify';
import type { Caller } from '@svc/identity';
import { AdmitWithPrompt, ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { ChatCompletionRequest, isSurelyValidChatRequest } from '@svc/interfaces';
import { fastBodyValidation } from '@svc/platform';
import { EdgeResponses } from '../edge/replay';
import { openEventStream, presentBilled } from '../edge/billed-answer';

const ROUTE = '/v1/chat/completions';

@Controller('v1/chat')
@UseGuards(ApiKeyGuard)
@Requires('model_call')
export class ChatCompletionsController {
  constructor(
    private readonly chat: ChatCompletions,
    private readonly edge: EdgeResponses,
  ) {}

  /**
   * The reply is sent here, not by Nest (`@Res()` without passthrough): a stream goes to
   * Fastify's own stream sending, which keeps the headers set on the reply and destroys the body
   * when the client leaves. Whatever is thrown before that is still the JSON error object.
   */
  @Post('completions')
  @HttpCode(200)
  @AdmitWithPrompt()
  async create(
    @CallerParam() caller: Caller,
    @Body(fastBodyValidation(isSurelyValidChatRequest)) body: ChatCompletionRequest,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.edge.serve({ caller, route: ROUTE, body, headers, cacheable: true }, reply, async (tags) =>
      presentBilled(await this.chat.complete(caller, body, tags, openEventStream)),
    );
  }
}
