/**
 * The named schemas of the document (`components.schemas`), one per resource of the spec or of
 * the manual (docs/api/) where the spec leaves it open (spec 2.8). Names follow the spec; each says where
 * its rules come from.
 */
import type { JsonSchema } from './json-schema';
import { ErrorObject, AnthropicError } from './schemas/errors';
import {
  KeyRecord,
  CurrentKey,
  KeyGuardrail,
  KeyRequest,
  AdminKeyRequest,
  CreatedKey,
  Generation,
  GenerationFound,
  Credits,
  Activity,
  AuditEntry,
  Notice,
} from './schemas/account';
import { ChatCompletionRequest, ChatCompletion, ChatUsage, CompletionRequest, Completion } from './schemas/chat';
import {
  EmbeddingsRequest,
  EmbeddingsResponse,
  Embedding,
  RerankRequest,
  RerankResponse,
  ModerationRequest,
  ModerationResponse,
  SearchRequest,
  SearchResult,
  SearchResponse,
} from './schemas/embeddings-search';
import { Model, ModelWithProviders, Pricing } from './schemas/models';
import {
  PresetConfig,
  PresetRequest,
  Preset,
  PresetWithVersions,
  WebhookEndpoint,
  Settings,
  WebhookEvent,
  WebhookEventWithAttempts,
  PromptLogSummary,
  Organization,
  Member,
  MemberChange,
  ProviderKey,
  GuardrailRequest,
  Guardrail,
  GuardrailWithBudgets,
} from './schemas/management';
import { File, Batch, BatchRequest } from './schemas/files-batches';
import { Video, VideoRequest, ImagesRequest, ImagesResponse, SpeechRequest, TranscriptionForm, TranslationForm, Transcription } from './schemas/media';
import { AnthropicMessagesRequest, AnthropicMessage } from './schemas/messages';
import { ResponsesRequest, Response } from './schemas/responses';
import { AccountCredits, AdjustmentRequest, Adjustment, Statement, Check, Readiness } from './schemas/operator';

export const SCHEMAS: Record<string, JsonSchema> = {
  ErrorObject,
  AnthropicError,
  KeyRecord,
  CurrentKey,
  KeyGuardrail,
  KeyRequest,
  AdminKeyRequest,
  CreatedKey,
  ChatCompletionRequest,
  ChatCompletion,
  ChatUsage,
  EmbeddingsRequest,
  EmbeddingsResponse,
  Embedding,
  Model,
  ModelWithProviders,
  Pricing,
  Generation,
  GenerationFound,
  Credits,
  Activity,
  AuditEntry,
  PresetConfig,
  PresetRequest,
  Preset,
  PresetWithVersions,
  WebhookEndpoint,
  Settings,
  WebhookEvent,
  WebhookEventWithAttempts,
  PromptLogSummary,
  File,
  Batch,
  BatchRequest,
  Video,
  VideoRequest,
  AnthropicMessagesRequest,
  AnthropicMessage,
  ResponsesRequest,
  Response,
  CompletionRequest,
  Completion,
  ImagesRequest,
  ImagesResponse,
  SpeechRequest,
  TranscriptionForm,
  TranslationForm,
  Transcription,
  RerankRequest,
  RerankResponse,
  ModerationRequest,
  ModerationResponse,
  SearchRequest,
  SearchResult,
  SearchResponse,
  Organization,
  Member,
  MemberChange,
  ProviderKey,
  GuardrailRequest,
  Guardrail,
  GuardrailWithBudgets,
  AccountCredits,
  AdjustmentRequest,
  Adjustment,
  Statement,
  Notice,
  Check,
  Readiness,
};

export { cursorList, dataOf } from './json-schema';
export { anthropicMessages } from './schemas/messages';
export { upToPattern } from './schemas/shared';
