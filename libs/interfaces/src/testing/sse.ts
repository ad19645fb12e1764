/** Test helpers: SSE frames back into events, and chat chunks to feed the encoders. */
import type { ChatChunk, ChatDelta } from '@svc/providers';

export interface ParsedFrame {
  event: string | undefined;
  data: any;
}

/** Parses frames strictly: one optional `event:` line, one `data:` line, a blank line. */
export function parseFrames(frames: string[]): ParsedFrame[] {
  return frames.map((frame) => {
    const match = /^(?:event: ([^\n]+)\n)?data: ([^\n]*)\n\n$/.exec(frame);
    if (!match) throw new Error(`malformed SSE frame: ${JSON.stringify(frame)}`);
    return { event: match[1], data: match[2] === '[DONE]' ? '[DONE]' : JSON.parse(match[2]) };
  });
}

export function chunk(delta: ChatDelta, finishReason: string | null = null): ChatChunk {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion.chunk',
    created: 1700000000,
    model: 'upstream-model',
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  };
}

/** The usage chunk that ends a chat stream when include_usage was asked for. */
export function usageChunk(): ChatChunk {
  return { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1700000000, model: 'upstream-model', choices: [], usage: USAGE };
}

export const USAGE = {
  prompt_tokens: 100,
  completion_tokens: 40,
  total_tokens: 140,
  prompt_tokens_details: { cached_tokens: 30 },
  completion_tokens_details: { reasoning_tokens: 12 },
  cost: 0.00123,
};
