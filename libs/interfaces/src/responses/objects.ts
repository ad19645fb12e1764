/**
 * The Responses objects: input and output items, usage, the `response` object and what it echoes.
 */
import type { Json } from '../types';
import type { WebSearchRun } from '../web-search';

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
