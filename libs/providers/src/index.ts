/**
 * Upstream providers: one folder each (`openai/`, `anthropic/`, `cohere/`, `jina/`, `searxng/`,
 * `tavily/`, `videorouter/`) declaring the operations it serves, one file each with its request
 * mapping and its calls; the registry that names them, the known fields of every operation, the
 * shared transport, token counting and the simulated upstream.
 */
export { ANTHROPIC_VERSION, MIN_THINKING_BUDGET, type AnthropicOptions } from './anthropic';
export { OPENAI_PARAMETERS, type OpenAiCompatibleOptions } from './openai';
export { PROVIDER_CLIENTS, SIMULATOR_URL } from './injection-tokens';
export { ADAPTERS, createProvider, operationsOf, PROVIDERS, servesModelType, type AdapterName } from './registry';
export {
  knownParameters,
  mapParameters,
  MODEL_TYPE_OPERATIONS,
  OPERATIONS,
  PARAMETERS,
  type OperationName,
  type ParameterConfig,
  type ParameterOf,
} from './operations';
export {
  excludesReasoning,
  normalizeUsage,
  OPERATION_CALLS,
  operationOf,
  VIDEO_STATUSES,
  type AdapterOptions,
  type AudioForm,
  type BinaryResult,
  type CallName,
  type Calls,
  type ChatCompletionResult,
  type EmbeddingsResult,
  type JsonResult,
  type NormalizedUsage,
  type Provider,
  type ProviderDeclaration,
  type RerankBody,
  type RerankResult,
  type SearchBody,
  type SearchHit,
  type SearchResult,
  type VideoJob,
  type VideoJobRequest,
  type VideoStatus,
  type VideoVariant,
  type RealtimeConnection,
} from './provider';
export { countChatPromptTokens, countTextTokens, NON_TEXT_PART_TOKENS, TokenBudget, truncateToTokens, warmTokenCounting } from './tokens';
export { ProviderError, type ProviderErrorInit, type ProviderErrorKind } from './provider-error';
export { readSse, SseParser, type SseEvent } from './sse';
export { SIMULATOR_MODELS, startSimulator, type SimDirectives, type Simulator, type SimulatorOptions } from './simulator';
export { tone, wav } from './simulator/audio-formats';
export { audioSeconds, parseWav } from './audio-duration';
export { isRecord } from './json';
export { compressMessages } from './plugins/context-compression';
export { healChoices, wantsJson } from './plugins/response-healing';
export type * from './wire';
