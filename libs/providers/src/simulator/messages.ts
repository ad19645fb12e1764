/**
 * The Anthropic Messages rendering of the simulated chat model. A Messages request is read back
 * into the OpenAI messages the chat model plans from (planReply), so `/v1/messages` answers with
 * the same text, tool call and token counts as `/v1/chat/completions` does for the conversation
 * the gateway translated (tool arguments are re-serialised, so whitespace in them may count
 * differently). The Reply is then rendered as a `message` or as its stream events.
 */
import { isRecord } from '../json';
import type { Reply } from './chat';
import { argumentPieces, pieces, type ChatRequest } from './chat';
import { SimError } from './http';

type Json = Record<string, unknown>;

export interface MessageMeta {
  id: string;
  model: string;
  toolUseId: string;
}

/** One stream event; `delta` marks the output events `cut_after_chunks` counts. */
export interface MessageEvent {
  event: string;
  data: Json;
  delta: boolean;
}

const STOP_REASONS: Record<Reply['finishReason'], string> = { stop: 'end_turn', length: 'max_tokens', tool_calls: 'tool_use' };
/** Real signatures are opaque and checked by Anthropic on the way back; nothing checks this one. */
const SIGNATURE = 'sim-signature';

const ANTHROPIC_ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

export function anthropicErrorBody(error: SimError): Json {
  const type = ANTHROPIC_ERROR_TYPES[error.status] ?? (error.status >= 500 ? 'api_error' : 'invalid_request_error');
  return { type: 'error', error: { type, message: error.message } };
}

/** The headers the real API insists on, checked before the body is read. */
export function checkAnthropicHeaders(headers: Record<string, string | string[] | undefined>): void {
  if (!headers['x-api-key']) throw new SimError(401, 'x-api-key header is required');
  if (!headers['anthropic-version']) throw new SimError(400, 'anthropic-version header is required');
}

export function parseMessagesRequest(body: unknown): ChatRequest {
  if (!isRecord(body)) throw new SimError(400, 'request body must be a JSON object');
  if (typeof body.model !== 'string' || body.model === '') throw new SimError(400, 'model: Field required');
  if (!(Number.isInteger(body.max_tokens) && (body.max_tokens as number) >= 1)) {
    throw new SimError(400, 'max_tokens: a positive integer is required');
  }
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw new SimError(400, 'messages: at least one message is required');
  for (const [i, m] of body.messages.entries()) {
    if (!isRecord(m) || (m.role !== 'user' && m.role !== 'assistant') || !(typeof m.content === 'string' || Array.isArray(m.content))) {
      throw new SimError(400, `messages.${i}: expected {role: "user" | "assistant", content: string | blocks}`);
    }
  }
  if (body.system !== undefined && typeof body.system !== 'string' && !Array.isArray(body.system)) {
    throw new SimError(400, 'system: expected a string or text blocks');
  }
  return {
    model: body.model,
    messages: toOpenAiMessages(body.system, body.messages as Json[]),
    stream: body.stream === true,
    includeUsage: true,
    maxTokens: body.max_tokens as number,
    stop: Array.isArray(body.stop_sequences) ? body.stop_sequences.filter((s): s is string => typeof s === 'string' && s !== '') : [],
    responseFormat: outputFormatOf(body),
  };
}

/** Structured outputs: `output_config.format` (or the beta's `output_format`), `{type: "json_schema", schema}`. */
function outputFormatOf(body: Json): ChatRequest['responseFormat'] {
  const format = isRecord(body.output_config) && body.output_config.format != null ? body.output_config.format : body.output_format;
  if (format === undefined || format === null) return null;
  if (!isRecord(format) || format.type !== 'json_schema' || !isRecord(format.schema)) {
    throw new SimError(400, 'output_config.format: expected {type: "json_schema", schema}');
  }
  return { type: 'json_schema', schema: format.schema };
}

/** The OpenAI conversation a Messages request came from, as the gateway's adapter builds it. */
function toOpenAiMessages(system: unknown, messages: Json[]): unknown[] {
  const out: unknown[] = [];
  if (system !== undefined) out.push({ role: 'system', content: typeof system === 'string' ? system : parts(system as unknown[]) });
  for (const { role, content } of messages) {
    if (typeof content === 'string') {
      out.push({ role, content });
      continue;
    }
    const blocks = (content as unknown[]).filter(isRecord);
    if (role === 'assistant') {
      const text = blocks.filter((b) => b.type === 'text').map((b) => String(b.text));
      const calls = blocks
        .filter((b) => b.type === 'tool_use')
        .map((b) => ({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } }));
      out.push({ role, content: text.length > 0 ? text.join('') : null, ...(calls.length > 0 ? { tool_calls: calls } : {}) });
      continue;
    }
    for (const result of blocks.filter((b) => b.type === 'tool_result')) {
      const c = result.content;
      out.push({ role: 'tool', tool_call_id: result.tool_use_id, content: Array.isArray(c) ? parts(c) : (c ?? '') });
    }
    const rest = blocks.filter((b) => b.type !== 'tool_result');
    if (rest.length > 0) out.push({ role, content: parts(rest) });
  }
  return out;
}

