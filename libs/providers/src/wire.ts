/**
 * The parts of the OpenAI wire format (chat completions, embeddings, errors) that this library
 * reads or writes. Upstreams add fields of their own, so every object stays open.
 */

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number; [key: string]: unknown };
  completion_tokens_details?: { reasoning_tokens?: number; [key: string]: unknown };
  [key: string]: unknown;
}

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface AssistantMessage {
  role: 'assistant';
  content: string | null;
  refusal?: string | null;
  /** Reasoning text, as OpenRouter-style upstreams return it (spec 2.6). */
  reasoning?: string;
  tool_calls?: ToolCall[];
  [key: string]: unknown;
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    message: AssistantMessage;
    finish_reason: string | null;
    /** vLLM's extension: the stop sequence (or token id) that ended the text; the Anthropic adapter sets it too. */
    stop_reason?: string | number | null;
    logprobs?: unknown;
  }>;
  usage?: ChatUsage;
  system_fingerprint?: string;
  [key: string]: unknown;
}

export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function?: { name?: string; arguments?: string };
}

export interface ChatDelta {
  role?: 'assistant';
  content?: string | null;
  reasoning?: string;
  tool_calls?: ToolCallDelta[];
  [key: string]: unknown;
}

export interface ChatChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  /** Empty in the usage chunk that `stream_options.include_usage` adds before `[DONE]`. */
  choices: Array<{ index: number; delta: ChatDelta; finish_reason: string | null; stop_reason?: string | number | null; logprobs?: unknown }>;
  /** null on every chunk but the usage chunk when usage was requested. */
  usage?: ChatUsage | null;
  system_fingerprint?: string;
  [key: string]: unknown;
}

export interface EmbeddingsResponse {
  object: 'list';
  data: Array<{ object: 'embedding'; index: number; embedding: number[] | string }>;
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
  [key: string]: unknown;
}

export interface OpenAiErrorBody {
  error: { message: string; type: string; code: string | null; param: string | null };
}
