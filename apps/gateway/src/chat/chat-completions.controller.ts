import { Body, Controller, Headers, HttpCode, Post, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Caller } from '../../../../libs/identity/src/authenticate';
import { ApiError } from '../../../../libs/platform/src/errors';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { bodyValidation } from '../http/validation';
import { ChatCompletionRequest } from './chat-completion.request';
import { ChatCompletionsService } from './chat-completions.service';

@Controller('v1/chat')
@UseGuards(ApiKeyGuard)
@Requires('model_call')
export class ChatCompletionsController {
  constructor(private readonly chat: ChatCompletionsService) {}

  /**
   * The reply is sent here, not by Nest (`@Res()` without passthrough): a stream goes to
   * Fastify's own stream sending, which keeps the headers set on the reply and destroys the body
   * when the client leaves. Whatever is thrown before that is still the JSON error object.
   */
  @Post('completions')
  @HttpCode(200)
  async create(
    @CallerParam() caller: Caller,
    @Body(bodyValidation()) body: ChatCompletionRequest,
    @Headers('x-client-request-id') clientRequestId: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    if (clientRequestId !== undefined && clientRequestId.length > 255) {
      throw ApiError.invalidRequest('X-Client-Request-Id must be at most 255 characters.', 'X-Client-Request-Id');
    }
    if (clientRequestId) void reply.header('x-client-request-id', clientRequestId);
    if (body.stream === true) {
      const { generationId, headers, body: events } = await this.chat.stream(caller, body, { clientRequestId });
      // x-accel-buffering: proxies such as nginx would otherwise hold the events back.
      void reply
        .headers({
          ...headers,
          'x-svc-generation-id': generationId,
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-cache',
          'x-accel-buffering': 'no',
        })
        .send(events);
      return;
    }
    const { generationId, headers, body: response } = await this.chat.create(caller, body, { clientRequestId });
    void reply.headers({ ...headers, 'x-svc-generation-id': generationId }).send(response);
  }
}
