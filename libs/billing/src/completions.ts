/** Spec 4.6 as a use case: legacy text completions, the prompt as one user message through the chat use case. */
import type { Caller } from '@svc/identity';
import { type ChatRequestBody, chatToCompletion, completionsOptions, completionsToChat, CompletionsStreamEncoder } from '@svc/interfaces';
import type { StreamSink } from '@svc/metering';
import type { Clock } from '@svc/platform';
import type { BilledAnswer, CallTags } from './answered';
import type { ChatCompletions } from './chat';
import { throughChat } from './through-chat';

const ENDPOINT = '/v1/completions';

/** A legacy completions request, translated and checked before the edge takes an idempotency claim. */
export interface CompletionsRequest {
  chat: ChatRequestBody;
  options: ReturnType<typeof completionsOptions>;
}

export class LegacyCompletions {
  constructor(
    private readonly chat: ChatCompletions,
    private readonly clock: Clock,
    private readonly log: { error(message: string): void },
  ) {}

  read(body: unknown): CompletionsRequest {
    return { chat: completionsToChat(body), options: completionsOptions(body) };
  }

  answer<S extends StreamSink>(caller: Caller, request: CompletionsRequest, tags: CallTags, openSink: () => S): Promise<BilledAnswer<S>> {
    const { options } = request;
    return throughChat(
      this.chat,
      caller,
      request.chat,
      { ...tags, endpoint: ENDPOINT },
      {
        json: (completion) => chatToCompletion(completion, { prompt: options.prompt, echo: options.echo }),
        encoder: ({ id, model }) => new CompletionsStreamEncoder({ id, model, created: Math.floor(this.clock.now().getTime() / 1000), ...options }),
      },
      openSink,
      this.log,
    );
  }
}
