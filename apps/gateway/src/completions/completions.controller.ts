import { Body, Controller, Headers, HttpCode, Inject, Post, Res, UseGuards } from '@nestjs/common';
import { CLOCK, type Clock } from '@svc/platform';
import type { FastifyReply } from 'fastify';
import type { Caller } from '@svc/identity';
import { chatToCompletion, completionsOptions, completionsToChat, CompletionsStreamEncoder } from '@svc/interfaces';
import { EdgeResponses } from '../edge/replay';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { ThroughChat } from '../interfaces/through-chat';

const ROUTE = '/v1/completions';

/** Spec 4.6: legacy text completions, the prompt as one user message through the chat pipeline. */
@Controller('v1')
@UseGuards(ApiKeyGuard)
@Requires('model_call')
export class CompletionsController {
  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly through: ThroughChat,
    private readonly edge: EdgeResponses,
  ) {}

  @Post('completions')
  @HttpCode(200)
  async create(
    @CallerParam() caller: Caller,
    @Body() body: unknown,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    // Validated before the edge takes an idempotency claim: a malformed request is only a 400.
    const chatBody = completionsToChat(body);
    const options = completionsOptions(body);
    await this.edge.serve({ caller, route: ROUTE, body, headers, cacheable: true }, reply, ({ clientRequestId, idempotency }) =>
      this.through.answer(
        caller,
        chatBody,
        { clientRequestId, idempotency, endpoint: ROUTE },
        {
          json: (completion) => chatToCompletion(completion, { prompt: options.prompt, echo: options.echo }),
          encoder: ({ id, model }) => new CompletionsStreamEncoder({ id, model, created: Math.floor(this.clock.now().getTime() / 1000), ...options }),
        },
      ),
    );
  }
}
