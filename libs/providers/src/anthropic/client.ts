/**
 * Anthropic's native Messages API (`POST {base}/messages`). The gateway speaks OpenAI chat
 * completions throughout, so this folder translates at its edge: the request into a
 * Messages request, the answer and the stream events back into the OpenAI shapes the chat
 * service already handles. Transport (undici on a shared keep-alive pool, timeouts, error
 * classification, SSE parsing) is the one the OpenAI-compatible adapter uses.
 *
 * Not carried over: `n`, `seed`, penalties, logprobs, `response_format` `json_object` (the
 * Messages API has no equivalent; `json_schema` is its structured outputs); thinking signatures,
 * so an earlier turn's reasoning is not sent back.
 */
import { isRecord } from '../json';
import { mapParameters, type ParameterConfig } from '../operations';
import { excludesReasoning } from '../provider';
import { ProviderError } from '../provider-error';
import type { SseEvent } from '../sse';
import { countTextTokens } from '../tokens';
import { DEFAULT_TIMEOUT_MS, invalidResponse, parseJson } from '../transport';
import type { ChatChunk, ChatCompletion, ChatDelta, ChatUsage, ToolCall } from '../wire';

export const ANTHROPIC_VERSION = '2023-06-01';
/** The Messages API requires `max_tokens`; OpenAI callers may leave it out. */
export const DEFAULT_MAX_TOKENS = 4096;
/** The smallest thinking budget the API accepts. */
export const MIN_THINKING_BUDGET = 1024;

export interface AnthropicOptions {
  /** Including the version prefix, e.g. `https://api.anthropic.com/v1`. */
  baseUrl: string;
  apiKey: string;
  /** As for the OpenAI-compatible adapter: whole call, or idle time while streaming. Default 120 s. */
  timeoutMs?: number;
  headers?: Record<string, string>;
  /** `anthropic-version` header. */
  version?: string;
}

type Json = Record<string, unknown>;

/** Where the Messages API is and how it is called, once per client. */
export interface AnthropicConnection {
  url: string;
  headers: Record<string, string>;
  timeoutMs: number;
}

export function anthropicConnection(options: AnthropicOptions): AnthropicConnection {
  return {
    url: `${options.baseUrl.replace(/\/+$/, '')}/messages`,
    headers: {
      ...options.headers,
      'x-api-key': options.apiKey,
      'anthropic-version': options.version ?? ANTHROPIC_VERSION,
      'content-type': 'application/json',
    },
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
  };
}

// ---------------------------------------------------------------- request: OpenAI -> Messages

/**
 * The chat fields the Messages API has an equivalent for: a string renames the field, a function
 * returns the Messages fields it becomes (undefined: none). `messages`, `max_tokens` and the
 * reasoning fields combine several inputs and are handled in toMessagesRequest.
 */
export const ANTHROPIC_CHAT_PARAMETERS: ParameterConfig<'chat'> = {
  model: 'model',
  temperature: 'temperature',
  top_p: 'top_p',
  top_k: 'top_k',
  stop: (v) => ({ stop_sequences: typeof v === 'string' ? [v] : v }),
  // Anthropic's only metadata is an opaque end-user id; OpenAI's free-form `metadata` has no home.
  user: (v) => ({ metadata: { user_id: v } }),
  safety_identifier: (v) => ({ metadata: { user_id: v } }),
  tools: (v) => (Array.isArray(v) ? { tools: v.map(toTool) } : undefined),
  tool_choice: (v, body) => ({ tool_choice: toToolChoice(v, body.parallel_tool_calls === false) }),
  parallel_tool_calls: (v, body) =>
    v === false && body.tool_choice === undefined ? { tool_choice: { type: 'auto', disable_parallel_tool_use: true } } : undefined,
  // Anthropic's structured outputs (issue 41 item 2): the schema, without OpenAI's name and strict.
  response_format: (v) =>
    isRecord(v) && v.type === 'json_schema' && isRecord(v.json_schema) && isRecord(v.json_schema.schema)
      ? { output_config: { format: { type: 'json_schema', schema: v.json_schema.schema } } }
      : undefined,
};

/** OpenRouter's shares of max_tokens per reasoning effort, for a budget the caller did not give. */
const EFFORT_SHARE: Record<string, number> = { minimal: 0.1, low: 0.2, medium: 0.5, high: 0.8 };

