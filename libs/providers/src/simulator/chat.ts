/**
 * The simulated chat model: a request and its directives become one Reply, rendered either as a
 * `chat.completion` or as `chat.completion.chunk`s. Both renderings come from the same Reply, so
 * a streamed answer always carries the same text and usage as the non-streamed one.
 */
import { isRecord } from '../json';
import { countChatPromptTokens, countTextTokens, truncateToTokens } from '../tokens';
import type { ChatChunk, ChatCompletion, ChatDelta, ChatUsage, ToolCall } from '../wire';
import type { SimDirectives } from './directives';
import { SimError } from './http';

export interface ChatRequest {
  model: string;
  messages: unknown[];
  stream: boolean;
  includeUsage: boolean;
  /** `max_completion_tokens`, else `max_tokens`. */
  maxTokens: number | undefined;
  /** `stop`: the text ends before the first of them (OpenAI allows up to 4). */
  stop: string[];
  /** `response_format`: JSON for `json_object`, an instance of the schema for `json_schema`. */
  responseFormat: { type: 'json_object' } | { type: 'json_schema'; schema: unknown } | null;
}

export interface Reply {
  reasoning: string;
  /** null when the reply is a tool call. */
  content: string | null;
  toolCall: ToolCall | null;
  finishReason: 'stop' | 'length' | 'tool_calls';
  /** The stop sequence that ended the text (vLLM's `stop_reason`, Anthropic's `stop_sequence`); null otherwise. */
  stopSequence: string | null;
  usage: ChatUsage;
}

export interface ReplyMeta {
  id: string;
  created: number;
  model: string;
}

export function parseChatRequest(body: unknown): ChatRequest {
  if (!isRecord(body)) throw new SimError(400, 'request body must be a JSON object');
  if (typeof body.model !== 'string' || body.model === '') throw new SimError(400, 'model is required', 'model');
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    throw new SimError(400, 'messages must be a non-empty array', 'messages');
  }
  const cap = body.max_completion_tokens ?? body.max_tokens;
  if (cap !== undefined && cap !== null && !(Number.isInteger(cap) && (cap as number) >= 1)) {
    throw new SimError(400, 'max_tokens must be a positive integer', body.max_completion_tokens === undefined ? 'max_tokens' : 'max_completion_tokens');
  }
  const stop =
    typeof body.stop === 'string' ? [body.stop] : Array.isArray(body.stop) ? body.stop.filter((s): s is string => typeof s === 'string' && s !== '') : [];
  const format = isRecord(body.response_format) ? body.response_format : null;
  const responseFormat =
    format?.type === 'json_object'
      ? ({ type: 'json_object' } as const)
      : format?.type === 'json_schema' && isRecord(format.json_schema)
        ? ({ type: 'json_schema', schema: format.json_schema.schema ?? {} } as const)
        : null;
  return {
    model: body.model,
    messages: body.messages,
    stream: body.stream === true,
    includeUsage: isRecord(body.stream_options) && body.stream_options.include_usage === true,
    maxTokens: typeof cap === 'number' ? cap : undefined,
    stop,
    responseFormat,
  };
}

/**
 * The smallest JSON value of a JSON Schema's shape, with `text` for strings, so structured
 * outputs (`client.chat.completions.parse()`) parse and validate through the gateway: objects
 * get every property (required or not), arrays `minItems` items, enums and consts their first
 * value, unions their first branch.
 */
