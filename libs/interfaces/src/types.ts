/**
 * What the three foreign interfaces (Anthropic Messages, OpenAI Responses, legacy completions)
 * share: the chat-completions request body they are translated into, the usage the chat
 * pipeline reports, SSE framing, and the small validators their translators use. Pure: no I/O,
 * no clock.
 */
import { DomainError } from '@svc/platform';
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
export function invalid(message: string, param: string): DomainError {
  return DomainError.invalid(message, param);
}

/** The body as an object, or a 400. */
export function requireBody(body: unknown): Json {
  if (!isRecord(body)) throw DomainError.invalid('The request body must be a JSON object.');
  return body;
}

export function requireString(body: Json, field: string): string {
  const value = body[field];
  if (typeof value !== 'string' || value === '') throw invalid(`${field} is required and must be a non-empty string.`, field);
  return value;
}

/**
 * A request's `tools`: absent is none; otherwise an array of objects. The vendor's web search tool
 * (`webSearch.is` on its type) becomes the entry of chat's `web` plugin (spec 4.2 rule 7) with
 * the options `webSearch.options` reads from the vendor's fields, plus the user's country, which
 * both vendors give alike; every other tool becomes a chat function tool through `convert`. Both
 * callbacks check the interface's own fields.
 */
export function toolsOf(
  tools: unknown,
  convert: (tool: Json, param: string) => Json,
  webSearch: { is: (type: unknown) => boolean; options: (tool: Json, param: string) => Json },
): { functions: Json[]; plugins: Json[] } {
  const functions: Json[] = [];
  const plugins: Json[] = [];
  if (tools === undefined || tools === null) return { functions, plugins };
  if (!Array.isArray(tools)) throw invalid('tools must be an array.', 'tools');
  tools.forEach((tool, i) => {
    const param = `tools[${i}]`;
    if (!isRecord(tool)) throw invalid('Each tool must be an object.', param);
    if (!webSearch.is(tool.type)) {
      functions.push(convert(tool, param));
      return;
    }
    // The chat pipeline keeps one `web` plugin entry; a second tool would silently replace the first.
    if (plugins.length > 0) throw invalid('Only one web search tool may be given.', param);
    const location = tool.user_location;
    if (location !== undefined && location !== null && !isRecord(location)) throw invalid('user_location must be an object.', `${param}.user_location`);
    const country = location?.country;
    if (country !== undefined && country !== null && (typeof country !== 'string' || !/^[A-Za-z]{2}$/.test(country))) {
      throw invalid('user_location.country must be an ISO 3166-1 alpha-2 code such as "US".', `${param}.user_location.country`);
    }
    plugins.push({ id: 'web', ...webSearch.options(tool, param), ...(typeof country === 'string' ? { country: country.toUpperCase() } : {}) });
  });
  return { functions, plugins };
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
