/**
 * Anthropic's Messages API (`POST /v1/messages`, `POST /v1/messages/count_tokens`) on top of the
 * chat pipeline: the request becomes an OpenAI chat-completions body, the answer (a completion
 * or a stream of chunks) becomes a Messages `message` or Anthropic's SSE events. This is the
 * reverse of libs/providers/src/anthropic.ts, which sends OpenAI requests to Anthropic upstreams.
 *
 * The web search server tool maps to the chat pipeline's `web` plugin (spec 4.3): its one search
 * comes back as Anthropic's `server_tool_use` and `web_search_tool_result` blocks, with citations
 * on the text that cites a result.
 *
 * Not carried over: thinking signatures (the gateway cannot verify or produce them, so earlier
 * thinking is dropped and new thinking blocks carry an empty signature), other server tools
 * (web fetch, code execution...), Files API sources, citations of documents, `service_tier`,
 * `container`, `mcp_servers`.
 */
import { countChatPromptTokens, countTextTokens, isRecord, MIN_THINKING_BUDGET } from '@svc/providers';
import type { ChatChunk, ChatCompletion, ToolCall } from '@svc/providers';
import { urlCitations, type WebSearchRun } from './web-search';
import {
  cachedTokens,
  cacheWriteTokens,
  count,
  defined,
  invalid,
  optionalBoolean,
  optionalNumber,
  optionalPositiveInt,
  requireBody,
  requireString,
  sseFrame,
  streamFields,
  toolsOf,
  type ChatMessage,
  type ChatRequestBody,
  type CostedUsage,
  type GatewayErrorBody,
  type Json,
} from './types';

// ------------------------------------------------------------------ request: Messages -> chat

/** The request fields this interface reads (Anthropic's Messages API); others are listed as ignored. */
export const MESSAGES_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'max_tokens',
  'messages',
  'system',
  'tools',
  'tool_choice',
  'stream',
  'temperature',
  'top_k',
  'top_p',
  'stop_sequences',
  'metadata',
  'thinking',
  // Structured outputs: `output_config.format`, and the beta's `output_format` before it.
  'output_config',
  'output_format',
  // Ours (spec 4.2): a preset, applied on the chat pipeline.
  'preset',
]);

export function messagesToChat(body: unknown): ChatRequestBody {
  const b = requireBody(body);
  const model = requireString(b, 'model');
  const maxTokens = optionalPositiveInt(b, 'max_tokens');
  if (maxTokens === undefined) throw invalid('max_tokens is required and must be a positive integer.', 'max_tokens');
  const messages = conversationOf(b);
  const { functions: tools, plugins } = anthropicToolsOf(b.tools);
  const stream = optionalBoolean(b, 'stream');
  return {
    model,
    messages,
    max_tokens: maxTokens,
    ...defined({
      temperature: optionalNumber(b, 'temperature'),
      top_p: optionalNumber(b, 'top_p'),
      top_k: optionalNumber(b, 'top_k'),
      stop: stopOf(b.stop_sequences),
      user: userOf(b.metadata),
      reasoning: reasoningOf(b.thinking, maxTokens),
      response_format: responseFormatOf(b),
      preset: b.preset,
    }),
    ...(tools.length > 0 ? { tools, ...toolChoiceOf(b.tool_choice, plugins.length > 0) } : {}),
    ...(plugins.length > 0 ? { plugins } : {}),
    ...streamFields(stream),
  };
}

/**
 * `POST /v1/messages/count_tokens`: the prompt tokens of the translated chat messages (system
 * included, as a system message) plus the tokens of the tools' JSON as the caller sent them.
 */
export function countMessagesTokens(body: unknown): { input_tokens: number } {
  const b = requireBody(body);
  requireString(b, 'model');
  const messages = conversationOf(b);
  const { functions, plugins } = anthropicToolsOf(b.tools);
  const toolTokens = functions.length + plugins.length > 0 ? countTextTokens(JSON.stringify(b.tools)) : 0;
  return { input_tokens: countChatPromptTokens(messages) + toolTokens };
}

