/**
 * OpenAI's Responses API (`POST /v1/responses`) on top of the chat pipeline: the request (with
 * the conversation of `previous_response_id`, which the caller loads) becomes a chat-completions
 * body; the completion, or the stream of chunks, becomes a `response` object or the Responses
 * stream events.
 *
 * The web_search tool maps to the chat pipeline's `web` plugin (spec 4.5): its one search comes
 * back as a `web_search_call` item, and the answer's citations as `url_citation` annotations.
 *
 * Not carried over: the other hosted tools (file search, code interpreter, computer use, MCP,
 * image generation), `background`, `conversation`, `prompt` templates, item references, file
 * ids, refusal parts in answers, logprobs. Reasoning comes back as a `reasoning` item whose
 * summary is the upstream's reasoning text; reasoning items sent back as input are dropped (the
 * upstream cannot use them).
 */
import { isRecord } from '@svc/providers';
import type { ChatChunk, ChatCompletion, ToolCall } from '@svc/providers';
import { urlCitations, type WebSearchRun } from './web-search';
import {
  cachedTokens,
  count,
  defined,
  invalid,
  optionalBoolean,
  optionalNumber,
  optionalPositiveInt,
  reasoningTokens,
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

// -------------------------------------------------------------------------------------- types

export type ItemStatus = 'in_progress' | 'completed' | 'incomplete';

export interface MessageItem {
  type: 'message';
  id: string;
  status: ItemStatus;
  role: 'user' | 'assistant' | 'system' | 'developer';
  /** input_text / input_image / input_file for input roles; output_text / refusal for assistant. */
  content: Json[];
}

export interface FunctionCallItem {
  type: 'function_call';
  id: string;
  call_id: string;
  name: string;
  arguments: string;
  status: ItemStatus;
}

export interface FunctionCallOutputItem {
  type: 'function_call_output';
  id: string;
  call_id: string;
  output: string;
  status: ItemStatus;
}

export interface ReasoningItem {
  type: 'reasoning';
  id: string;
  summary: Array<{ type: 'summary_text'; text: string }>;
  [key: string]: unknown;
}

/**
 * A web search the gateway ran, as OpenAI's hosted tool reports it; as input, one a client sends
 * back, its action as sent. The model is never given these again: chat has no such message.
 */
export interface WebSearchCallItem {
  type: 'web_search_call';
  id: string;
  status: 'in_progress' | 'searching' | 'completed' | 'failed';
  action: { type: string; query?: string; sources?: Array<{ type: 'url'; url: string }>; [key: string]: unknown };
}

export type ResponseItem = MessageItem | FunctionCallItem | FunctionCallOutputItem | ReasoningItem | WebSearchCallItem;

/** The previous response's input items then its output items, chained back by the caller. */
export interface StoredConversation {
  items: ResponseItem[];
}

export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
  /** The gateway's price of the call in USD; SDKs ignore it. */
  cost: number;
}

export type ResponseStatus = 'in_progress' | 'completed' | 'incomplete' | 'failed';

export interface ResponseObject {
  id: string;
  object: 'response';
  created_at: number;
  status: ResponseStatus;
  background: false;
  error: { code: string; message: string } | null;
  incomplete_details: { reason: 'max_output_tokens' | 'content_filter' } | null;
  instructions: unknown;
  max_output_tokens: unknown;
  model: string;
  /** The catalog provider that answered, as a chat completion names it (OpenRouter's `provider`). */
  provider: string | null;
  output: ResponseItem[];
  parallel_tool_calls: unknown;
  previous_response_id: string | null;
  reasoning: unknown;
  store: boolean;
  temperature: unknown;
  text: unknown;
  tool_choice: unknown;
  tools: unknown;
  top_p: unknown;
  truncation: unknown;
  usage: ResponseUsage | null;
  user: unknown;
  metadata: unknown;
}

/** What a response echoes besides its output: the request, its id and time, the chain link. */
export interface ResponseContext {
  id: string;
  /** Unix seconds. */
  created: number;
  /** The model as the caller asked for it. */
  model: string;
  /** The catalog provider that answered. */
  provider?: string | null;
  /** The Responses request body as received. */
  request: unknown;
  previousResponseId?: string | null;
  store?: boolean;
  /** The search the chat pipeline ran for the web_search tool, if one ran. */
  webSearch?: WebSearchRun | null;
}

