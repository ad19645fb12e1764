import { apiErrorOfFailure, type ChatCompletions, type Embeddings } from '@svc/billing';
import type { Caller } from '@svc/identity';
import { ChatCompletionRequest, embeddingsRequest } from '@svc/interfaces';
import type { ReserveOptions } from '@svc/metering';
import { type ApiError, bodyValidation, type Clock, DomainError } from '@svc/platform';
import type { BatchEndpoint } from './batch';
import type { AnsweredLine, LineEndpoints } from './line-calls';

const validateChat = bodyValidation();

export interface BatchLineEndpointsDeps {
  chat: ChatCompletions;
  embeddings: Embeddings;
  clock: Clock;
}

/** The endpoints a batch line stands for (spec 4.11), parsed and answered as their controllers do. */
export class BatchLineEndpoints implements LineEndpoints {
  constructor(private readonly deps: BatchLineEndpointsDeps) {}

  async answer(caller: Caller, endpoint: BatchEndpoint, body: Record<string, unknown>, options: ReserveOptions): Promise<AnsweredLine> {
    if (endpoint === '/v1/chat/completions') {
      const parsed = (await validateChat.transform(body, { type: 'body', metatype: ChatCompletionRequest })) as ChatCompletionRequest;
      if (parsed.stream === true) throw DomainError.invalid('A batch line cannot stream: leave stream out.', 'stream');
      return this.deps.chat.answer(caller, this.deps.chat.prepare(caller, parsed), {}, options);
    }
    return this.deps.embeddings.answer(caller, embeddingsRequest(body), {}, options);
  }

  /** No HTTP server stands behind a line: its errors are the billed calls' own. */
  errorOf(err: unknown): ApiError {
    return apiErrorOfFailure(err, this.deps.clock.now());
  }
}
