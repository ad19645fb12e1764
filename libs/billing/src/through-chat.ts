/**
 * The other interfaces on the chat use case (ARCHITECTURE section 5, steps 3-4 and 7-10): a
 * request already translated into a chat-completions body goes through the same rules, hold,
 * upstream call with fallbacks, settlement and billing as POST /chat/completions, under its own
 * endpoint on the generation, and comes back in the interface's format.
 */
import type { Caller } from '@svc/identity';
import type { ChatRequestBody, CostedUsage, WebSearchRun } from '@svc/interfaces';
import type { StreamSink } from '@svc/metering';
import type { ChatCompletion } from '@svc/providers';
import type { BilledAnswer, CallTags } from './answered';
import type { ChatCompletions } from './chat';
import type { ChatRequest, EncoderFactory } from './chat-request';
import { ignoredParamsHeader } from './chat-rules';

/** A completion as the chat use case answers it: the generation's id, the model that answered, usage with its cost. */
export type CostedCompletion = ChatCompletion & { usage: CostedUsage };

/** How one interface (messages, responses, legacy completions) presents what the chat use case answered. */
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

export async function throughChat<S extends StreamSink>(
  chat: ChatCompletions,
  caller: Caller,
  body: ChatRequestBody,
  tags: CallTags & { endpoint: string },
  presentation: Presentation,
  openSink: () => S,
  log: { error(message: string): void },
): Promise<BilledAnswer<S>> {
  // The translators build plain chat bodies; the rules validate them against the model.
  const prepared = chat.prepare(caller, body as unknown as ChatRequest);
  // The translated body holds known fields only: what was ignored is the interface's request's.
  const ignored = presentation.ignored ?? [];
  const ruleHeaders = ignored.length > 0 ? { ...prepared.headers, 'x-svc-ignored-params': ignoredParamsHeader(ignored) } : prepared.headers;
  if (prepared.request.stream === true) {
    const sink = openSink();
    const { generationId, headers, finished } = await chat.stream(caller, prepared, tags, sink, presentation.encoder);
    const hook = presentation.beforeStreamEnd;
    const ready = hook
      ? finished.then(hook).catch((err: unknown) => log.error(`${generationId}: ${err instanceof Error ? err.message : String(err)}`))
      : undefined;
    return { generationId, headers: { ...ruleHeaders, ...headers }, stream: { body: sink, finished, ...(ready ? { ready } : {}) } };
  }
  const { generationId, headers, body: completion, webSearch } = await chat.create(caller, prepared, tags);
  return { generationId, headers: { ...ruleHeaders, ...headers }, json: await presentation.json(completion as CostedCompletion, webSearch) };
}