export interface MessagesRequest {
  request: Json;
  /** `reasoning.exclude` / `include_reasoning: false`: think, but do not return the thinking. */
  excludeReasoning: boolean;
}

export function toMessagesRequest(body: Json): MessagesRequest {
  // The Messages API refuses null where OpenAI reads it as the default: such a field is left out.
  const given = Object.fromEntries(Object.entries(body).filter(([, value]) => value !== null));
  const request: Json = mapParameters(ANTHROPIC_CHAT_PARAMETERS, given, body);
  const { system, messages } = toMessages(Array.isArray(body.messages) ? body.messages : []);
  if (system.length > 0) request.system = system;
  request.messages = messages;
  const cap = body.max_completion_tokens ?? body.max_tokens;
  request.max_tokens = typeof cap === 'number' ? cap : DEFAULT_MAX_TOKENS;
  const thinking = thinkingOf(body, request.max_tokens as number);
  if (thinking) request.thinking = thinking;
  return { request, excludeReasoning: excludesReasoning(body) };
}

/**
 * `reasoning` (`max_tokens`, `effort`, `enabled`), `reasoning_effort` or `include_reasoning: true`
 * turn thinking on. The budget must be at least 1024 and below max_tokens, which caps thinking
 * plus text as OpenAI's cap does; the cap is never raised (the gateway's hold is computed from
 * it), so a cap too small for the minimum budget means no thinking.
 */
function thinkingOf(body: Json, maxTokens: number): Json | undefined {
  const reasoning = isRecord(body.reasoning) ? body.reasoning : undefined;
  const effort = reasoning?.effort ?? body.reasoning_effort;
  if (reasoning?.enabled === false || effort === 'none') return undefined;
  if (!reasoning && effort === undefined && body.include_reasoning !== true) return undefined;
  const wanted =
    typeof reasoning?.max_tokens === 'number'
      ? reasoning.max_tokens
      : Math.floor(maxTokens * (EFFORT_SHARE[typeof effort === 'string' ? effort : 'medium'] ?? EFFORT_SHARE.medium));
  const budget = Math.min(Math.max(wanted, MIN_THINKING_BUDGET), maxTokens - 1);
  return budget >= MIN_THINKING_BUDGET ? { type: 'enabled', budget_tokens: budget } : undefined;
}

/**
 * System and developer messages become `system`; the rest alternates user/assistant turns, with
 * tool results as `tool_result` blocks of a user turn. Consecutive messages of one role merge
 * into one turn, which keeps tool results first in the turn after the tool calls, as required.
 */
function toMessages(input: unknown[]): { system: Json[]; messages: Json[] } {
  const system: Json[] = [];
  const turns: Array<{ role: 'user' | 'assistant'; content: Json[] }> = [];
  const add = (role: 'user' | 'assistant', blocks: Json[]) => {
    if (blocks.length === 0) return;
    const last = turns.at(-1);
    if (last?.role === role) last.content.push(...blocks);
    else turns.push({ role, content: blocks });
  };
  for (const message of input) {
    if (!isRecord(message)) continue;
    switch (message.role) {
      case 'system':
      case 'developer':
        system.push(...contentBlocks(message.content));
        break;
      case 'user':
        add('user', contentBlocks(message.content));
        break;
      case 'assistant':
        add('assistant', [...contentBlocks(message.content), ...toolUses(message.tool_calls)]);
        break;
      case 'tool':
        add('user', [{ type: 'tool_result', tool_use_id: message.tool_call_id, content: contentBlocks(message.content) }]);
        break;
      default:
        throw rejected(`the Anthropic adapter cannot send a message with role ${JSON.stringify(message.role)}`);
    }
  }
  return { system, messages: turns };
}

/** Text and images; empty text is left out (the API refuses empty text blocks). */
function contentBlocks(content: unknown): Json[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }];
  if (!Array.isArray(content)) return [];
  return content.flatMap((part): Json[] => {
    if (!isRecord(part)) return [];
    const cache = isRecord(part.cache_control) ? { cache_control: part.cache_control } : {};
    if (part.type === 'text') return part.text === '' ? [] : [{ type: 'text', text: part.text, ...cache }];
    if (part.type === 'image_url' && isRecord(part.image_url) && typeof part.image_url.url === 'string') {
      return [{ type: 'image', source: sourceOf(part.image_url.url), ...cache }];
    }
    throw rejected(`the Anthropic adapter cannot send a content part of type ${JSON.stringify(part.type)}`);
  });
}

