/**
 * The billed use cases over the metering pipeline (ARCHITECTURE section 10): one per
 * operation a client calls (chat completions, Messages, Responses, legacy completions,
 * embeddings), each the whole of a request from its rules to its settlement. The apps parse,
 * call one of them, and present what it answers.
 */
export { settled, type AnsweredCall, type BilledAnswer, type CallTags } from './answered';
export { apiErrorOfFailure, midStreamError } from './api-errors';
export { ChatCompletions, type ChatDeps } from './chat';
export {
  type ChatCompletionResponse,
  type ChatRequest,
  type ChatRequestMessage,
  type EncoderFactory,
  type PreparedChat,
  type StreamedChat,
  type WebSearch,
} from './chat-request';
export { ChatChunkEncoder } from './chat-encoder';
export { COMPRESSION_DEFAULT_MAX_CONTEXT, fitContext, PLUGIN_IDS, readPlugins, type ChatPlugins, type WebPlugin } from './chat-plugins';
export {
  checkCapabilities,
  checkImages,
  ignoredParamsHeader,
  imagePartsOf,
  MAX_IGNORED_LISTED,
  MAX_IMAGE_BYTES,
  MAX_IMAGES,
  withoutUnknownFields,
} from './chat-rules';
export { LegacyCompletions, type CompletionsRequest } from './completions';
export { Embeddings, type EmbeddingsAnswer } from './embeddings';
export { Messages, type MessagesRequest } from './messages';
export { generationIdOf, responseIdOf, Responses, type ResponsesRequest } from './responses';
export { throughChat, type CostedCompletion, type Presentation } from './through-chat';
export { BillingModule } from './billing.module';
