/**
 * Stream: chat chunks -> Anthropic's SSE events.
 */
import type { ChatChunk } from '@svc/providers';
import type { WebSearchRun } from '../web-search';
import { sseFrame, type CostedUsage, type GatewayErrorBody, type Json } from '../types';
import { stopOfAnswer, anthropicUsage, searchBlocks, citationsOf } from './answer';
import { anthropicErrorOfType, toAnthropicError } from './errors';

type OpenBlock = { kind: 'text' | 'thinking'; index: number } | { kind: 'tool'; index: number; tool: number };

/**
 * Chat chunks -> Anthropic's stream: `message_start`, the web search's two blocks when one ran,
 * and a `ping` first, then for each run of one kind of delta a content block
 * (`content_block_start`, `content_block_delta`*, `content_block_stop`), one tool_use block per
 * tool call index; `finish` closes the open block and sends `message_delta` (stop reason, usage,
 * where Anthropic's SDKs read the final server_tool_use count) and `message_stop`.
 */
export class MessagesStreamEncoder {
  private started = false;
  private open: OpenBlock | null = null;
  private nextIndex = 0;
  /** Tool call index -> content block index. */
  private readonly tools = new Map<number, number>();
  private lastFinishReason: string | null = null;
  /** The upstream's `stop_reason` on the finishing choice: which stop sequence matched (see stopOfAnswer). */
  private matchedStop: unknown = null;
  /** The open text block's text so far, for its citations. */
  private text = '';

  constructor(
    private readonly options: { id: string; model: string; inputTokens?: number; webSearch?: WebSearchRun | null; stopSequences?: readonly string[] },
  ) {}

  chunk(c: ChatChunk): string[] {
    const frames = this.start();
    const choice = c.choices[0];
    if (!choice) return frames;
    if (choice.finish_reason) {
      this.lastFinishReason = choice.finish_reason;
      this.matchedStop = choice.stop_reason ?? null;
    }
    const { delta } = choice;
    if (typeof delta.reasoning === 'string' && delta.reasoning !== '') {
      frames.push(...this.ensure('thinking'), this.delta({ type: 'thinking_delta', thinking: delta.reasoning }));
    }
    if (typeof delta.content === 'string' && delta.content !== '') {
      frames.push(...this.ensure('text'), this.delta({ type: 'text_delta', text: delta.content }));
      this.text += delta.content;
    }
    for (const call of delta.tool_calls ?? []) {
      let index = this.tools.get(call.index);
      if (index === undefined) {
        frames.push(...this.close());
        index = this.nextIndex++;
        this.tools.set(call.index, index);
        this.open = { kind: 'tool', index, tool: call.index };
        const block = { type: 'tool_use', id: call.id ?? `toolu_${this.options.id}_${call.index}`, name: call.function?.name ?? '', input: {} };
        frames.push(sseFrame({ type: 'content_block_start', index, content_block: block }, 'content_block_start'));
      }
      // A late fragment of an earlier call (upstreams interleaving parallel calls) still goes to
      // that call's block, by index, even though the block was stopped.
      const args = call.function?.arguments;
      if (typeof args === 'string' && args !== '') {
        const event = { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: args } };
        frames.push(sseFrame(event, 'content_block_delta'));
      }
    }
    return frames;
  }

  finish(usage: CostedUsage, finishReason: string | null): string[] {
    const frames = [...this.start(), ...this.close()];
    const stop = stopOfAnswer(finishReason ?? this.lastFinishReason, this.matchedStop, this.tools.size > 0, this.options.stopSequences ?? []);
    frames.push(
      sseFrame({ type: 'message_delta', delta: stop, usage: anthropicUsage(usage) }, 'message_delta'),
      sseFrame({ type: 'message_stop' }, 'message_stop'),
    );
    return frames;
  }

  /** An error after the 200 went out: Anthropic's `error` event; open blocks stay open. */
  error(body: GatewayErrorBody, status?: number): string[] {
    return [sseFrame(status === undefined ? anthropicErrorOfType(body) : toAnthropicError(status, body), 'error')];
  }

  private start(): string[] {
    if (this.started) return [];
    this.started = true;
    const message = {
      id: this.options.id,
      type: 'message',
      role: 'assistant',
      model: this.options.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: this.options.inputTokens ?? 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    };
    const search = this.options.webSearch ? this.searchFrames(this.options.webSearch) : [];
    return [sseFrame({ type: 'message_start', message }, 'message_start'), ...search, sseFrame({ type: 'ping' }, 'ping')];
  }

  /** The search's blocks, finished before the answer's: the call with its input streamed as Anthropic streams tool input, then the results whole. */
  private searchFrames(run: WebSearchRun): string[] {
    const { call, result } = searchBlocks(run);
    const callIndex = this.nextIndex++;
    const resultIndex = this.nextIndex++;
    return [
      sseFrame({ type: 'content_block_start', index: callIndex, content_block: { ...call, input: {} } }, 'content_block_start'),
      sseFrame(
        { type: 'content_block_delta', index: callIndex, delta: { type: 'input_json_delta', partial_json: JSON.stringify(call.input) } },
        'content_block_delta',
      ),
      sseFrame({ type: 'content_block_stop', index: callIndex }, 'content_block_stop'),
      sseFrame({ type: 'content_block_start', index: resultIndex, content_block: result }, 'content_block_start'),
      sseFrame({ type: 'content_block_stop', index: resultIndex }, 'content_block_stop'),
    ];
  }

  /** Makes a text or thinking block the open one, closing another kind first. */
  private ensure(kind: 'text' | 'thinking'): string[] {
    if (this.open?.kind === kind) return [];
    const frames = this.close();
    const index = this.nextIndex++;
    this.open = { kind, index };
    this.text = '';
    // The signature is Anthropic's proof of the thinking; we have none to give.
    const block = kind === 'text' ? { type: 'text', text: '' } : { type: 'thinking', thinking: '', signature: '' };
    frames.push(sseFrame({ type: 'content_block_start', index, content_block: block }, 'content_block_start'));
    return frames;
  }

  private delta(delta: Json): string {
    return sseFrame({ type: 'content_block_delta', index: this.open?.index ?? 0, delta }, 'content_block_delta');
  }

  /**
   * Ends the open block. A text block's citations go out here, the first moment the spans they
   * cite are known (Anthropic sends each before the text it cites); SDKs add them to the block
   * all the same, so the streamed message equals chatToMessage's.
   */
  private close(): string[] {
    if (!this.open) return [];
    const { index, kind } = this.open;
    const run = this.options.webSearch;
    const citations = kind === 'text' && run ? citationsOf(this.text, run) : [];
    const frames = citations.map((citation) => this.delta({ type: 'citations_delta', citation }));
    this.open = null;
    return [...frames, sseFrame({ type: 'content_block_stop', index }, 'content_block_stop')];
  }
}