/** Text blocks as text parts; any other block as a non-text part (a fixed token allowance). */
function parts(blocks: unknown[]): Json[] {
  return blocks.filter(isRecord).map((b) => (b.type === 'text' ? { type: 'text', text: b.text } : { type: 'image_url', image_url: { url: 'block' } }));
}

function blocksOf(reply: Reply, meta: MessageMeta): Json[] {
  const blocks: Json[] = [];
  if (reply.reasoning) blocks.push({ type: 'thinking', thinking: reply.reasoning, signature: SIGNATURE });
  if (reply.toolCall) {
    const { name, arguments: args } = reply.toolCall.function;
    blocks.push({ type: 'tool_use', id: meta.toolUseId, name, input: JSON.parse(args) });
  } else if (reply.content) {
    blocks.push({ type: 'text', text: reply.content });
  }
  return blocks;
}

/** Anthropic's input_tokens leave out the cache reads, which are reported apart. */
function usageOf(reply: Reply, outputTokens: number): Json {
  const cached = reply.usage.prompt_tokens_details?.cached_tokens ?? 0;
  return {
    input_tokens: reply.usage.prompt_tokens - cached,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
    output_tokens: outputTokens,
  };
}

/** Anthropic's stop reason, and the stop sequence that matched (`stop_reason: "stop_sequence"`). */
function stopOf(reply: Reply): { stop_reason: string; stop_sequence: string | null } {
  if (reply.stopSequence !== null) return { stop_reason: 'stop_sequence', stop_sequence: reply.stopSequence };
  return { stop_reason: STOP_REASONS[reply.finishReason], stop_sequence: null };
}

export function message(reply: Reply, meta: MessageMeta): Json {
  return {
    id: meta.id,
    type: 'message',
    role: 'assistant',
    model: meta.model,
    content: blocksOf(reply, meta),
    ...stopOf(reply),
    usage: usageOf(reply, reply.usage.completion_tokens),
  };
}

/**
 * The stream in three parts, so the server can cut it after some output: `message_start` and a
 * `ping`; each content block (start, one delta per piece, stop); `message_delta` with the stop
 * reason and output tokens, then `message_stop`.
 */
export function messageEvents(reply: Reply, meta: MessageMeta): { start: MessageEvent[]; body: MessageEvent[]; end: MessageEvent[] } {
  const ev = (event: string, data: Json, delta = false): MessageEvent => ({ event, data: { type: event, ...data }, delta });
  const start = [
    ev('message_start', { message: { ...message(reply, meta), content: [], stop_reason: null, stop_sequence: null, usage: usageOf(reply, 0) } }),
    ev('ping', {}),
  ];
  const body = blocksOf(reply, meta).flatMap((block, index): MessageEvent[] => {
    const open = (content_block: Json) => ev('content_block_start', { index, content_block });
    const delta = (d: Json) => ev('content_block_delta', { index, delta: d }, true);
    const close = ev('content_block_stop', { index });
    if (block.type === 'thinking') {
      const deltas = pieces(String(block.thinking)).map((thinking) => delta({ type: 'thinking_delta', thinking }));
      const signature = ev('content_block_delta', { index, delta: { type: 'signature_delta', signature: SIGNATURE } });
      return [open({ type: 'thinking', thinking: '', signature: '' }), ...deltas, signature, close];
    }
    if (block.type === 'tool_use') {
      const deltas = argumentPieces(JSON.stringify(block.input)).map((partial_json) => delta({ type: 'input_json_delta', partial_json }));
      return [open({ ...block, input: {} }), ...deltas, close];
    }
    return [open({ type: 'text', text: '' }), ...pieces(String(block.text)).map((text) => delta({ type: 'text_delta', text })), close];
  });
  const end = [ev('message_delta', { delta: stopOf(reply), usage: { output_tokens: reply.usage.completion_tokens } }), ev('message_stop', {})];
  return { start, body, end };
}

/** The body events up to and including the `n`th delta (all of them when there are fewer). */
export function upToDeltas(body: MessageEvent[], n: number): MessageEvent[] {
  let seen = 0;
  for (const [i, event] of body.entries()) {
    if (seen === n) return body.slice(0, i);
    if (event.delta) seen++;
  }
  return body;
}