/** A data URL is sent inline (base64); anything else by URL, which Anthropic fetches itself. */
function sourceOf(url: string): Json {
  const data = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  return data ? { type: 'base64', media_type: data[1], data: data[2] } : { type: 'url', url };
}

function toolUses(calls: unknown): Json[] {
  if (!Array.isArray(calls)) return [];
  return calls.filter(isRecord).map((call) => {
    const fn = isRecord(call.function) ? call.function : {};
    let input: unknown;
    try {
      input = JSON.parse(typeof fn.arguments === 'string' && fn.arguments !== '' ? fn.arguments : '{}');
    } catch {
      throw rejected(`tool call ${String(call.id)}: arguments are not JSON, and Anthropic needs an object`);
    }
    return { type: 'tool_use', id: call.id, name: fn.name, input };
  });
}

function toTool(tool: unknown): Json {
  const fn = isRecord(tool) && isRecord(tool.function) ? tool.function : {};
  return {
    name: fn.name,
    ...(typeof fn.description === 'string' ? { description: fn.description } : {}),
    // Required by the API; OpenAI lets a tool without parameters through.
    input_schema: isRecord(fn.parameters) ? fn.parameters : { type: 'object', properties: {} },
  };
}

function toToolChoice(choice: unknown, serial: boolean): Json {
  const parallel = serial ? { disable_parallel_tool_use: true } : {};
  if (choice === 'none') return { type: 'none' };
  if (choice === 'required') return { type: 'any', ...parallel };
  if (isRecord(choice) && isRecord(choice.function)) return { type: 'tool', name: choice.function.name, ...parallel };
  return { type: 'auto', ...parallel };
}

/** A request this adapter cannot express: a 400, so no other provider is tried with it in vain. */
function rejected(message: string): ProviderError {
  return new ProviderError({ kind: 'http', status: 400, message });
}

// ------------------------------------------------------------- answers: Messages -> OpenAI

const FINISH_REASONS: Record<string, string> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  pause_turn: 'stop',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  tool_use: 'tool_calls',
  refusal: 'content_filter',
};

const finishReason = (stop: unknown) => (typeof stop === 'string' ? (FINISH_REASONS[stop] ?? 'stop') : null);

/**
 * The stop sequence Anthropic matched, as vLLM's OpenAI server reports it (`stop_reason` on the
 * choice): OpenAI's finish_reason says only "stop", and the Messages interface answers with it.
 */
const matchedStop = (stop: unknown, sequence: unknown): { stop_reason?: string } =>
  stop === 'stop_sequence' && typeof sequence === 'string' ? { stop_reason: sequence } : {};

export interface TranslateOptions {
  excludeReasoning?: boolean;
}

export function toChatCompletion(message: Json, options: TranslateOptions = {}): ChatCompletion {
  const blocks = (message.content as unknown[]).filter(isRecord);
  const text = blocks.filter((b) => b.type === 'text').map((b) => String(b.text ?? ''));
  const thinking = blocks
    .filter((b) => b.type === 'thinking')
    .map((b) => String(b.thinking ?? ''))
    .join('');
  const toolCalls: ToolCall[] = blocks
    .filter((b) => b.type === 'tool_use')
    .map((b) => ({ id: String(b.id), type: 'function', function: { name: String(b.name), arguments: JSON.stringify(b.input ?? {}) } }));
  return {
    id: String(message.id),
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: String(message.model),
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          // OpenAI's convention: null content for a pure tool call, a string otherwise.
          content: text.length > 0 ? text.join('') : toolCalls.length > 0 ? null : '',
          refusal: null,
          ...(thinking && !options.excludeReasoning ? { reasoning: thinking } : {}),
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
        },
        logprobs: null,
        finish_reason: finishReason(message.stop_reason),
        ...matchedStop(message.stop_reason, message.stop_sequence),
      },
    ],
    usage: toChatUsage(message.usage, thinking),
  };
}

/**
 * Anthropic counts cache reads and writes apart from `input_tokens`; OpenAI's prompt_tokens
 * includes them, with the reads as `cached_tokens` (billed at the cached price; writes at the
 * input price, the catalog having no cache-write price). Thinking is inside `output_tokens`
 * and not reported apart, so reasoning_tokens is an estimate from the thinking text.
 */
