import { Body, Controller, Headers, HttpCode, Post, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Caller } from '@svc/identity';
import { chatToMessage, countMessagesTokens, ignoredMessagesFields, messagesToChat, MessagesStreamEncoder } from '@svc/interfaces';
import type { ChatCompletionRequest } from '../chat/chat-completion.request';
import { ChatCompletionsService } from '../chat/chat-completions.service';
import { EdgeResponses } from '../edge/replay';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { ThroughChat } from '../interfaces/through-chat';
import { checkCapabilities, checkImages } from '../chat/request-rules';

const ROUTE = '/v1/messages';

/**
 * Spec 4.3 and 4.4: the other vendor's Messages format, for every chat model, through the chat
 * pipeline (same rules, billing and generation record, under endpoint /v1/messages). Its SDKs
 * send the key as `x-api-key` and an `anthropic-version` header, which is accepted and not
 * needed. Errors on these routes leave in that vendor's shape (see ApiErrorFilter).
 */
@Controller('v1/messages')
@UseGuards(ApiKeyGuard)
export class MessagesController {
  constructor(
    private readonly through: ThroughChat,
    private readonly chat: ChatCompletionsService,
    private readonly edge: EdgeResponses,
  ) {}

  @Post()
  @HttpCode(200)
  @Requires('model_call')
  async create(
    @CallerParam() caller: Caller,
    @Body() body: unknown,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    // Validated before the edge takes an idempotency claim: a malformed request is only a 400.
    const chatBody = messagesToChat(body);
    const stopSequences = Array.isArray(chatBody.stop) ? (chatBody.stop as string[]) : [];
    await this.edge.serve({ caller, route: ROUTE, body, headers, cacheable: true }, reply, ({ clientRequestId, idempotency }) =>
      this.through.answer(
        caller,
        chatBody,
        { clientRequestId, idempotency, endpoint: ROUTE },
        {
          json: (completion, webSearch) => chatToMessage(completion, completion.model, webSearch, stopSequences),
          encoder: ({ id, model, promptTokens, webSearch }) => new MessagesStreamEncoder({ id, model, inputTokens: promptTokens, webSearch, stopSequences }),
          ignored: ignoredMessagesFields(body),
        },
      ),
    );
  }

  /** Spec 4.4: the prompt's tokens as the gateway counts (and bills) them; not billed itself. */
  @Post('count_tokens')
  @HttpCode(200)
  @Requires('lookup')
  countTokens(@CallerParam() caller: Caller, @Body() body: unknown): { input_tokens: number } {
    const counted = countMessagesTokens(body);
    // The model must be one this key may call (404 otherwise), resolved as a real call would.
    const { models } = this.chat.resolveModels(caller, { model: (body as { model: string }).model } as ChatCompletionRequest);
    // Issue 41 S5: the images and capabilities are checked as POST /v1/messages checks them (an
    // http image URL is a 400 there, so it is here). Only the fields spec 4.4 counts are
    // converted; max_tokens, which count_tokens does not take, only satisfies the conversion.
    const { model, messages, system, tools } = body as Record<string, unknown>;
    const chatBody = messagesToChat({ model, messages, system, tools, max_tokens: 1 });
    checkCapabilities(
      chatBody,
      models.map((m) => m.model),
    );
    checkImages(chatBody.messages);
    return counted;
  }
}
