/** Chat completions, whole or streamed (spec 4.2), on the OpenAI wire format. */
import { isRecord } from '../json';
import { mapParameters } from '../operations';
import { excludesReasoning, normalizeUsage, type ChatCompletionResult, type Operation } from '../provider';
import { ProviderError } from '../provider-error';
import { readSse } from '../sse';
import { Deadline, invalidResponse, parseJson } from '../transport';
import type { ChatChunk, ChatCompletion } from '../wire';
import { post, postJson, type OpenAiConnection } from './connection';
import { OPENAI_PARAMETERS } from './parameters';

/** The answer without its thinking, for a caller who excluded it. */
function withoutReasoning<T extends { reasoning?: unknown; reasoning_details?: unknown }>(message: T | undefined): T | undefined {
  if (!message) return message;
  const { reasoning: _text, reasoning_details: _details, ...rest } = message;
  return rest as T;
}

async function complete(upstream: OpenAiConnection, body: object, signal?: AbortSignal): Promise<ChatCompletionResult> {
  const { json, latencyMs } = await postJson(upstream, '/chat/completions', payload(upstream, body), signal);
  if (!isRecord(json) || !Array.isArray(json.choices)) {
    throw invalidResponse('chat completion without a choices array', json);
  }
  const response = json as ChatCompletion;
  if (excludesReasoning(body as Record<string, unknown>)) {
    response.choices = response.choices.map((choice) => ({ ...choice, message: withoutReasoning(choice.message)! }));
  }
  return { response, usage: normalizeUsage(json.usage), latencyMs };
}

/**
 * Yields every chunk, the trailing usage chunk (empty `choices`) included: usage is always
 * requested, because billing needs it whether or not the client asked. Ends normally only
 * after `[DONE]`; a stream cut short throws a `network` ProviderError after the chunks that
 * did arrive, so callers can tell it from a clean finish.
 */
async function* stream(upstream: OpenAiConnection, body: object, signal?: AbortSignal): AsyncGenerator<ChatChunk> {
  const requested = (body as { stream_options?: unknown }).stream_options;
  const request = {
    ...payload(upstream, body),
    stream: true,
    stream_options: { ...(isRecord(requested) ? requested : {}), include_usage: true },
  };
  const exclude = excludesReasoning(body as Record<string, unknown>);
  const deadline = new Deadline(upstream.timeoutMs, signal);
  try {
    const answer = await post(upstream, '/chat/completions', request, deadline, 'text/event-stream');
    // Leaving this loop early (return, throw) ends the body's iterator, which destroys the body.
    for await (const event of readSse(
      deadline.whileReading(answer),
      deadline.streamEnd((e) => e.data === '[DONE]'),
    )) {
      if (event.data === '[DONE]') return;
      const chunk = parseJson(event.data);
      // OpenAI and OpenRouter report a failure after the headers as an error event.
      if (isRecord(chunk) && isRecord(chunk.error)) throw streamedError(chunk);
      if (exclude && isRecord(chunk) && Array.isArray(chunk.choices)) {
        const choices = (chunk as ChatChunk).choices.map((choice) => ({ ...choice, delta: withoutReasoning(choice.delta)! }));
        // A chunk that only carried thinking is nothing once the thinking is gone: not sent as
        // an empty `delta: {}` (issue 15.8). Its usage, if any, still counts.
        const empty = choices.length > 0 && choices.every((c) => c.finish_reason == null && Object.keys(c.delta ?? {}).length === 0);
        if (empty && !isRecord((chunk as ChatChunk).usage)) continue;
        (chunk as ChatChunk).choices = empty ? [] : choices;
      }
      yield chunk as ChatChunk;
    }
    throw new ProviderError({ kind: 'network', status: 502, message: 'upstream stream ended before [DONE]' });
  } catch (error) {
    throw deadline.failure(error);
  } finally {
    deadline.dispose();
  }
}

/** The request as this upstream takes it: its own fields only, reasoning in its own terms. */
function payload(upstream: OpenAiConnection, body: object): Record<string, unknown> {
  return mapParameters(upstream.chatParams, body as Record<string, unknown>);
}

function streamedError(chunk: Record<string, unknown>): ProviderError {
  const error = chunk.error as Record<string, unknown>;
  const code = error.code;
  const status = typeof code === 'number' && code >= 400 && code <= 599 ? code : 502;
  const message = typeof error.message === 'string' ? error.message : 'upstream reported an error mid-stream';
  return new ProviderError({ kind: 'http', status, message, upstreamBody: chunk });
}

/** The fields OpenAI's own API takes; a router's dialect takes its own (connection.ts). */
export const chat: Operation<'chat', OpenAiConnection> = {
  parameters: OPENAI_PARAMETERS.chat.openai,
  calls: { chat: complete, chat_stream: stream },
};
