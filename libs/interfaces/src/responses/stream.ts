/**
 * Stream: chat chunks -> the Responses stream events.
 */
import type { ChatChunk } from '@svc/providers';
import type { ResponseItem, ResponseObject, ResponseContext, FunctionCallItem, MessageItem } from './objects';
import {
  itemId,
  functionCallItem,
  outcomeOf,
  buildResponse,
  responseUsage,
  webSearchCallItem,
  outputText,
  reasoningItem,
  annotationsOf,
  messageItem,
} from './answer';
import { type CostedUsage, type GatewayErrorBody, type Json, sseFrame } from '../types';
import type { WebSearchRun } from '../web-search';

type Open =
  | { kind: 'reasoning'; index: number; id: string; text: string }
  | { kind: 'message'; index: number; id: string; text: string }
  | { kind: 'tool'; index: number; id: string; tool: number };

/**
 * Chat chunks -> the Responses stream: `response.created`, `response.in_progress`, the web
 * search call when one ran, then one output item per run of reasoning, text or a tool call
 * (added, deltas, done; a message's annotations just before its text is done), then
 * `response.completed` (`response.incomplete` when the answer was cut short, as OpenAI sends
 * it) carrying the same object chatToResponse builds, or `response.failed` on error.
 */
export class ResponsesStreamEncoder {
  private sequence = 0;
  private started = false;
  private readonly output: ResponseItem[] = [];
  private open: Open | null = null;
  /** Tool call index -> output index of its function_call item. */
  private readonly tools = new Map<number, number>();
  private sawMessage = false;
  private lastFinishReason: string | null = null;
  private final: ResponseObject | null = null;

  constructor(private readonly ctx: ResponseContext) {}

  chunk(c: ChatChunk): string[] {
    const frames = this.start();
    const choice = c.choices[0];
    if (!choice) return frames;
    if (choice.finish_reason) this.lastFinishReason = choice.finish_reason;
    const { delta } = choice;
    if (typeof delta.reasoning === 'string' && delta.reasoning !== '') {
      const open = this.ensure('reasoning', frames);
      open.text += delta.reasoning;
      frames.push(
        this.event('response.reasoning_summary_text.delta', { item_id: open.id, output_index: open.index, summary_index: 0, delta: delta.reasoning }),
      );
    }
    if (typeof delta.content === 'string' && delta.content !== '') {
      const open = this.ensure('message', frames);
      open.text += delta.content;
      frames.push(
        this.event('response.output_text.delta', { item_id: open.id, output_index: open.index, content_index: 0, delta: delta.content, logprobs: [] }),
      );
    }
    for (const call of delta.tool_calls ?? []) {
      let index = this.tools.get(call.index);
      if (index === undefined) {
        frames.push(...this.close('completed'));
        index = this.output.length;
        const id = itemId(this.ctx.id, 'fc', index);
        const item = functionCallItem(id, call.id ?? `call_${id}`, call.function?.name ?? '', '', 'in_progress');
        this.output.push(item);
        this.tools.set(call.index, index);
        this.open = { kind: 'tool', index, id, tool: call.index };
        frames.push(this.event('response.output_item.added', { output_index: index, item: { ...item } }));
      }
      const args = call.function?.arguments;
      if (typeof args === 'string' && args !== '') {
        // A late fragment of an earlier call (interleaved parallel calls) still lands in its item.
        const item = this.output[index] as FunctionCallItem;
        item.arguments += args;
        frames.push(this.event('response.function_call_arguments.delta', { item_id: item.id, output_index: index, delta: args }));
      }
    }
    return frames;
  }

  finish(usage: CostedUsage, finishReason: string | null): string[] {
    const frames = this.start();
    const outcome = outcomeOf(finishReason ?? this.lastFinishReason);
    // As chatToResponse: an answer without text and without calls still has an (empty) message.
    if (!this.sawMessage && this.tools.size === 0) this.ensure('message', frames);
    frames.push(...this.close(outcome.status === 'incomplete' ? 'incomplete' : 'completed'));
    this.final = buildResponse(this.ctx, { ...outcome, output: this.snapshot(), usage: responseUsage(usage), error: null });
    const type = outcome.status === 'incomplete' ? 'response.incomplete' : 'response.completed';
    frames.push(this.event(type, { response: this.final }));
    return frames;
  }

  /** `response.failed`: the items so far (an open one as incomplete) and the error. */
  error(body: GatewayErrorBody): string[] {
    const frames = this.start();
    const output = this.snapshot();
    if (this.open) {
      const item = output[this.open.index];
      if (item.type === 'message' || item.type === 'function_call') item.status = 'incomplete';
    }
    this.open = null;
    const code = typeof body.error.code === 'string' && body.error.code !== '' ? body.error.code : errorCodeOf(body.error.type);
    this.final = buildResponse(this.ctx, {
      status: 'failed',
      incomplete_details: null,
      output,
      usage: null,
      error: { code, message: body.error.message },
    });
    frames.push(this.event('response.failed', { response: this.final }));
    return frames;
  }