/** `system` then `messages`, as chat messages; validates both. */
function conversationOf(b: Json): ChatMessage[] {
  const out: ChatMessage[] = [];
  const system = systemOf(b.system);
  if (system !== undefined) out.push({ role: 'system', content: system });
  const messages = b.messages;
  if (!Array.isArray(messages) || messages.length === 0) {
    throw invalid('messages is required and must be a non-empty array.', 'messages');
  }
  messages.forEach((message, i) => out.push(...messageOf(message, `messages[${i}]`)));
  return out;
}

function systemOf(system: unknown): string | Json[] | undefined {
  if (system === undefined || system === null) return undefined;
  if (typeof system === 'string') return system === '' ? undefined : system;
  if (!Array.isArray(system)) throw invalid('system must be a string or an array of text blocks.', 'system');
  const parts = system.map((block, j) => {
    const param = `system[${j}]`;
    if (!isRecord(block) || block.type !== 'text') throw invalid('system blocks must be text blocks.', `${param}.type`);
    return textPart(block, param);
  });
  return parts.length > 0 ? collapse(parts) : undefined;
}

function messageOf(message: unknown, param: string): ChatMessage[] {
  if (!isRecord(message)) throw invalid('Each message must be an object.', param);
  const { role } = message;
  if (role !== 'user' && role !== 'assistant') {
    throw invalid(`${param}.role must be "user" or "assistant".`, `${param}.role`);
  }
  const content = message.content;
  if (typeof content === 'string') return [{ role, content }];
  if (!Array.isArray(content)) throw invalid('content must be a string or an array of content blocks.', `${param}.content`);
  return role === 'user' ? userTurn(content, `${param}.content`) : assistantTurn(content, `${param}.content`);
}

/**
 * A user turn: its `tool_result` blocks become `tool` messages (first, since OpenAI wants them
 * right after the assistant's tool calls), the other blocks one user message after them. Images
 * inside tool results cannot go in a tool message, so they join that user message.
 */
function userTurn(blocks: unknown[], param: string): ChatMessage[] {
  const tools: ChatMessage[] = [];
  const parts: Json[] = [];
  const toolImages: Json[] = [];
  blocks.forEach((block, j) => {
    const at = `${param}[${j}]`;
    if (!isRecord(block)) throw invalid('Each content block must be an object.', at);
    if (block.type === 'tool_result') {
      const { message, images } = toolResultOf(block, at);
      tools.push(message);
      toolImages.push(...images);
    } else {
      parts.push(...userPartsOf(block, at));
    }
  });
  const user = [...toolImages, ...parts];
  return user.length > 0 ? [...tools, { role: 'user', content: collapse(user) }] : tools;
}

/**
 * An assistant turn: text (as content) and tool_use blocks (as tool_calls). Thinking is dropped,
 * and so is an earlier web search (clients send our answers back whole): the model is not given
 * old results again, as the chat pipeline does not replay them either.
 */
function assistantTurn(blocks: unknown[], param: string): ChatMessage[] {
  const parts: Json[] = [];
  const calls: ToolCall[] = [];
  blocks.forEach((block, j) => {
    const at = `${param}[${j}]`;
    if (!isRecord(block)) throw invalid('Each content block must be an object.', at);
    switch (block.type) {
      case 'text':
        parts.push(textPart(block, at));
        break;
      case 'tool_use':
        calls.push(toolCallOf(block, at));
        break;
      case 'thinking':
      case 'redacted_thinking':
      case 'server_tool_use':
      case 'web_search_tool_result':
        break;
      default:
        throw unsupportedBlock(block.type, at);
    }
  });
  if (parts.length === 0 && calls.length === 0) return [];
  return [
    {
      role: 'assistant',
      content: parts.length > 0 ? collapse(parts) : null,
      ...(calls.length > 0 ? { tool_calls: calls } : {}),
    },
  ];
}