/** Item ids by kind: `msg`, `fc` (function call), `fco` (function call output), `rs` (reasoning), `ws` (web search call). */
export type ItemIdGenerator = (prefix: 'msg' | 'fc' | 'fco' | 'rs' | 'ws') => string;

// ------------------------------------------------------------------ request: Responses -> chat

const WEB_SEARCH_TOOLS = new Set(['web_search', 'web_search_preview', 'web_search_preview_2025_03_11', 'web_search_2025_08_26']);

/**
 * The request fields this interface reads (OpenAI's Responses API); others are listed as
 * ignored. `background`, `conversation` and `prompt` are read to be refused.
 */
export const RESPONSES_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'input',
  'instructions',
  'stream',
  'store',
  'previous_response_id',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'max_output_tokens',
  'text',
  'reasoning',
  'temperature',
  'top_p',
  'user',
  'safety_identifier',
  'background',
  'conversation',
  'prompt',
  // Ours (spec 4.2): a preset, applied on the chat pipeline.
  'preset',
]);

export function responsesToChat(
  body: unknown,
  previous: StoredConversation | null,
  ids: ItemIdGenerator,
): { chat: ChatRequestBody; inputItems: ResponseItem[] } {
  const b = requireBody(body);
  const model = requireString(b, 'model');
  for (const field of ['background', 'conversation', 'prompt'] as const) {
    if (b[field] !== undefined && b[field] !== null && b[field] !== false) throw invalid(`${field} is not supported.`, field);
  }
  const inputItems = inputItemsOf(b.input, ids);
  if (inputItems.length === 0 && !previous) throw invalid('input must not be empty.', 'input');
  const instructions = b.instructions;
  if (instructions !== undefined && instructions !== null && typeof instructions !== 'string') {
    throw invalid('instructions must be a string.', 'instructions');
  }
  const messages: ChatMessage[] = [
    // Instructions apply to this response only: a previous response's are not in `previous`.
    ...(typeof instructions === 'string' && instructions !== '' ? [{ role: 'system' as const, content: instructions }] : []),
    ...itemsToMessages([...(previous?.items ?? []), ...inputItems]),
  ];
  const { functions: tools, plugins } = responsesToolsOf(b.tools);
  const chat: ChatRequestBody = {
    model,
    messages,
    ...defined({
      max_tokens: optionalPositiveInt(b, 'max_output_tokens'),
      temperature: optionalNumber(b, 'temperature'),
      top_p: optionalNumber(b, 'top_p'),
      parallel_tool_calls: optionalBoolean(b, 'parallel_tool_calls'),
      response_format: responseFormatOf(b.text),
      reasoning: reasoningOf(b.reasoning),
      user: typeof b.user === 'string' ? b.user : undefined,
      safety_identifier: typeof b.safety_identifier === 'string' ? b.safety_identifier : undefined,
      preset: b.preset,
    }),
    ...(tools.length > 0 ? { tools, ...defined({ tool_choice: toolChoiceOf(b.tool_choice) }) } : {}),
    ...(plugins.length > 0 ? { plugins } : {}),
    ...streamFields(optionalBoolean(b, 'stream')),
  };
  return { chat, inputItems };
}

/** `input` as stored items: a string is one user message; every item gets an id. */
function inputItemsOf(input: unknown, ids: ItemIdGenerator): ResponseItem[] {
  if (typeof input === 'string') {
    return [{ type: 'message', id: ids('msg'), status: 'completed', role: 'user', content: [{ type: 'input_text', text: input }] }];
  }
  if (!Array.isArray(input)) throw invalid('input is required and must be a string or an array of items.', 'input');
  return input.map((item, i) => inputItemOf(item, `input[${i}]`, ids));
}

