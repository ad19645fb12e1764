/** Chat completions, whole or streamed, as Messages requests and back (client.ts translates). */
import { isRecord } from '../json';
import { normalizeUsage, type ChatCompletionResult, type Operation } from '../provider';
import { readSse } from '../sse';
import { Deadline, invalidResponse, parseJson, postUpstream, type UpstreamBody } from '../transport';
import type { ChatChunk } from '../wire';
import { ANTHROPIC_CHAT_PARAMETERS, chatChunks, toChatCompletion, toMessagesRequest, type AnthropicConnection } from './client';

async function complete(upstream: AnthropicConnection, body: object, signal?: AbortSignal): Promise<ChatCompletionResult> {
  const { request, excludeReasoning } = toMessagesRequest(body as Record<string, unknown>);
  const started = performance.now();
  const deadline = new Deadline(upstream.timeoutMs, signal);
  try {
    const answer = await post(upstream, { ...request, stream: false }, deadline, 'application/json');
    const json = parseJson(await answer.text());
    if (!isRecord(json) || json.type !== 'message' || !Array.isArray(json.content)) {
      throw invalidResponse('Messages answer without type "message" and a content array', json);
    }
    const completion = toChatCompletion(json, { excludeReasoning });
    return { response: completion, usage: normalizeUsage(completion.usage), latencyMs: performance.now() - started };
  } catch (error) {
    throw deadline.failure(error);
  } finally {
    deadline.dispose();
  }
}

async function* stream(upstream: AnthropicConnection, body: object, signal?: AbortSignal): AsyncGenerator<ChatChunk> {
  const { request, excludeReasoning } = toMessagesRequest(body as Record<string, unknown>);
  const deadline = new Deadline(upstream.timeoutMs, signal);
  try {
    const answer = await post(upstream, { ...request, stream: true }, deadline, 'text/event-stream');
    yield* chatChunks(
      readSse(
        deadline.whileReading(answer),
        deadline.streamEnd((e) => e.event === 'message_stop'),
      ),
      { excludeReasoning },
    );
  } catch (error) {
    throw deadline.failure(error);
  } finally {
    deadline.dispose();
  }
}

function post(upstream: AnthropicConnection, payload: object, deadline: Deadline, accept: string): Promise<UpstreamBody> {
  return postUpstream(upstream.url, { ...upstream.headers, accept }, payload, deadline);
}

export const chat: Operation<'chat', AnthropicConnection> = { parameters: ANTHROPIC_CHAT_PARAMETERS, calls: { chat: complete, chat_stream: stream } };