function userPartsOf(block: Json, param: string): Json[] {
  switch (block.type) {
    case 'text':
      return [textPart(block, param)];
    case 'image':
      return [imagePart(block, param)];
    case 'document':
      return documentParts(block, param);
    default:
      throw unsupportedBlock(block.type, param);
  }
}

function textPart(block: Json, param: string): Json {
  if (typeof block.text !== 'string') throw invalid('text blocks need a string text.', `${param}.text`);
  return { type: 'text', text: block.text, ...cacheOf(block) };
}

/** base64 -> data URL, url -> URL (the upstream fetches it). */
function imagePart(block: Json, param: string): Json {
  const source = block.source;
  if (isRecord(source) && source.type === 'base64' && typeof source.media_type === 'string' && typeof source.data === 'string') {
    return { type: 'image_url', image_url: { url: `data:${source.media_type};base64,${source.data}` }, ...cacheOf(block) };
  }
  if (isRecord(source) && source.type === 'url' && typeof source.url === 'string') {
    return { type: 'image_url', image_url: { url: source.url }, ...cacheOf(block) };
  }
  throw invalid('image source must be {type:"base64", media_type, data} or {type:"url", url}.', `${param}.source`);
}

/**
 * PDF (base64) -> OpenAI `file` part with a data URL; plain text -> a text part; a `content`
 * source -> its text and image blocks. URL and Files API sources have no chat equivalent that
 * every upstream accepts, so they are refused.
 */
function documentParts(block: Json, param: string): Json[] {
  const source = block.source;
  const cache = cacheOf(block);
  if (isRecord(source) && source.type === 'base64' && typeof source.data === 'string') {
    const mediaType = typeof source.media_type === 'string' ? source.media_type : 'application/pdf';
    const filename = typeof block.title === 'string' && block.title !== '' ? block.title : 'document.pdf';
    return [{ type: 'file', file: { filename, file_data: `data:${mediaType};base64,${source.data}` }, ...cache }];
  }
  if (isRecord(source) && source.type === 'text' && typeof source.data === 'string') {
    return [{ type: 'text', text: source.data, ...cache }];
  }
  if (isRecord(source) && source.type === 'content' && Array.isArray(source.content)) {
    return source.content.map((inner, k) => {
      const at = `${param}.source.content[${k}]`;
      if (isRecord(inner) && inner.type === 'text') return textPart(inner, at);
      if (isRecord(inner) && inner.type === 'image') return imagePart(inner, at);
      throw invalid('document content may only hold text and image blocks.', at);
    });
  }
  throw invalid('document source must be base64 (PDF), text or content; URL and file sources are not supported.', `${param}.source`);
}

function toolCallOf(block: Json, param: string): ToolCall {
  if (typeof block.id !== 'string' || block.id === '') throw invalid('tool_use blocks need an id.', `${param}.id`);
  if (typeof block.name !== 'string' || block.name === '') throw invalid('tool_use blocks need a name.', `${param}.name`);
  return { id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) } };
}

/** Prefix marking a failed tool call (`is_error: true`) in the tool message's text. */
export const TOOL_ERROR_PREFIX = 'Error: ';

