/**
 * Request: `system` and `messages` -> chat messages, block by block (text, images, documents,
 * tool calls and their results).
 */
import { isRecord, type ToolCall } from '@svc/providers';
import { type Json, type ChatMessage, invalid } from '../types';

/** `system` then `messages`, as chat messages; validates both. */
export function conversationOf(b: Json): ChatMessage[] {
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
