import { Injectable, Logger } from '@nestjs/common';
import type { Caller } from '@svc/identity';
import type { ChatRequestBody, CostedUsage, WebSearchRun } from '@svc/interfaces';
import type { ChatCompletion } from '@svc/providers';
import type { ChatCompletionRequest } from '../chat/chat-completion.request';
import { ChatCompletionsService, type EncoderFactory, type RequestContext } from '../chat/chat-completions.service';
import type { Answer } from '../edge/replay';
import { SSE_HEADERS } from '../http/reply-headers';
import { ignoredParamsHeader } from '../chat/request-rules';
import { endAfter } from '../http/streams';

/** A completion as the chat service answers it: the service's id, the model that answered, usage with its cost. */
export type CostedCompletion = ChatCompletion & { usage: CostedUsage };

/** How one interface (messages, responses, legacy completions) presents what the chat pipeline answered. */
export interface Presentation {
  /** The non-streamed answer, in the interface's format, with the web search the generation ran (spec 4.2 rule 7). */
  json(completion: CostedCompletion, webSearch: WebSearchRun | null): unknown;
  /** The stream, in the interface's events. */
  encoder: EncoderFactory;
  /**
   * Work the client must be able to rely on once it sees the end of the stream (the stored
   * response of /responses): run when the upstream is done and the generation settled, with
   * whether the stream finished cleanly; the stream ends after it.
   */
  beforeStreamEnd?(clean: boolean): Promise<void>;
  /** Fields of the interface's request it does not read, for `x-svc-ignored-params` (issue 15.6). */
  ignored?: readonly string[];
}

/**
 * The other interfaces on the chat pipeline (ARCHITECTURE section 5, steps 3-4 and 7-10): a
 * request already translated into a chat-completions body goes through the same rules, hold,
 * upstream call with fallbacks, settlement and billing as POST /chat/completions, under its
 * own endpoint on the generation, and comes back in the interface's format.
 */
@Injectable()
export class ThroughChat {
  private readonly logger = new Logger('interfaces');

  constructor(private readonly chat: ChatCompletionsService) {}

  async answer(caller: Caller, body: ChatRequestBody, asked: RequestContext, presentation: Presentation): Promise<Answer> {
    // The translators build plain chat bodies; the rules validate them against the model.
    const { request, headers: chatRuleHeaders, preset, web } = this.chat.applyRules(caller, body as unknown as ChatCompletionRequest);
    const context = { ...asked, preset, web };
    // The translated body holds known fields only: what was ignored is the interface's request's.
    const ignored = presentation.ignored ?? [];
    const ruleHeaders = ignored.length > 0 ? { ...chatRuleHeaders, 'x-svc-ignored-params': ignoredParamsHeader(ignored) } : chatRuleHeaders;
    if (request.stream === true) {
      const { generationId, headers, body: events, finished } = await this.chat.stream(caller, request, context, presentation.encoder);
      const hook = presentation.beforeStreamEnd;
      const stream = hook
        ? endAfter(events, () =>
            finished.then(hook).catch((err: unknown) => this.logger.error(`${generationId}: ${err instanceof Error ? err.message : String(err)}`)),
          )
        : events;
      return {
        generationId,
        headers: { ...ruleHeaders, ...headers, ...SSE_HEADERS, 'x-svc-generation-id': generationId },
        stream: { body: stream, finished },
      };
    }
    const { generationId, headers, body: completion, webSearch } = await this.chat.create(caller, request, context);
    return {
      generationId,
      headers: { ...ruleHeaders, ...headers, 'x-svc-generation-id': generationId },
      json: await presentation.json(completion as CostedCompletion, webSearch),
    };
  }
}
