import { Injectable, type BeforeApplicationShutdown } from '@nestjs/common';
import { type AnsweredCall, ChatCompletions, type ChatCompletionResponse, Embeddings, type EmbeddingsAnswer, type PreparedChat } from '@svc/billing';
import type { Caller } from '@svc/identity';
import type { ChatCompletionRequest, EmbeddingsCall } from '@svc/interfaces';
import type { RequestTags, ReserveOptions } from '@svc/metering';

export type { AnsweredCall };

/**
 * The chat and embeddings use cases as batch lines call them (rules, then held and answered,
 * the settlement left to the line), and the process's wait for running streams at shutdown.
 */
@Injectable()
export class ChatCompletionsService implements BeforeApplicationShutdown {
  constructor(
    private readonly chat: ChatCompletions,
    private readonly embeddings: Embeddings,
  ) {}

  /**
   * Nest calls this on close, before the runtime (and its database pool) is closed: a stream
   * whose client left is still billed (spec 1 rule 4), so it is let finish rather than leave
   * its hold for the sweeper.
   */
  beforeApplicationShutdown(): Promise<void> {
    return this.chat.drain();
  }

  /** The request prepared once, plan included: `request` is what `answer` takes, so its models are resolved once. */
  applyRules(caller: Caller, body: ChatCompletionRequest): { request: PreparedChat } & Pick<PreparedChat, 'preset' | 'web'> {
    const prepared = this.chat.prepare(caller, body);
    return { request: prepared, preset: prepared.preset, web: prepared.web };
  }

  /** `prepared` carries its preset and web search already: the second argument is what `applyRules` gave beside it. */
  answer(caller: Caller, prepared: PreparedChat, _given: unknown, options: ReserveOptions = {}): Promise<AnsweredCall<ChatCompletionResponse>> {
    return this.chat.answer(caller, prepared, {}, options);
  }

  answerEmbeddings(caller: Caller, call: EmbeddingsCall, tags: RequestTags = {}, options: ReserveOptions = {}): Promise<AnsweredCall<EmbeddingsAnswer>> {
    return this.embeddings.answer(caller, call, tags, options);
  }
}
