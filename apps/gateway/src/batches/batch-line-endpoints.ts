import { Inject, Injectable } from '@nestjs/common';
import type { AnsweredLine, BatchEndpoint, LineEndpoints } from '@svc/batches';
import type { Caller } from '@svc/identity';
import { ChatCompletionRequest, embeddingsRequest } from '@svc/interfaces';
import type { ReserveOptions } from '@svc/metering';
import { ApiError, bodyValidation, CLOCK, type Clock } from '@svc/platform';
import { ChatCompletionsService } from '../chat/chat-completions.service';
import { toApiError } from '../http/error-mapping';

const validateChat = bodyValidation();

/** The endpoints a batch line stands for (spec 4.11), parsed and answered as their controllers do. */
@Injectable()
export class BatchLineEndpoints implements LineEndpoints {
  constructor(
    private readonly chat: ChatCompletionsService,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async answer(caller: Caller, endpoint: BatchEndpoint, body: Record<string, unknown>, options: ReserveOptions): Promise<AnsweredLine> {
    if (endpoint === '/v1/chat/completions') {
      const parsed = (await validateChat.transform(body, { type: 'body', metatype: ChatCompletionRequest })) as ChatCompletionRequest;
      if (parsed.stream === true) throw ApiError.invalidRequest('A batch line cannot stream: leave stream out.', 'stream');
      const { request, preset, web } = this.chat.applyRules(caller, parsed);
      return this.chat.answer(caller, request, { preset, web }, options);
    }
    return this.chat.answerEmbeddings(caller, embeddingsRequest(body), {}, options);
  }

  errorOf(err: unknown): ApiError {
    return toApiError(err, this.clock.now());
  }
}