export function toChatUsage(usage: unknown, thinking: string): ChatUsage {
  const u = isRecord(usage) ? usage : {};
  const input = count(u.input_tokens);
  const cacheRead = count(u.cache_read_input_tokens);
  const cacheWrite = count(u.cache_creation_input_tokens);
  const output = count(u.output_tokens);
  const prompt = input + cacheRead + cacheWrite;
  return {
    prompt_tokens: prompt,
    completion_tokens: output,
    total_tokens: prompt + output,
    prompt_tokens_details: { cached_tokens: cacheRead, cache_write_tokens: cacheWrite },
    completion_tokens_details: { reasoning_tokens: thinking ? Math.min(countTextTokens(thinking), output) : 0 },
  };
}

/**
 * Messages stream events as OpenAI chunks: the role chunk at `message_start`, one chunk per
 * delta, the finish chunk at `message_delta`, the usage chunk at `message_stop`. A stream that
 * ends before `message_stop` throws a `network` ProviderError after what arrived; an `error`
 * event throws an `http` one. `ping`, `content_block_stop`, signatures and event types added
 * later are skipped, as Anthropic asks clients to do.
 */
export async function* chatChunks(events: AsyncIterable<SseEvent>, options: TranslateOptions = {}): AsyncGenerator<ChatChunk> {
  let id = '';
  let model = '';
  const created = Math.floor(Date.now() / 1000);
  const usage: Json = {};
  let thinking = '';
  /** Content block index -> OpenAI tool call index. */
  const tools = new Map<number, number>();
  const chunk = (delta: ChatDelta, finish: string | null = null): ChatChunk => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
  });
  const addUsage = (u: unknown) => {
    // message_delta carries cumulative counts; a null member means "unchanged".
    if (isRecord(u)) for (const [k, v] of Object.entries(u)) if (typeof v === 'number') usage[k] = v;
  };

  for await (const event of events) {
    const data = parseJson(event.data);
    if (!isRecord(data)) throw invalidResponse('stream event is not a JSON object', event.data);
    const delta = isRecord(data.delta) ? data.delta : {};
    const index = typeof data.index === 'number' ? data.index : -1;
    switch (data.type ?? event.event) {
      case 'message_start': {
        const message = isRecord(data.message) ? data.message : {};
        id = String(message.id ?? '');
        model = String(message.model ?? '');
        addUsage(message.usage);
        yield chunk({ role: 'assistant', content: '' });
        break;
      }
      case 'content_block_start': {
        const block = isRecord(data.content_block) ? data.content_block : {};
        if (block.type === 'tool_use') {
          tools.set(index, tools.size);
          const fn = { name: String(block.name), arguments: '' };
          yield chunk({ tool_calls: [{ index: tools.size - 1, id: String(block.id), type: 'function', function: fn }] });
        } else if (block.type === 'text' && typeof block.text === 'string' && block.text !== '') {
          yield chunk({ content: block.text });
        }
        break;
      }
      case 'content_block_delta':
        if (delta.type === 'text_delta') yield chunk({ content: String(delta.text) });
        else if (delta.type === 'input_json_delta' && delta.partial_json !== '') {
          yield chunk({ tool_calls: [{ index: tools.get(index) ?? 0, function: { arguments: String(delta.partial_json) } }] });
        } else if (delta.type === 'thinking_delta') {
          thinking += String(delta.thinking);
          if (!options.excludeReasoning) yield chunk({ reasoning: String(delta.thinking) });
        }
        break;
      case 'message_delta': {
        addUsage(data.usage);
        const finish = chunk({}, finishReason(delta.stop_reason) ?? 'stop');
        finish.choices[0] = { ...finish.choices[0], ...matchedStop(delta.stop_reason, delta.stop_sequence) };
        yield finish;
        break;
      }
      case 'message_stop':
        yield { ...chunk({}), choices: [], usage: toChatUsage(usage, thinking) };
        return;
      case 'error':
        throw streamedError(data);
    }
  }
  throw new ProviderError({ kind: 'network', status: 502, message: 'upstream stream ended before message_stop' });
}

/** HTTP statuses of Anthropic's error types, for an error that arrives inside a 200 stream. */
const ERROR_STATUS: Record<string, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
};

function streamedError(data: Json): ProviderError {
  const error = isRecord(data.error) ? data.error : {};
  const status = (typeof error.type === 'string' ? ERROR_STATUS[error.type] : undefined) ?? 502;
  const message = typeof error.message === 'string' ? error.message : 'upstream reported an error mid-stream';
  return new ProviderError({ kind: 'http', status, message, upstreamBody: data });
}

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}
