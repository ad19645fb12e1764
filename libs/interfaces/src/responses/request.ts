/**
 * Request: a Responses body (and the stored conversation it continues) -> a chat-completions body,
 * and its `input` as stored items.
 */
import { isRecord, type ToolCall } from '@svc/providers';
import type { StoredConversation, ItemIdGenerator, ResponseItem, WebSearchCallItem, MessageItem } from './objects';
import {
  type ChatRequestBody,
  requireBody,
  requireString,
  invalid,
  type ChatMessage,
  defined,
  optionalPositiveInt,
  optionalNumber,
  optionalBoolean,
  streamFields,
  type Json,
} from '../types';
import { responsesToolsOf, responseFormatOf, reasoningOf, toolChoiceOf } from './request-options';

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