function inputItemOf(item: unknown, param: string, ids: ItemIdGenerator): ResponseItem {
  if (!isRecord(item)) throw invalid('Each input item must be an object.', param);
  const given = typeof item.id === 'string' && item.id !== '' ? item.id : undefined;
  const type = item.type ?? (item.role !== undefined ? 'message' : undefined);
  switch (type) {
    case 'message': {
      const role = item.role;
      if (role !== 'user' && role !== 'assistant' && role !== 'system' && role !== 'developer') {
        throw invalid('role must be user, assistant, system or developer.', `${param}.role`);
      }
      const content = contentPartsOf(item.content, role, `${param}.content`);
      return { type: 'message', id: given ?? ids('msg'), status: 'completed', role, content };
    }
    case 'function_call':
      return {
        type: 'function_call',
        id: given ?? ids('fc'),
        call_id: stringField(item, 'call_id', param),
        name: stringField(item, 'name', param),
        arguments: typeof item.arguments === 'string' ? item.arguments : stringField(item, 'arguments', param),
        status: 'completed',
      };
    case 'function_call_output':
      return {
        type: 'function_call_output',
        id: given ?? ids('fco'),
        call_id: stringField(item, 'call_id', param),
        output: outputOf(item.output, `${param}.output`),
        status: 'completed',
      };
    case 'reasoning': {
      const summary = Array.isArray(item.summary)
        ? item.summary.filter(isRecord).map((s) => ({ type: 'summary_text' as const, text: String(s.text ?? '') }))
        : [];
      return { type: 'reasoning', id: given ?? ids('rs'), summary };
    }
    case 'web_search_call':
      return {
        type: 'web_search_call',
        id: given ?? ids('ws'),
        status: WEB_SEARCH_STATUSES.has(item.status) ? (item.status as WebSearchCallItem['status']) : 'completed',
        action: isRecord(item.action) && typeof item.action.type === 'string' ? { ...item.action, type: item.action.type } : { type: 'search' },
      };
    default:
      throw invalid(`input items of type ${JSON.stringify(type)} are not supported.`, `${param}.type`);
  }
}

function stringField(item: Json, field: string, param: string): string {
  const value = item[field];
  if (typeof value !== 'string') throw invalid(`${field} must be a string.`, `${param}.${field}`);
  return value;
}

/** A tool's output: a string, or input_text parts (joined). */
function outputOf(output: unknown, param: string): string {
  if (typeof output === 'string') return output;
  if (Array.isArray(output)) {
    return output
      .map((part, k) => {
        if (isRecord(part) && part.type === 'input_text' && typeof part.text === 'string') return part.text;
        throw invalid('function_call_output parts other than input_text are not supported.', `${param}[${k}]`);
      })
      .join('');
  }
  throw invalid('output must be a string.', param);
}

/** Normalised content parts; a string becomes one input_text (output_text for the assistant). */
function contentPartsOf(content: unknown, role: MessageItem['role'], param: string): Json[] {
  const assistant = role === 'assistant';
  if (typeof content === 'string') {
    return [assistant ? { type: 'output_text', text: content, annotations: [] } : { type: 'input_text', text: content }];
  }
  if (!Array.isArray(content)) throw invalid('content must be a string or an array of parts.', param);
  return content.map((part, k): Json => {
    const at = `${param}[${k}]`;
    if (!isRecord(part)) throw invalid('Each content part must be an object.', at);
    switch (part.type) {
      case 'input_text':
      case 'output_text':
        if (typeof part.text !== 'string') throw invalid('text parts need a string text.', `${at}.text`);
        return part.type === 'output_text' ? { type: 'output_text', text: part.text, annotations: [] } : { type: 'input_text', text: part.text };
      case 'refusal':
        if (typeof part.refusal !== 'string') throw invalid('refusal parts need a string refusal.', `${at}.refusal`);
        return { type: 'refusal', refusal: part.refusal };
      case 'input_image':
        if (role !== 'user') throw invalid('images may only be sent in user messages.', `${at}.type`);
        if (typeof part.image_url !== 'string') throw invalid('input_image needs an image_url (file_id is not supported).', `${at}.image_url`);
        return { type: 'input_image', image_url: part.image_url, detail: typeof part.detail === 'string' ? part.detail : 'auto' };
      case 'input_file':
        if (role !== 'user') throw invalid('files may only be sent in user messages.', `${at}.type`);
        if (typeof part.file_data !== 'string') throw invalid('input_file needs file_data (file_id and file_url are not supported).', `${at}.file_data`);
        return { type: 'input_file', filename: typeof part.filename === 'string' ? part.filename : 'file', file_data: part.file_data };
      default:
        throw invalid(`content parts of type ${JSON.stringify(part.type)} are not supported.`, `${at}.type`);
    }
  });
}