function toolResultOf(block: Json, param: string): { message: ChatMessage; images: Json[] } {
  if (typeof block.tool_use_id !== 'string' || block.tool_use_id === '') {
    throw invalid('tool_result blocks need a tool_use_id.', `${param}.tool_use_id`);
  }
  const texts: Json[] = [];
  const images: Json[] = [];
  const content = block.content;
  if (typeof content === 'string') texts.push({ type: 'text', text: content });
  else if (Array.isArray(content)) {
    content.forEach((inner, k) => {
      const at = `${param}.content[${k}]`;
      if (isRecord(inner) && inner.type === 'text') texts.push(textPart(inner, at));
      else if (isRecord(inner) && inner.type === 'image') images.push(imagePart(inner, at));
      else if (isRecord(inner) && inner.type === 'document') texts.push(...documentParts(inner, at).filter((p) => p.type === 'text'));
      else throw invalid('tool_result content may only hold text, image and document blocks.', at);
    });
  } else if (content !== undefined && content !== null) {
    throw invalid('tool_result content must be a string or an array of blocks.', `${param}.content`);
  }
  if (block.is_error === true) {
    if (texts.length === 0) texts.push({ type: 'text', text: TOOL_ERROR_PREFIX.trimEnd() });
    else texts[0] = { ...texts[0], text: `${TOOL_ERROR_PREFIX}${String(texts[0].text)}` };
  }
  // The block's cache breakpoint goes on its last text, where the cached prefix ends.
  if (isRecord(block.cache_control)) {
    if (texts.length === 0) texts.push({ type: 'text', text: '' });
    texts[texts.length - 1] = { ...texts[texts.length - 1], cache_control: block.cache_control };
  }
  return {
    message: { role: 'tool', tool_call_id: block.tool_use_id, content: texts.length > 0 ? collapse(texts) : '' },
    images,
  };
}

function unsupportedBlock(type: unknown, param: string) {
  return invalid(`content blocks of type ${JSON.stringify(type)} are not supported here.`, `${param}.type`);
}

function cacheOf(block: Json): Json {
  return isRecord(block.cache_control) ? { cache_control: block.cache_control } : {};
}

/** One plain text part as a string (the common case); parts otherwise, which keeps cache_control. */
function collapse(parts: Json[]): string | Json[] {
  const [only] = parts;
  if (parts.length === 1 && only.type === 'text' && only.cache_control === undefined) return String(only.text);
  return parts;
}

/**
 * Client tools (`custom` or untyped) -> function tools; the web search server tool (every version,
 * `web_search_20250305` and later) -> the `web` plugin; the other server tools are not served.
 */
function anthropicToolsOf(tools: unknown): { functions: Json[]; plugins: Json[] } {
  return toolsOf(
    tools,
    (tool, param) => {
      if (tool.type !== undefined && tool.type !== null && tool.type !== 'custom') {
        throw invalid(`tools of type ${JSON.stringify(tool.type)} are not supported; only client tools are.`, `${param}.type`);
      }
      if (typeof tool.name !== 'string' || tool.name === '') throw invalid('tools need a name.', `${param}.name`);
      if (!isRecord(tool.input_schema)) throw invalid('tools need an input_schema object.', `${param}.input_schema`);
      return {
        type: 'function',
        function: {
          name: tool.name,
          ...(typeof tool.description === 'string' ? { description: tool.description } : {}),
          parameters: tool.input_schema,
        },
      };
    },
    { is: (type) => typeof type === 'string' && type.startsWith('web_search_'), options: webSearchOptionsOf },
  );
}

/** The name Anthropic gives its web search tool, in requests and in `server_tool_use` blocks. */
const WEB_SEARCH_NAME = 'web_search';

/**
 * The web search tool's own fields as `web` plugin options: its allowed or blocked domains (never
 * both, which Anthropic refuses) as one `search_domain_filter`. `max_uses` is checked and needs
 * nothing more: the gateway runs one search per request, within any max_uses of 1 or more. The
 * other fields (cache_control, allowed_callers, defer_loading...) do not change the search.
 */
function webSearchOptionsOf(tool: Json, param: string): Json {
  const maxUses = tool.max_uses;
  if (maxUses !== undefined && maxUses !== null && (typeof maxUses !== 'number' || !Number.isInteger(maxUses) || maxUses < 1)) {
    throw invalid('max_uses must be a positive integer.', `${param}.max_uses`);
  }
  const [allowed, blocked] = (['allowed_domains', 'blocked_domains'] as const).map((field) => {
    const domains = tool[field];
    if (domains === undefined || domains === null) return undefined;
    if (!Array.isArray(domains) || !domains.every((d) => typeof d === 'string')) throw invalid(`${field} must be an array of domains.`, `${param}.${field}`);
    return domains;
  });
  if (allowed && blocked) throw invalid('allowed_domains and blocked_domains cannot be used together.', param);
  const filter = allowed ?? blocked?.map((domain) => `-${domain}`);
  return filter && filter.length > 0 ? { search_domain_filter: filter } : {};
}

