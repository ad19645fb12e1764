export { countChatPromptTokens, countTextTokens, NON_TEXT_PART_TOKENS } from './tokens';
export {
  normalizeUsage,
  OPENAI_CHAT_PARAMS,
  OpenAiCompatibleProvider,
  ROUTER_CHAT_PARAMS,
  type ChatCompletionResult,
  type EmbeddingsResult,
  type NormalizedUsage,
  type OpenAiCompatibleOptions,
} from './openai-compatible';
export { ProviderError, type ProviderErrorInit, type ProviderErrorKind } from './provider-error';
export { readSse, SseParser, type SseEvent } from './sse';
export { SIMULATOR_MODELS, startSimulator, type SimDirectives, type Simulator, type SimulatorOptions } from './simulator';
export type * from './wire';