  /** The final response once finish() or error() ran; the response so far before that. */
  response(): ResponseObject {
    return this.final ?? buildResponse(this.ctx, { status: 'in_progress', incomplete_details: null, output: this.snapshot(), usage: null, error: null });
  }

  private start(): string[] {
    if (this.started) return [];
    this.started = true;
    const response = buildResponse(this.ctx, { status: 'in_progress', incomplete_details: null, output: [], usage: null, error: null });
    const frames = [this.event('response.created', { response }), this.event('response.in_progress', { response })];
    if (this.ctx.webSearch) frames.push(...this.searchEvents(this.ctx.webSearch));
    return frames;
  }

  /** The search, over before the answer starts, told as OpenAI tells its web_search tool's progress. */
  private searchEvents(run: WebSearchRun): string[] {
    const index = this.output.length;
    const item = webSearchCallItem(run, 'completed');
    this.output.push(item);
    const at = { item_id: item.id, output_index: index };
    return [
      this.event('response.output_item.added', { output_index: index, item: webSearchCallItem(run, 'in_progress') }),
      this.event('response.web_search_call.in_progress', at),
      this.event('response.web_search_call.searching', at),
      this.event('response.web_search_call.completed', at),
      this.event('response.output_item.done', { output_index: index, item }),
    ];
  }

  /** Makes a reasoning or message item the open one, closing another first. */
  private ensure<K extends 'reasoning' | 'message'>(kind: K, frames: string[]): Extract<Open, { kind: K }> {
    if (this.open?.kind === kind) return this.open as Extract<Open, { kind: K }>;
    frames.push(...this.close('completed'));
    const index = this.output.length;
    if (kind === 'reasoning') {
      const id = itemId(this.ctx.id, 'rs', index);
      this.output.push({ type: 'reasoning', id, summary: [] });
      this.open = { kind: 'reasoning', index, id, text: '' };
      frames.push(
        this.event('response.output_item.added', { output_index: index, item: { type: 'reasoning', id, summary: [] } }),
        this.event('response.reasoning_summary_part.added', {
          item_id: id,
          output_index: index,
          summary_index: 0,
          part: { type: 'summary_text', text: '' },
        }),
      );
    } else {
      const id = itemId(this.ctx.id, 'msg', index);
      const item: MessageItem = { type: 'message', id, status: 'in_progress', role: 'assistant', content: [] };
      this.output.push(item);
      this.sawMessage = true;
      this.open = { kind: 'message', index, id, text: '' };
      frames.push(
        this.event('response.output_item.added', { output_index: index, item: { ...item, content: [] } }),
        this.event('response.content_part.added', { item_id: id, output_index: index, content_index: 0, part: outputText('') }),
      );
    }
    return this.open as Extract<Open, { kind: K }>;
  }

  /** Ends the open item with its `.done` events; its final form replaces it in the output. */
  private close(status: 'completed' | 'incomplete'): string[] {
    const open = this.open;
    if (!open) return [];
    this.open = null;
    const { index, id } = open;
    const frames: string[] = [];
    let item: ResponseItem;
    if (open.kind === 'reasoning') {
      const part = { type: 'summary_text', text: open.text };
      frames.push(
        this.event('response.reasoning_summary_text.done', { item_id: id, output_index: index, summary_index: 0, text: open.text }),
        this.event('response.reasoning_summary_part.done', { item_id: id, output_index: index, summary_index: 0, part }),
      );
      item = reasoningItem(id, open.text);
    } else if (open.kind === 'message') {
      const annotations = annotationsOf(open.text, this.ctx.webSearch);
      const at = { item_id: id, output_index: index, content_index: 0 };
      frames.push(
        // Only the whole text says where it cites each result.
        ...annotations.map((annotation, i) => this.event('response.output_text.annotation.added', { ...at, annotation_index: i, annotation })),
        this.event('response.output_text.done', { ...at, text: open.text, logprobs: [] }),
        this.event('response.content_part.done', { ...at, part: outputText(open.text, annotations) }),
      );
      item = messageItem(id, open.text, status, annotations);
    } else {
      const call = this.output[index] as FunctionCallItem;
      frames.push(this.event('response.function_call_arguments.done', { item_id: id, output_index: index, name: call.name, arguments: call.arguments }));
      item = functionCallItem(id, call.call_id, call.name, call.arguments, status);
    }
    this.output[index] = item;
    frames.push(this.event('response.output_item.done', { output_index: index, item }));
    return frames;
  }

  /** A deep copy of the output, with the open item as it stands. */
  private snapshot(): ResponseItem[] {
    const items = structuredClone(this.output);
    const open = this.open;
    if (open?.kind === 'reasoning') items[open.index] = reasoningItem(open.id, open.text);
    if (open?.kind === 'message') items[open.index] = messageItem(open.id, open.text, 'in_progress');
    return items;
  }

  private event(type: string, fields: Json): string {
    return sseFrame({ type, sequence_number: this.sequence++, ...fields }, type);
  }
}

/** OpenAI's response error codes for the gateway's error types, when no code came with it. */
function errorCodeOf(type: string): string {
  return type === 'rate_limit_error' || type === 'insufficient_quota' ? 'rate_limit_exceeded' : 'server_error';
}
