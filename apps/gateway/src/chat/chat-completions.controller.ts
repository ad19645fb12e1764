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

  @Post('completions')
  @HttpCode(200)
  async create(
    @CallerParam() caller: Caller,
    @Body(bodyValidation()) body: ChatCompletionRequest,
    @Headers('x-client-request-id') clientRequestId: string | undefined,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    if (clientRequestId !== undefined && clientRequestId.length > 255) {
      throw ApiError.invalidRequest('X-Client-Request-Id must be at most 255 characters.', 'X-Client-Request-Id');
    }
    if (clientRequestId) void reply.header('x-client-request-id', clientRequestId);
    if (body.stream === true) {
      throw ApiError.invalidRequest('Streaming is not available on this server yet; send stream: false.', 'stream', 'unsupported_parameter');
    }
    const { generationId, body: response } = await this.chat.create(caller, body, { clientRequestId });
    void reply.header('x-svc-generation-id', generationId);
    return response;
  }
}