export function instanceOf(schema: unknown, text: string, defs: Record<string, unknown> = {}, depth = 0): unknown {
  if (!isRecord(schema) || depth > 16) return null;
  const local = { ...defs, ...(isRecord(schema.$defs) ? schema.$defs : {}), ...(isRecord(schema.definitions) ? schema.definitions : {}) };
  if (typeof schema.$ref === 'string') return instanceOf(local[schema.$ref.replace(/^#\/(\$defs|definitions)\//, '')], text, local, depth + 1);
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  for (const union of ['anyOf', 'oneOf', 'allOf'] as const) {
    if (Array.isArray(schema[union]) && schema[union].length > 0) return instanceOf(schema[union][0], text, local, depth + 1);
  }
  const type = Array.isArray(schema.type) ? (schema.type.find((t) => t !== 'null') ?? 'null') : schema.type;
  switch (type) {
    case 'object': {
      const properties = isRecord(schema.properties) ? schema.properties : {};
      return Object.fromEntries(Object.entries(properties).map(([name, sub]) => [name, instanceOf(sub, text, local, depth + 1)]));
    }
    case 'array': {
      const n = Number.isInteger(schema.minItems) ? (schema.minItems as number) : 0;
      return Array.from({ length: n }, () => instanceOf(schema.items, text, local, depth + 1));
    }
    case 'string':
      return text;
    case 'integer':
    case 'number':
      return typeof schema.minimum === 'number' ? schema.minimum : 0;
    case 'boolean':
      return true;
    case 'null':
      return null;
    default:
      return isRecord(schema.properties) ? instanceOf({ ...schema, type: 'object' }, text, local, depth + 1) : null;
  }
}

/** `text` up to the first stop sequence, and the one that cut it (null when none did). */
function untilStop(text: string, stop: readonly string[]): { text: string; matched: string | null } {
  let end = text.length;
  let matched: string | null = null;
  for (const s of stop) {
    const at = text.indexOf(s);
    if (at >= 0 && (at < end || matched === null)) {
      end = at;
      matched = s;
    }
  }
  return { text: text.slice(0, end), matched };
}

/** Text of the last user message; an array content contributes its text parts. */
export function lastUserText(messages: readonly unknown[]): string {
  const last = messages.findLast((m) => isRecord(m) && m.role === 'user');
  if (!isRecord(last)) return '';
  if (typeof last.content === 'string') return last.content;
  if (!Array.isArray(last.content)) return '';
  return last.content
    .filter((part) => isRecord(part) && part.type === 'text' && typeof part.text === 'string')
    .map((part) => (part as { text: string }).text)
    .join('\n');
}

export function planReply(request: ChatRequest, directives: SimDirectives, echo: string, toolCallId: string): Reply {
  const budget = request.maxTokens ?? Number.POSITIVE_INFINITY;
  const reasoning = words('think', Math.min(directives.reasoning_tokens ?? 0, budget));
  const reasoningTokens = countTextTokens(reasoning);
  const promptTokens = countChatPromptTokens(request.messages);
  const usage = (outputTokens: number): ChatUsage => ({
    prompt_tokens: promptTokens,
    completion_tokens: reasoningTokens + outputTokens,
    total_tokens: promptTokens + reasoningTokens + outputTokens,
    prompt_tokens_details: { cached_tokens: Math.min(directives.cached_tokens ?? 0, promptTokens) },
    completion_tokens_details: { reasoning_tokens: reasoningTokens },
  });

  if (directives.tool_call) {
    const fn = { name: directives.tool_call.name, arguments: JSON.stringify(directives.tool_call.arguments ?? {}) };
    return {
      reasoning,
      content: null,
      toolCall: { id: toolCallId, type: 'function', function: fn },
      finishReason: 'tool_calls',
      stopSequence: null,
      usage: usage(countTextTokens(fn.name) + countTextTokens(fn.arguments)),
    };
  }
  const format = request.responseFormat;
  const generated = directives.malformed_json
    ? `{"answer": ${JSON.stringify(echo)}, "items": [1, 2,`
    : directives.completion_tokens !== undefined
      ? words('token', directives.completion_tokens)
      : format?.type === 'json_schema'
        ? JSON.stringify(instanceOf(format.schema, `Echo: ${echo}`))
        : format?.type === 'json_object'
          ? JSON.stringify({ answer: `Echo: ${echo}` })
          : `Echo: ${echo}`;
  // A stop sequence ends the text where it would begin, as OpenAI's do (it is not part of it).
  const { text: wanted, matched } = untilStop(generated, request.stop);
  const content = truncateToTokens(wanted, budget - reasoningTokens);
  return {
    reasoning,
    content,
    toolCall: null,
    finishReason: content === wanted ? 'stop' : 'length',
    stopSequence: content === wanted ? matched : null,
    usage: usage(countTextTokens(content)),
  };
}

export function completion(reply: Reply, meta: ReplyMeta): ChatCompletion {
  return {
    id: meta.id,
    object: 'chat.completion',
    created: meta.created,
    model: meta.model,
    system_fingerprint: 'fp_sim',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: reply.content,
          refusal: null,
          ...(reply.reasoning ? { reasoning: reply.reasoning } : {}),
          ...(reply.toolCall ? { tool_calls: [reply.toolCall] } : {}),
        },
        logprobs: null,
        finish_reason: reply.finishReason,
        ...stopReason(reply),
      },
    ],
    usage: reply.usage,
  };
}

/**
 * The stream of a reply in three parts, so the server can cut it after some output: the role
 * chunk, one chunk per piece of output (reasoning, then content or the tool call), and the end
 * (finish chunk, then the usage chunk when it was asked for).
 */
export function chunks(reply: Reply, meta: ReplyMeta, includeUsage: boolean) {
  const chunk = (delta: ChatDelta, finishReason: string | null = null): ChatChunk => ({
    id: meta.id,
    object: 'chat.completion.chunk',
    created: meta.created,
    model: meta.model,
    system_fingerprint: 'fp_sim',
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason, ...(finishReason ? stopReason(reply) : {}) }],
    ...(includeUsage ? { usage: null } : {}),
  });

  const output = pieces(reply.reasoning).map((reasoning) => chunk({ reasoning }));
  if (reply.toolCall) {
    const { id, type, function: fn } = reply.toolCall;
    output.push(chunk({ tool_calls: [{ index: 0, id, type, function: { name: fn.name, arguments: '' } }] }));
    for (const part of argumentPieces(fn.arguments)) {
      output.push(chunk({ tool_calls: [{ index: 0, function: { arguments: part } }] }));
    }
  } else {
    output.push(...pieces(reply.content ?? '').map((content) => chunk({ content })));
  }

  const end = [chunk({}, reply.finishReason)];
  if (includeUsage) end.push({ ...chunk({}), choices: [], usage: reply.usage });
  return { role: chunk({ role: 'assistant', content: reply.content === null ? null : '' }), output, end };
}

/**
 * Which stop sequence ended the text, as vLLM's OpenAI-compatible server reports it on the
 * choice (`stop_reason`, vllm-project/vllm#2976): OpenAI's `finish_reason` is "stop" for a stop
 * sequence and a natural end alike. Only on a matched sequence, so other answers keep OpenAI's shape.
 */
function stopReason(reply: Reply): { stop_reason?: string } {
  return reply.stopSequence === null ? {} : { stop_reason: reply.stopSequence };
}

/** `n` tokens of text: every ` word` is one o200k token. */
function words(word: string, n: number): string {
  return n === 0 ? '' : word + ` ${word}`.repeat(n - 1);
}

/** Word-sized pieces whose concatenation is exactly `text`: one stream chunk each. */
export function pieces(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [];
}

/** Tool call arguments streamed in pieces of 8 characters. */
export function argumentPieces(json: string): string[] {
  return json.match(/[\s\S]{1,8}/gu) ?? [];
}