/**
 * auto/any/tool/none -> auto/required/function/none; `disable_parallel_tool_use` ->
 * parallel_tool_calls. Choosing the web search tool asks for what happens anyway (the search runs
 * before the model answers), so it leaves the model its choice of the function tools.
 */
function toolChoiceOf(choice: unknown, searching: boolean): Json {
  if (choice === undefined || choice === null) return {};
  if (!isRecord(choice)) throw invalid('tool_choice must be an object.', 'tool_choice');
  const serial = choice.disable_parallel_tool_use === true ? { parallel_tool_calls: false } : {};
  switch (choice.type) {
    case 'auto':
      return { tool_choice: 'auto', ...serial };
    case 'any':
      return { tool_choice: 'required', ...serial };
    case 'none':
      return { tool_choice: 'none' };
    case 'tool':
      if (typeof choice.name !== 'string' || choice.name === '') throw invalid('tool_choice of type "tool" needs a name.', 'tool_choice.name');
      if (searching && choice.name === WEB_SEARCH_NAME) return serial;
      return { tool_choice: { type: 'function', function: { name: choice.name } }, ...serial };
    default:
      throw invalid('tool_choice.type must be auto, any, tool or none.', 'tool_choice.type');
  }
}

/**
 * `enabled` with a budget -> OpenRouter-style `reasoning.max_tokens`; `adaptive` (the model picks
 * its budget) -> reasoning on without a budget; `disabled` -> nothing. As Anthropic requires, the
 * budget is below `max_tokens` (which caps thinking plus text): the Anthropic adapter would
 * otherwise shrink it, or drop thinking altogether, without a word.
 */
function reasoningOf(thinking: unknown, maxTokens: number): Json | undefined {
  if (thinking === undefined || thinking === null) return undefined;
  if (!isRecord(thinking)) throw invalid('thinking must be an object.', 'thinking');
  if (thinking.type === 'disabled') return undefined;
  if (thinking.type === 'adaptive') return { enabled: true };
  if (thinking.type !== 'enabled') throw invalid('thinking.type must be enabled, adaptive or disabled.', 'thinking.type');
  const budget = thinking.budget_tokens;
  if (typeof budget !== 'number' || !Number.isInteger(budget) || budget < MIN_THINKING_BUDGET) {
    throw invalid(`thinking.budget_tokens must be an integer of at least ${MIN_THINKING_BUDGET}.`, 'thinking.budget_tokens');
  }
  if (budget >= maxTokens) {
    throw invalid(
      `thinking.budget_tokens (${budget}) must be less than max_tokens (${maxTokens}), which counts thinking and text together.`,
      'thinking.budget_tokens',
    );
  }
  return { max_tokens: budget };
}

/**
 * Anthropic's structured outputs (`output_config: {format: {type: "json_schema", schema}}`, or
 * the beta's top-level `output_format` of the same shape, which `client.beta.messages.parse`
 * and older AI SDK versions send) as the chat pipeline's `response_format` json_schema: every
 * provider then gets the schema in its own terms (the Anthropic adapter gives it back as
 * output_config). Anthropic's schema has no name; OpenAI's needs one.
 */