const WEB_SEARCH_STATUSES: ReadonlySet<unknown> = new Set(['in_progress', 'searching', 'completed', 'failed']);

/**
 * Items as chat messages. Function calls join the assistant message right before them (text then
 * calls, or parallel calls), outputs become tool messages, reasoning items are dropped, and so
 * are web search calls: an earlier search's results are not given to the model again.
 */
function itemsToMessages(items: ResponseItem[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (const item of items) {
    switch (item.type) {
      case 'message':
        out.push(messageOf(item));
        break;
      case 'function_call': {
        const call: ToolCall = { id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } };
        const last = out.at(-1);
        if (last?.role === 'assistant') last.tool_calls = [...((last.tool_calls as ToolCall[] | undefined) ?? []), call];
        else out.push({ role: 'assistant', content: null, tool_calls: [call] });
        break;
      }
      case 'function_call_output':
        out.push({ role: 'tool', tool_call_id: item.call_id, content: item.output });
        break;
      case 'reasoning':
      case 'web_search_call':
        break;
    }
  }
  return out;
}

function messageOf(item: MessageItem): ChatMessage {
  const text = (part: Json) => String(part.type === 'refusal' ? part.refusal : part.text);
  if (item.role === 'assistant') return { role: 'assistant', content: item.content.map(text).join('') };
  // Developer messages go out as system messages, which every OpenAI-compatible upstream knows.
  const role = item.role === 'user' ? 'user' : 'system';
  if (item.content.every((p) => p.type !== 'input_image' && p.type !== 'input_file')) {
    return { role, content: item.content.map(text).join('') };
  }
  return {
    role,
    content: item.content.map((part): Json => {
      if (part.type === 'input_image') {
        return { type: 'image_url', image_url: { url: part.image_url, ...(part.detail !== 'auto' ? { detail: part.detail } : {}) } };
      }
      if (part.type === 'input_file') return { type: 'file', file: { filename: part.filename, file_data: part.file_data } };
      return { type: 'text', text: text(part) };
    }),
  };
}

/** Function tools, and the web_search tool (every version) as the `web` plugin; the other hosted tools are not served. */
function responsesToolsOf(tools: unknown): { functions: Json[]; plugins: Json[] } {
  return toolsOf(
    tools,
    (tool, param) => {
      if (tool.type !== 'function') {
        throw invalid(`tools of type ${JSON.stringify(tool.type)} are not supported; only function tools are.`, `${param}.type`);
      }
      if (typeof tool.name !== 'string' || tool.name === '') throw invalid('function tools need a name.', `${param}.name`);
      return {
        type: 'function',
        function: {
          name: tool.name,
          ...defined({
            description: typeof tool.description === 'string' ? tool.description : undefined,
            parameters: isRecord(tool.parameters) ? tool.parameters : undefined,
            strict: typeof tool.strict === 'boolean' ? tool.strict : undefined,
          }),
        },
      };
    },
    { is: isWebSearchTool, options: webSearchOptionsOf },
  );
}

function isWebSearchTool(type: unknown): boolean {
  return typeof type === 'string' && WEB_SEARCH_TOOLS.has(type);
}

/** How many results each search context size gives the model; medium is the `web` plugin's default. */
const RESULTS_BY_CONTEXT_SIZE: ReadonlyMap<unknown, number> = new Map([
  ['low', 3],
  ['medium', 5],
  ['high', 10],
]);

/** The web_search tool's own fields as `web` plugin options: `filters.allowed_domains` and `search_context_size`. */
function webSearchOptionsOf(tool: Json, param: string): Json {
  const filters = tool.filters;
  if (filters !== undefined && filters !== null && !isRecord(filters)) throw invalid('filters must be an object.', `${param}.filters`);
  const domains = filters?.allowed_domains;
  if (domains !== undefined && domains !== null && (!Array.isArray(domains) || !domains.every((d) => typeof d === 'string'))) {
    throw invalid('filters.allowed_domains must be an array of domains.', `${param}.filters.allowed_domains`);
  }
  const size = tool.search_context_size;
  const maxResults = RESULTS_BY_CONTEXT_SIZE.get(size);
  if (size !== undefined && size !== null && maxResults === undefined) {
    throw invalid('search_context_size must be low, medium or high.', `${param}.search_context_size`);
  }
  return defined({ search_domain_filter: Array.isArray(domains) && domains.length > 0 ? domains : undefined, max_results: maxResults });
}

