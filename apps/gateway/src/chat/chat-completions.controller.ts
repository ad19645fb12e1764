import { Body, Controller, Headers, HttpCode, Post, Res, UseGuards } from '@nestjs/common';
import type { RequestTags } from '@svc/metering';
import type { FastifyReply } from 'fastify';
import type { Caller } from '@svc/identity';
import { healChoices, wantsJson } from '@svc/providers';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { fastBodyValidation } from '@svc/platform';
import { ChatCompletionRequest, isSurelyValidChatRequest } from './chat-completion.request';
import { ChatCompletionsService } from './chat-completions.service';
import { EdgeResponses, type Answer } from '../edge/replay';
import { SSE_HEADERS } from '../http/reply-headers';

const ROUTE = '/v1/chat/completions';

@Controller('v1/chat')
@UseGuards(ApiKeyGuard)
@Requires('model_call')
export class ChatCompletionsController {
  constructor(
    private readonly chat: ChatCompletionsService,
    private readonly edge: EdgeResponses,
  ) {}

  /**
   * The reply is sent here, not by Nest (`@Res()` without passthrough): a stream goes to
   * Fastify's own stream sending, which keeps the headers set on the reply and destroys the body
   * when the client leaves. Whatever is thrown before that is still the JSON error object.
   */
  @Post('completions')
  @HttpCode(200)
  async create(
    @CallerParam() caller: Caller,
    @Body(fastBodyValidation(isSurelyValidChatRequest)) body: ChatCompletionRequest,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.edge.serve({ caller, route: ROUTE, body, headers, cacheable: true }, reply, (tags) => this.answer(caller, body, tags));
  }

  private async answer(caller: Caller, body: ChatCompletionRequest, tags: RequestTags): Promise<Answer> {
    const { request, plugins, headers: ruleHeaders, preset, web } = this.chat.applyRules(caller, body);
    if (request.stream === true) {
      const { generationId, headers, body: events, finished } = await this.chat.stream(caller, request, { ...tags, preset, web });
      return {
        generationId,
        headers: { ...ruleHeaders, ...headers, ...SSE_HEADERS, 'x-svc-generation-id': generationId },
        stream: { body: events, finished },
      };
    }
    const { generationId, headers, body: response } = await this.chat.create(caller, request, { ...tags, preset, web });
    // Spec 4.2 rule 8: streamed output has gone out piece by piece and cannot be healed.
    const answer = plugins.healing && wantsJson(request.response_format) ? healChoices(response).completion : response;
    return { generationId, headers: { ...ruleHeaders, ...headers, 'x-svc-generation-id': generationId }, json: answer };
  }
}