function responseFormatOf(b: Json): Json | undefined {
  const config = b.output_config;
  if (config !== undefined && config !== null && !isRecord(config)) throw invalid('output_config must be an object.', 'output_config');
  const [format, param] = isRecord(config) && config.format != null ? [config.format, 'output_config.format'] : [b.output_format, 'output_format'];
  if (format === undefined || format === null) return undefined;
  if (!isRecord(format) || format.type !== 'json_schema') throw invalid(`${param} must be {type: "json_schema", schema}.`, `${param}.type`);
  if (!isRecord(format.schema)) throw invalid(`${param}.schema must be a JSON schema object.`, `${param}.schema`);
  return { type: 'json_schema', json_schema: { name: 'output', schema: format.schema, strict: true } };
}

/**
 * The fields of a Messages request the gateway does not read, for `x-svc-ignored-params`: the
 * unknown top-level ones, and `output_config.effort`, which no provider is given.
 */
export function ignoredMessagesFields(body: unknown): string[] {
  if (!isRecord(body)) return [];
  const ignored = Object.keys(body).filter((field) => !MESSAGES_FIELDS.has(field));
  if (isRecord(body.output_config) && body.output_config.effort != null) ignored.push('output_config.effort');
  return ignored;
}

function stopOf(stop: unknown): string[] | undefined {
  if (stop === undefined || stop === null) return undefined;
  if (!Array.isArray(stop) || !stop.every((s) => typeof s === 'string')) {
    throw invalid('stop_sequences must be an array of strings.', 'stop_sequences');
  }
  return stop.length > 0 ? stop : undefined;
}

function userOf(metadata: unknown): string | undefined {
  if (metadata === undefined || metadata === null) return undefined;
  if (!isRecord(metadata)) throw invalid('metadata must be an object.', 'metadata');
  const id = metadata.user_id;
  if (id === undefined || id === null) return undefined;
  if (typeof id !== 'string') throw invalid('metadata.user_id must be a string.', 'metadata.user_id');
  return id;
}

// ------------------------------------------------------------------ answer: chat -> Messages

export type AnthropicStopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'pause_turn' | 'refusal';

/**
 * The reverse of the FINISH_REASONS table in providers/src/anthropic.ts. A stop sequence hit
 * arrives as plain `stop`; which one matched comes apart, see stopOfAnswer.
 */
const STOP_REASONS: Record<string, AnthropicStopReason> = {
  stop: 'end_turn',
  length: 'max_tokens',
  tool_calls: 'tool_use',
  function_call: 'tool_use',
  content_filter: 'refusal',
};

/** Anthropic ends every turn that calls tools with `tool_use`; some upstreams say `stop` there. */
function stopReasonOf(finishReason: string | null | undefined, calledTools: boolean): AnthropicStopReason {
  const reason = (finishReason ? STOP_REASONS[finishReason] : undefined) ?? 'end_turn';
  return calledTools && reason === 'end_turn' ? 'tool_use' : reason;
}

/**
 * Anthropic's `stop_reason` and `stop_sequence`. OpenAI's finish_reason is "stop" for a natural
 * end and a stop sequence alike, and the text never holds the sequence, so the gateway cannot
 * tell them apart by itself: the upstream says which sequence matched as vLLM's OpenAI server
 * does, in the choice's `stop_reason` (the Anthropic adapter turns Anthropic's `stop_sequence`
 * into it; the simulator reports it). It counts only when it is one of the sequences the request
 * sent, so a token id or an upstream's own stop string is still `end_turn`. An upstream that
 * does not report it (OpenAI itself) gives `end_turn`, as before.
 */
export function stopOfAnswer(
  finishReason: string | null | undefined,
  matched: unknown,
  calledTools: boolean,
  stopSequences: readonly string[],
): { stop_reason: AnthropicStopReason; stop_sequence: string | null } {
  if (finishReason === 'stop' && !calledTools && typeof matched === 'string' && stopSequences.includes(matched)) {
    return { stop_reason: 'stop_sequence', stop_sequence: matched };
  }
  return { stop_reason: stopReasonOf(finishReason, calledTools), stop_sequence: null };
}