/** Choosing the web_search tool asks for what happens anyway (the search runs before the model answers): the model keeps its choice. */
function toolChoiceOf(choice: unknown): unknown {
  if (choice === undefined || choice === null) return undefined;
  if (choice === 'auto' || choice === 'none' || choice === 'required') return choice;
  if (isRecord(choice) && isWebSearchTool(choice.type)) return undefined;
  if (isRecord(choice) && choice.type === 'function' && typeof choice.name === 'string' && choice.name !== '') {
    return { type: 'function', function: { name: choice.name } };
  }
  throw invalid('tool_choice must be "auto", "none", "required" or {type: "function", name}.', 'tool_choice');
}

/** `text.format`: json_schema / json_object -> response_format; text -> nothing. */
function responseFormatOf(text: unknown): Json | undefined {
  if (text === undefined || text === null) return undefined;
  if (!isRecord(text)) throw invalid('text must be an object.', 'text');
  const format = text.format;
  if (format === undefined || format === null) return undefined;
  if (!isRecord(format)) throw invalid('text.format must be an object.', 'text.format');
  switch (format.type) {
    case 'text':
      return undefined;
    case 'json_object':
      return { type: 'json_object' };
    case 'json_schema':
      if (typeof format.name !== 'string' || format.name === '') throw invalid('text.format.name is required for json_schema.', 'text.format.name');
      if (!isRecord(format.schema)) throw invalid('text.format.schema must be an object.', 'text.format.schema');
      return {
        type: 'json_schema',
        json_schema: {
          name: format.name,
          schema: format.schema,
          ...defined({
            description: typeof format.description === 'string' ? format.description : undefined,
            strict: typeof format.strict === 'boolean' ? format.strict : undefined,
          }),
        },
      };
    default:
      throw invalid('text.format.type must be text, json_object or json_schema.', 'text.format.type');
  }
}

function reasoningOf(reasoning: unknown): Json | undefined {
  if (reasoning === undefined || reasoning === null) return undefined;
  if (!isRecord(reasoning)) throw invalid('reasoning must be an object.', 'reasoning');
  const effort = reasoning.effort;
  if (effort === undefined || effort === null) return undefined;
  if (typeof effort !== 'string') throw invalid('reasoning.effort must be a string.', 'reasoning.effort');
  return { effort };
}

// ----------------------------------------------------------------- answer: chat -> Responses

/** Output item ids from the response id and the item's position, so a stream and a replay agree. */
function itemId(responseId: string, prefix: 'msg' | 'fc' | 'rs', outputIndex: number): string {
  return `${prefix}_${responseId.replace(/^resp_/, '')}_${outputIndex}`;
}

function reasoningItem(id: string, text: string): ReasoningItem {
  return { type: 'reasoning', id, summary: [{ type: 'summary_text', text }] };
}

function outputText(text: string, annotations: Json[] = []): Json {
  return { type: 'output_text', text, annotations };
}

function messageItem(id: string, text: string, status: ItemStatus, annotations: Json[] = []): MessageItem {
  return { type: 'message', id, status, role: 'assistant', content: [outputText(text, annotations)] };
}

/**
 * The search as OpenAI's web_search tool reports it. Its sources are always there: OpenAI sends
 * them only when `include` asks, but they are what clients show and cost nothing to send.
 */
function webSearchCallItem(run: WebSearchRun, status: 'in_progress' | 'completed'): WebSearchCallItem {
  const sources = status === 'completed' ? { sources: run.hits.map((hit) => ({ type: 'url' as const, url: hit.url })) } : {};
  return { type: 'web_search_call', id: `ws_${run.id}`, status, action: { type: 'search', query: run.query, ...sources } };
}

