/**
 * How an OpenAI-compatible upstream takes each operation's known fields. Gateway-only fields
 * (`preset`, `models`, `plugins`, `transforms`, `provider` on OpenAI's own API) are not named, so
 * they are never sent; `stream` and `stream_options` are set by the client.
 */
import { isRecord } from '../json';
import { sameNames, type ParameterConfig } from '../operations';

/** OpenAI's own chat API. */
const OPENAI_CHAT: ParameterConfig<'chat'> = {
  ...sameNames<'chat'>([
    'model', 'messages', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'stop',
    'seed', 'presence_penalty', 'frequency_penalty', 'logit_bias', 'logprobs', 'top_logprobs', 'n',
    'tools', 'tool_choice', 'parallel_tool_calls', 'response_format', 'reasoning_effort',
    'modalities', 'prediction', 'user', 'safety_identifier', 'prompt_cache_key',
  ]),
  // OpenAI takes reasoning only as `reasoning_effort`; the gateway's `reasoning.effort` (which
  // the `:thinking` suffix sets) becomes it unless the caller gave it. `reasoning.max_tokens`
  // has no OpenAI equivalent and stays behind.
  reasoning: (value, body) => (isRecord(value) && typeof value.effort === 'string' && body.reasoning_effort == null ? { reasoning_effort: value.effort } : undefined),
};

/**
 * Routers (OpenRouter) and open-weight servers (vLLM, Ollama, llama.cpp) take these on top, as
 * they are; OpenAI itself answers 400 to them, hence a dialect chosen per upstream.
 */
const ROUTER_CHAT: ParameterConfig<'chat'> = {
  ...OPENAI_CHAT,
  ...sameNames<'chat'>(['top_k', 'min_p', 'repetition_penalty', 'reasoning', 'include_reasoning', 'provider']),
};

export const OPENAI_PARAMETERS = {
  chat: { openai: OPENAI_CHAT, router: ROUTER_CHAT },
  embed: sameNames<'embed'>(['model', 'input', 'dimensions', 'encoding_format', 'user']),
  image: sameNames<'image'>(['model', 'prompt', 'n', 'size', 'quality', 'response_format', 'image', 'user']),
  speech: sameNames<'speech'>(['model', 'input', 'voice', 'response_format', 'speed', 'instructions']),
  transcription: sameNames<'transcription'>(['model', 'language', 'prompt', 'response_format', 'temperature', 'timestamp_granularities[]']),
  translation: sameNames<'translation'>(['model', 'prompt', 'response_format', 'temperature']),
  moderation: sameNames<'moderation'>(['model', 'input']),
} as const;