export interface AnthropicUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  /** The gateway's price of the call in USD; SDKs ignore it. */
  cost: number;
  /** Only when a search ran; web fetch is not a tool the gateway offers. */
  server_tool_use?: { web_search_requests: number; web_fetch_requests: number };
}

/**
 * Anthropic counts cache reads and cache writes apart from `input_tokens`, whereas OpenAI's
 * prompt_tokens includes them. So input_tokens = prompt_tokens - cached_tokens - cache writes,
 * and the three add up to prompt_tokens again. Cache writes are only known when the upstream was
 * Anthropic (the adapter reports `prompt_tokens_details.cache_write_tokens`); otherwise 0.
 */
export function anthropicUsage(usage: CostedUsage): AnthropicUsage {
  const read = cachedTokens(usage);
  const write = cacheWriteTokens(usage);
  return {
    input_tokens: Math.max(count(usage.prompt_tokens) - read - write, 0),
    output_tokens: count(usage.completion_tokens),
    cache_creation_input_tokens: write,
    cache_read_input_tokens: read,
    cost: count(usage.cost),
    ...(reportsSearches(usage) ? { server_tool_use: { web_search_requests: usage.server_tool_use.web_search_requests, web_fetch_requests: 0 } } : {}),
  };
}

/** The chat pipeline's usage counts the searches it ran, outside the ChatUsage type. */
function reportsSearches(usage: CostedUsage): usage is CostedUsage & { server_tool_use: { web_search_requests: number } } {
  return 'server_tool_use' in usage && isRecord(usage.server_tool_use) && typeof usage.server_tool_use.web_search_requests === 'number';
}

export interface AnthropicMessage {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: Json[];
  stop_reason: AnthropicStopReason;
  stop_sequence: string | null;
  usage: AnthropicUsage;
}

/**
 * With `webSearch`, the search the chat pipeline ran comes first, as Anthropic's server tool
 * blocks. `stopSequences` are the request's, for telling which one ended the text.
 */
export function chatToMessage(
  completion: ChatCompletion & { usage: CostedUsage },
  requestedModel: string,
  webSearch?: WebSearchRun | null,
  stopSequences: readonly string[] = [],
): AnthropicMessage {
  const choice = completion.choices[0];
  const message = choice?.message;
  const content: Json[] = [];
  if (webSearch) {
    const { call, result } = searchBlocks(webSearch);
    content.push(call, result);
  }
  if (typeof message?.reasoning === 'string' && message.reasoning !== '') {
    content.push({ type: 'thinking', thinking: message.reasoning, signature: '' });
  }
  const text = typeof message?.content === 'string' && message.content !== '' ? message.content : message?.refusal;
  if (typeof text === 'string' && text !== '') {
    const citations = webSearch ? citationsOf(text, webSearch) : [];
    content.push({ type: 'text', text, ...(citations.length > 0 ? { citations } : {}) });
  }
  const calls = message?.tool_calls ?? [];
  for (const call of calls) {
    content.push({ type: 'tool_use', id: call.id, name: call.function.name, input: parseInput(call.function.arguments) });
  }
  return {
    id: completion.id,
    type: 'message',
    role: 'assistant',
    model: requestedModel,
    content,
    ...stopOfAnswer(choice?.finish_reason, choice?.stop_reason, calls.length > 0, stopSequences),
    usage: anthropicUsage(completion.usage),
  };
}

/** Anthropic marks the server tools it ran itself (rather than code execution) with this caller. */
const DIRECT_CALLER = { type: 'direct' };

/**
 * The search as Anthropic's web search tool reports it: the call, then its results. Anthropic
 * encrypts each result for its own later turns; we have no encryption contract with the client,
 * so `encrypted_content` is the page text in base64url, as opaque to SDKs as Anthropic's.
 */