/** Every result as a flat `url_citation` of the answer (0 and 0 when the answer does not cite it), as chat annotates it. */
function annotationsOf(text: string, run: WebSearchRun | null | undefined): Json[] {
  if (!run) return [];
  return urlCitations(text, run).map(({ url, title, start_index, end_index }) => ({ type: 'url_citation', url, title, start_index, end_index }));
}

function functionCallItem(id: string, callId: string, name: string, args: string, status: ItemStatus): FunctionCallItem {
  return { type: 'function_call', id, call_id: callId, name, arguments: args, status };
}

/** Chat finish reason -> the response's status and, when incomplete, why. */
function outcomeOf(finishReason: string | null | undefined): Pick<ResponseObject, 'status' | 'incomplete_details'> {
  if (finishReason === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (finishReason === 'content_filter') return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

/** OpenAI counts cached tokens inside input_tokens, as chat's prompt_tokens does. */
export function responseUsage(usage: CostedUsage): ResponseUsage {
  const input = count(usage.prompt_tokens);
  const output = count(usage.completion_tokens);
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cachedTokens(usage) },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoningTokens(usage) },
    total_tokens: count(usage.total_tokens) || input + output,
    cost: count(usage.cost),
  };
}

function buildResponse(ctx: ResponseContext, state: Pick<ResponseObject, 'status' | 'incomplete_details' | 'output' | 'usage' | 'error'>): ResponseObject {
  const req = isRecord(ctx.request) ? ctx.request : {};
  const reasoning = isRecord(req.reasoning) ? req.reasoning : {};
  return {
    id: ctx.id,
    object: 'response',
    created_at: ctx.created,
    status: state.status,
    background: false,
    error: state.error,
    incomplete_details: state.incomplete_details,
    instructions: req.instructions ?? null,
    max_output_tokens: req.max_output_tokens ?? null,
    model: ctx.model,
    provider: ctx.provider ?? null,
    output: state.output,
    parallel_tool_calls: req.parallel_tool_calls ?? true,
    previous_response_id: ctx.previousResponseId ?? null,
    reasoning: { effort: reasoning.effort ?? null, summary: reasoning.summary ?? null },
    store: ctx.store ?? true,
    temperature: req.temperature ?? 1,
    text: isRecord(req.text) ? { format: { type: 'text' }, ...req.text } : { format: { type: 'text' } },
    tool_choice: req.tool_choice ?? 'auto',
    tools: req.tools ?? [],
    top_p: req.top_p ?? 1,
    truncation: req.truncation ?? 'disabled',
    usage: state.usage,
    user: req.user ?? null,
    metadata: req.metadata ?? {},
  };
}

/**
 * Output items in the order a stream produces them: the web search call when one ran, reasoning,
 * the message, function calls. The message is left out when there is no text but there are
 * function calls. When the answer was cut short, the last item is `incomplete`.
 */
export function chatToResponse(completion: ChatCompletion & { usage: CostedUsage }, ctx: ResponseContext): ResponseObject {
  const choice = completion.choices[0];
  const message = choice?.message;
  const outcome = outcomeOf(choice?.finish_reason);
  const output: ResponseItem[] = ctx.webSearch ? [webSearchCallItem(ctx.webSearch, 'completed')] : [];
  if (typeof message?.reasoning === 'string' && message.reasoning !== '') {
    output.push(reasoningItem(itemId(ctx.id, 'rs', output.length), message.reasoning));
  }
  const text = typeof message?.content === 'string' ? message.content : '';
  const calls = message?.tool_calls ?? [];
  if (text !== '' || calls.length === 0) {
    output.push(messageItem(itemId(ctx.id, 'msg', output.length), text, 'completed', annotationsOf(text, ctx.webSearch)));
  }
  for (const call of calls) {
    output.push(functionCallItem(itemId(ctx.id, 'fc', output.length), call.id, call.function.name, call.function.arguments, 'completed'));
  }
  markLastIncomplete(output, outcome.status);
  return buildResponse(ctx, { ...outcome, output, usage: responseUsage(completion.usage), error: null });
}

function markLastIncomplete(output: ResponseItem[], status: ResponseStatus): void {
  const last = output.at(-1);
  if (status === 'incomplete' && last && (last.type === 'message' || last.type === 'function_call')) last.status = 'incomplete';
}

// ----------------------------------------------------------------------------------- stream

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
