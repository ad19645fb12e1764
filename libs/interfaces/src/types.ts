/**
 * What the three foreign interfaces (Anthropic Messages, OpenAI Responses, legacy completions)
 * share: the chat-completions request body they are translated into, the usage the chat
 * pipeline reports, SSE framing, and the small validators their translators use. Pure: no I/O,
 * no clock.
 */
import { ApiError } from '@svc/platform';
import { isRecord } from '@svc/providers';
import type { ChatUsage } from '@svc/providers';

export type Json = Record<string, unknown>;

/** One OpenAI chat message; content parts stay open (text, image_url, file, with cache_control). */
export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  content?: string | Json[] | null;
  [key: string]: unknown;
}

/** An OpenAI chat-completions request body, as the chat pipeline accepts it. */
export interface ChatRequestBody {
  model: string;
  messages: ChatMessage[];
  stream?: boolean;
  [key: string]: unknown;
}

/** The chat pipeline's usage: OpenAI's counts plus the price of the call in USD. */
export type CostedUsage = ChatUsage & { cost: number };

/** The gateway's error body (OpenAI shape), as the chat pipeline reports a failure. */
export interface GatewayErrorBody {
  error: { message: string; type: string; code?: string | null; param?: string | null; [key: string]: unknown };
}

// ------------------------------------------------------------------------------------- SSE

/**
 * One server-sent event. With `event`, the `event:` line Anthropic and the Responses API send
 * (clients dispatch on it); without, the data-only frame of chat and legacy completions.
 */
export function sseFrame(data: unknown, event?: string): string {
  const payload = typeof data === 'string' ? data : JSON.stringify(data);
  return event === undefined ? `data: ${payload}\n\n` : `event: ${event}\ndata: ${payload}\n\n`;
}

/** The terminator of OpenAI's data-only streams. */
export const SSE_DONE = sseFrame('[DONE]');

// ------------------------------------------------------------------------------ validation

/** A 400 naming the offending field, as every validator here throws it. */
export function invalid(message: string, param: string): ApiError {
  return ApiError.invalidRequest(message, param);
}

/** The body as an object, or a 400. */
export function requireBody(body: unknown): Json {
  if (!isRecord(body)) throw ApiError.invalidRequest('The request body must be a JSON object.');
  return body;
}

export function requireString(body: Json, field: string): string {
  const value = body[field];
  if (typeof value !== 'string' || value === '') throw invalid(`${field} is required and must be a non-empty string.`, field);
  return value;
}

/**
 * A request's `tools`: absent is none; otherwise an array of objects, each turned into a chat
 * function tool by `convert` (which checks the interface's own fields). A web search tool is
 * refused as a whole until web search exists.
 */
export function toolsOf(tools: unknown, isWebSearch: (type: unknown) => boolean, convert: (tool: Json, param: string) => Json): Json[] {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) throw invalid('tools must be an array.', 'tools');
  return tools.map((tool, i) => {
    const param = `tools[${i}]`;
    if (!isRecord(tool)) throw invalid('Each tool must be an object.', param);
    if (isWebSearch(tool.type)) throw invalid('web search is not available yet', 'tools');
    return convert(tool, param);
  });
}

/** A positive integer when present (null counts as absent). */
export function optionalPositiveInt(body: Json, field: string): number | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw invalid(`${field} must be a positive integer.`, field);
  }
  return value;
}

/** A finite number when present (null counts as absent). */
export function optionalNumber(body: Json, field: string): number | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value)) throw invalid(`${field} must be a number.`, field);
  return value;
}

export function optionalBoolean(body: Json, field: string): boolean | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw invalid(`${field} must be a boolean.`, field);
  return value;
}

/** `stream: true` with the usage chunk the gateway needs for billing; nothing otherwise. */
export function streamFields(stream: boolean | undefined): Json {
  return stream ? { stream: true, stream_options: { include_usage: true } } : {};
}

/** Copies the fields that are defined (not undefined) into a new object. */
export function defined(fields: Json): Json {
  const out: Json = {};
  for (const [key, value] of Object.entries(fields)) if (value !== undefined) out[key] = value;
  return out;
}

// ----------------------------------------------------------------------------------- usage

export function cachedTokens(usage: ChatUsage): number {
  return count(usage.prompt_tokens_details?.cached_tokens);
}

/** Cache writes, as the Anthropic adapter reports them (`prompt_tokens_details.cache_write_tokens`). */
export function cacheWriteTokens(usage: ChatUsage): number {
  return count(usage.prompt_tokens_details?.cache_write_tokens);
}

export function reasoningTokens(usage: ChatUsage): number {
  return count(usage.completion_tokens_details?.reasoning_tokens);
}

export function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}
