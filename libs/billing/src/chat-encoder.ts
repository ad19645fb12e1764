/**
 * A streamed chat completion in its own wire format (spec 4.2 and 6.2): the upstream's chunks
 * under the generation's id and model, then the usage chunk with `cost` when the client asked
 * for it, then `[DONE]`.
 */
import { chatAnnotations, type WebSearchRun } from '@svc/interfaces';
import type { StreamEncoder } from '@svc/metering';
import type { ChatChunk, ChatUsage } from '@svc/providers';

/** Spec 4.2 and 6.2: `chat.completion.chunk` events, the usage chunk when asked for, `[DONE]`. */
export class ChatChunkEncoder implements StreamEncoder {
  /** The usage chunk copies the stream's id, object, created and model from the chunks before it. */
  private base: Pick<ChatChunk, 'id' | 'object' | 'created' | 'model'>;

  /** The text of choice 0 so far: where the web search's citations are looked for. */
  private text = '';
  private readonly webSearch: WebSearchRun | null;

  constructor(
    options: { id: string; model: string; webSearch?: WebSearchRun | null },
    private readonly includeUsage: boolean,
  ) {
    this.base = { id: options.id, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: options.model };
    this.webSearch = options.webSearch ?? null;
  }

  chunk(chunk: ChatChunk): string[] {
    if (typeof chunk.created === 'number' && chunk.created !== this.base.created) this.base = { ...this.base, created: chunk.created };
    const out = this.annotated(chunk);
    // As OpenAI streams with usage asked for: every chunk but the usage chunk carries `usage: null`.
    if (this.includeUsage) out.usage = null;
    return [frame(out)];
  }

  /**
   * Spec 4.2 rule 7 streamed: the citations go on choice 0's last delta (the one with its
   * finish reason), once the text they point into is complete.
   */
  private annotated(chunk: ChatChunk): ChatChunk {
    const { webSearch } = this;
    if (!webSearch) return chunk;
    const choices = chunk.choices.map((choice) => {
      if (choice.index !== 0) return choice;
      if (typeof choice.delta?.content === 'string') this.text += choice.delta.content;
      return choice.finish_reason ? { ...choice, delta: { ...choice.delta, annotations: chatAnnotations(this.text, webSearch) } } : choice;
    });
    return { ...chunk, choices };
  }

  finish(usage: ChatUsage & { cost: number }): string[] {
    return [...(this.includeUsage ? [frame({ ...this.base, choices: [], usage })] : []), frame('[DONE]')];
  }

  error(body: object): string[] {
    return [frame(body)];
  }
}

function frame(event: object | '[DONE]'): string {
  return `data: ${typeof event === 'string' ? event : JSON.stringify(event)}\n\n`;
}
