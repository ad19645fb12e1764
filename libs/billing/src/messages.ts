/**
 * Spec 4.3 and 4.4 as use cases: the other vendor's Messages format, for every chat model,
 * through the chat use case (same rules, billing and generation record, under endpoint
 * /v1/messages), and the count of a prompt's tokens as a call would bill them.
 */
import type { Caller } from '@svc/identity';
import { type ChatRequestBody, chatToMessage, countMessagesTokens, ignoredMessagesFields, messagesToChat, MessagesStreamEncoder } from '@svc/interfaces';
import type { StreamSink } from '@svc/metering';
import type { BilledAnswer, CallTags } from './answered';
import type { ChatCompletions } from './chat';
import { checkCapabilities, checkImages } from './chat-rules';
import { throughChat } from './through-chat';

const ENDPOINT = '/v1/messages';

/** A Messages request, translated and checked: validated before the edge takes an idempotency claim, so a malformed one is only a 400. */
export interface MessagesRequest {
  chat: ChatRequestBody;
  stopSequences: string[];
  ignored: string[];
}

export class Messages {
  constructor(
    private readonly chat: ChatCompletions,
    private readonly log: { error(message: string): void },
  ) {}

  read(body: unknown): MessagesRequest {
    const chat = messagesToChat(body);
    return { chat, stopSequences: Array.isArray(chat.stop) ? (chat.stop as string[]) : [], ignored: ignoredMessagesFields(body) };
  }

  answer<S extends StreamSink>(caller: Caller, request: MessagesRequest, tags: CallTags, openSink: () => S): Promise<BilledAnswer<S>> {
    const { stopSequences } = request;
    return throughChat(
      this.chat,
      caller,
      request.chat,
      { ...tags, endpoint: ENDPOINT },
      {
        json: (completion, webSearch) => chatToMessage(completion, completion.model, webSearch, stopSequences),
        encoder: ({ id, model, promptTokens, webSearch }) => new MessagesStreamEncoder({ id, model, inputTokens: promptTokens, webSearch, stopSequences }),
        ignored: request.ignored,
      },
      openSink,
      this.log,
    );
  }

  /** Spec 4.4: the prompt's tokens as the gateway counts (and bills) them; not billed itself. */
  countTokens(caller: Caller, body: unknown): { input_tokens: number } {
    const counted = countMessagesTokens(body);
    // The model must be one this key may call (404 otherwise), resolved as a real call would.
    const { models } = this.chat.plan(caller, { model: (body as { model: string }).model });
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