function searchBlocks(run: WebSearchRun): { call: Json & { input: Json }; result: Json } {
  const id = `srvtoolu_${run.id}`;
  const results = run.hits.map((hit) => ({
    type: 'web_search_result',
    url: hit.url,
    title: hit.title,
    encrypted_content: base64url(hit.content),
    page_age: hit.date ?? null,
  }));
  return {
    call: { type: 'server_tool_use', id, name: WEB_SEARCH_NAME, input: { query: run.query }, caller: DIRECT_CALLER },
    result: { type: 'web_search_tool_result', tool_use_id: id, caller: DIRECT_CALLER, content: results },
  };
}

/** Anthropic quotes at most this much of a cited result. */
const CITED_TEXT_CHARS = 150;

/**
 * Citations of the results the text cites (their markdown link or bare URL); `encrypted_index`
 * names the result by its position, in base64url for the reason encrypted_content is.
 */
function citationsOf(text: string, run: WebSearchRun): Json[] {
  return urlCitations(text, run).flatMap((citation, i) =>
    citation.end_index > 0
      ? [
          {
            type: 'web_search_result_location',
            url: citation.url,
            title: citation.title,
            cited_text: citation.content.slice(0, CITED_TEXT_CHARS),
            encrypted_index: base64url(String(i)),
          },
        ]
      : [],
  );
}

function base64url(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64url');
}

/** Tool arguments as the `input` object; arguments that are not a JSON object give `{}`. */
function parseInput(args: string): Json {
  try {
    const input: unknown = JSON.parse(args);
    return isRecord(input) ? input : {};
  } catch {
    return {};
  }
}

// ----------------------------------------------------------------------------------- stream

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

// ----------------------------------------------------------------------------------- errors

export type AnthropicErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'billing_error'
  | 'permission_error'
  | 'not_found_error'
  | 'request_too_large'
  | 'rate_limit_error'
  | 'api_error'
  | 'timeout_error'
  | 'overloaded_error';

export interface AnthropicErrorBody {
  type: 'error';
  error: { type: AnthropicErrorType; message: string; [key: string]: unknown };
}

/**
 * Anthropic's error types by HTTP status (docs.claude.com/en/api/errors). 504 is Anthropic's
 * `timeout_error` (the SDK's GatewayTimeoutError); an unlisted 4XX is invalid_request_error, as
 * Anthropic documents, and an unlisted 5XX api_error.
 */
const TYPE_BY_STATUS: Record<number, AnthropicErrorType> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  502: 'api_error',
  503: 'overloaded_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

export function toAnthropicError(status: number, body: GatewayErrorBody): AnthropicErrorBody {
  const type = TYPE_BY_STATUS[status] ?? (status >= 400 && status < 500 ? 'invalid_request_error' : 'api_error');
  return anthropicError(type, body);
}

/** The gateway's error types (platform/src/errors.ts), for a mid-stream error without a status. */
const TYPE_BY_GATEWAY_TYPE: Record<string, AnthropicErrorType> = {
  invalid_request_error: 'invalid_request_error',
  authentication_error: 'authentication_error',
  insufficient_quota: 'billing_error',
  permission_error: 'permission_error',
  not_found_error: 'not_found_error',
  idempotency_conflict: 'invalid_request_error',
  model_retired: 'not_found_error',
  rate_limit_error: 'rate_limit_error',
  api_error: 'api_error',
  service_unavailable: 'overloaded_error',
};

function anthropicErrorOfType(body: GatewayErrorBody): AnthropicErrorBody {
  return anthropicError(TYPE_BY_GATEWAY_TYPE[body.error.type] ?? 'api_error', body);
}

/** Our `code` and `param` ride along inside `error` when set; SDKs ignore fields they do not know. */
function anthropicError(type: AnthropicErrorType, body: GatewayErrorBody): AnthropicErrorBody {
  const { message, code, param } = body.error;
  return {
    type: 'error',
    error: {
      type,
      message,
      ...(code !== undefined && code !== null ? { code } : {}),
      ...(param !== undefined && param !== null ? { param } : {}),
    },
  };
}
