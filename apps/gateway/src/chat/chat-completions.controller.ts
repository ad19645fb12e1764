import { Body, Controller, Headers, HttpCode, Post, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Caller } from '../../../../libs/identity/src/authenticate';
import { ApiError } from '../../../../libs/platform/src/errors';
import { healChoices, wantsJson } from '../../../../libs/providers/src/plugins/response-healing';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { bodyValidation } from '../http/validation';
import { ChatCompletionRequest } from './chat-completion.request';
import { ChatCompletionsService } from './chat-completions.service';
import { fitContext, readPlugins, type ChatPlugins } from './plugins/chat-plugins';
import { checkCapabilities, checkImages, withoutUnknownFields } from './request-rules';

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
    const { request, plugins, headers: ruleHeaders } = this.applyRules(caller, body);
    if (request.stream === true) {
      const { generationId, headers, body: events } = await this.chat.stream(caller, request, { clientRequestId });
      // x-accel-buffering: proxies such as nginx would otherwise hold the events back.
      void reply
        .headers({
          ...ruleHeaders,
          ...headers,
          'x-svc-generation-id': generationId,
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-cache',
          'x-accel-buffering': 'no',
        })
        .send(events);
      return;
    }
    const { generationId, headers, body: response } = await this.chat.create(caller, request, { clientRequestId });
    // Spec 4.2 rule 8: streamed output has gone out piece by piece and cannot be healed.
    const answer = plugins.healing && wantsJson(request.response_format) ? healChoices(response).completion : response;
    void reply.headers({ ...ruleHeaders, ...headers, 'x-svc-generation-id': generationId }).send(answer);
  }

  /**
   * Spec 4.2 rules 1, 4, 5 and 9, before the service holds anything: the request the service
   * gets (known fields only, plugin fields consumed, messages compressed to fit), the plugins
   * to apply to the answer, and the headers that report what was changed.
   */
  private applyRules(caller: Caller, body: ChatCompletionRequest): { request: ChatCompletionRequest; plugins: ChatPlugins; headers: Record<string, string> } {
    const { known, ignored } = withoutUnknownFields(body);
    const plugins = readPlugins(known);
    // The models that may answer, resolved and routed exactly as the service will.
    const models = this.chat.resolveModels(caller, known).models.map((m) => m.model);
    checkCapabilities(known, models);
    checkImages(known.messages);
    const maxOutput = known.max_completion_tokens ?? known.max_tokens ?? null;
    const fitted = fitContext(known.messages, models[0], maxOutput, plugins.compression);

    // The plugin fields are the gateway's own: an upstream router would apply them a second time.
    const { plugins: _plugins, transforms: _transforms, ...forwarded } = known;
    const headers: Record<string, string> = {};
    if (ignored.length > 0) headers['x-svc-ignored-params'] = ignored.join(',');
    if (fitted.dropped > 0) headers['x-svc-compressed-messages'] = String(fitted.dropped);
    return { request: { ...forwarded, messages: fitted.messages } as ChatCompletionRequest, plugins, headers };
  }
}
