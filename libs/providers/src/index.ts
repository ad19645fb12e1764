export {
  AnthropicProvider,
  ANTHROPIC_VERSION,
  chatChunks as anthropicChatChunks,
  DEFAULT_MAX_TOKENS as ANTHROPIC_DEFAULT_MAX_TOKENS,
  toChatCompletion as anthropicToChatCompletion,
  toMessagesRequest,
  type AnthropicOptions,
} from './anthropic';
export { countChatPromptTokens, countTextTokens, NON_TEXT_PART_TOKENS } from './tokens';
export {
  normalizeUsage,
  OPENAI_CHAT_PARAMS,
  OpenAiCompatibleAdapter,
  OpenAiCompatibleProvider,
  ROUTER_CHAT_PARAMS,
  type ChatCompletionResult,
  type ChatProvider,
  type EmbeddingsResult,
  type NormalizedUsage,
  type OpenAiCompatibleOptions,
} from './openai-compatible';
export { ProviderError, type ProviderErrorInit, type ProviderErrorKind } from './provider-error';
export { readSse, SseParser, type SseEvent } from './sse';
export { SIMULATOR_MODELS, startSimulator, type SimDirectives, type Simulator, type SimulatorOptions } from './simulator';
export type * from './wire';
