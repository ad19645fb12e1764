/**
 * What the gateway calls on an upstream, whatever its wire format, and the shapes it gets back:
 * requests and answers in the gateway's (OpenAI's) terms, every failure a ProviderError. Each
 * provider folder translates at its edge.
 */
import { isRecord } from './json';
import type { OperationName, ParameterConfig } from './operations';
import type { ChatChunk, ChatCompletion, EmbeddingsResponse } from './wire';

/**
 * `reasoning.exclude` or `include_reasoning: false` (spec 4.2): the model may think, but the
 * caller does not get the thinking. Upstreams that do not know these fields would return it.
 */
export function excludesReasoning(body: Record<string, unknown>): boolean {
  return (isRecord(body.reasoning) && body.reasoning.exclude === true) || body.include_reasoning === false;
}

export interface NormalizedUsage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  reasoningTokens: number;
}

export interface ChatCompletionResult {
  response: ChatCompletion;
  usage: NormalizedUsage;
  latencyMs: number;
}

export interface EmbeddingsResult {
  response: EmbeddingsResponse;
  usage: NormalizedUsage;
  latencyMs: number;
}

/**
 * What the gateway calls on an upstream, whatever its wire format: requests and answers are in
 * the OpenAI shape, and every failure is a ProviderError. Each adapter translates at its edge.
 */
export interface ChatProvider {
  chatCompletion(body: object, signal?: AbortSignal): Promise<ChatCompletionResult>;
  /** OpenAI chunks, the usage chunk last; a stream cut short throws a `network` ProviderError. */
  streamChatCompletion(body: object, signal?: AbortSignal): AsyncGenerator<ChatChunk>;
  embeddings(body: object, signal?: AbortSignal): Promise<EmbeddingsResult>;
  /** Spec 4.13; only adapters whose catalog entry serves moderation models have it. */
  moderations?(body: object, signal?: AbortSignal): Promise<JsonResult>;
  /** Spec 4.12; only rerank adapters have it. */
  rerank?(body: RerankBody, signal?: AbortSignal): Promise<RerankResult>;
  /** Spec 4.14: one query; only search engine adapters have it. */
  search?(body: SearchBody, signal?: AbortSignal): Promise<SearchResult>;
  /** Spec 4.8-4.10; OpenAI-compatible adapters have them. */
  images?(body: object, signal?: AbortSignal): Promise<JsonResult>;
  speech?(body: object, signal?: AbortSignal): Promise<BinaryResult>;
  transcribe?(kind: 'transcriptions' | 'translations', form: AudioForm, signal?: AbortSignal): Promise<BinaryResult>;
  /**
   * Spec 4.15 and 3.1: a video job is started by createVideo and followed by getVideo until it is
   * `completed` or `failed`; only video adapters (`openai`, `videorouter`) have these.
   */
  createVideo?(body: VideoJobRequest, signal?: AbortSignal): Promise<VideoJob>;
  getVideo?(id: string, signal?: AbortSignal): Promise<VideoJob>;
  /** Stops the job; idempotent: a job already finished (or already cancelled) is not an error. */
  cancelVideo?(id: string, signal?: AbortSignal): Promise<void>;
  /** The clip (`video/mp4`) or its poster image, once the job has completed. */
  videoContent?(id: string, variant: VideoVariant, signal?: AbortSignal): Promise<BinaryResult>;
  /**
   * Spec 4.16: where to open a realtime session with `model` (the provider's id) and the
   * headers of the upgrade; the gateway dials it and relays the events both ways.
   */
  realtimeConnection?(model: string): RealtimeConnection;
}

/** A provider's realtime WebSocket endpoint (WIRE-FORMATS 3.1): `ws(s)://.../realtime?model=<id>` and its auth. */
export interface RealtimeConnection {
  url: string;
  headers: Record<string, string>;
}

/**
 * A video request in the gateway's terms (spec 4.15), already checked against the model: the
 * upstream model id, `seconds` as a number, and `size` (`WxH`) or `aspect_ratio` (`16:9`) with
 * `resolution` (`720p`), each null when not given. Each adapter turns it into its own fields.
 */
export interface VideoJobRequest {
  model: string;
  prompt: string;
  seconds: number;
  size: string | null;
  aspect_ratio: string | null;
  resolution: string | null;
  /** A public https URL of the first frame. */
  image_url: string | null;
}

/** Spec 2.4's statuses; `cancelled` only from providers that can cancel. */
export const VIDEO_STATUSES = ['queued', 'in_progress', 'completed', 'failed', 'cancelled'] as const;
export type VideoStatus = (typeof VIDEO_STATUSES)[number];
export type VideoVariant = 'video' | 'thumbnail';

/** A provider's video job, whatever its wire format. */
export interface VideoJob {
  /** The provider's own id, for getVideo, cancelVideo and videoContent. */
  id: string;
  status: VideoStatus;
  /** Whole percent, 0-100. */
  progress: number;
  /** Set when the provider reports why the job failed. */
  error: { code: string; message: string } | null;
  /** What the provider charged, exact in nano-USD, where it reports it (a router's `usage.cost`); null where it does not (OpenAI). */
  costNano: bigint | null;
  /** How long the provider asks to wait before the next poll (`openai-poll-after-ms`), or null. */
  pollAfterMs: number | null;
  /** A direct MP4 URL, where the provider gives one. */
  url: string | null;
}

/** A rerank request in the gateway's terms (Cohere's, which Jina's extends). */
export interface RerankBody {
  model: string;
  query: string;
  documents: string[];
  top_n?: number;
}

/** A rerank answer in the gateway's terms, whatever the upstream's shape. */
export interface RerankResult {
  /** Best first. */
  results: { index: number; relevance_score: number }[];
  /** What the provider billed: Cohere's search units, or Jina's tokens; null when it did not say. */
  searchUnits: number | null;
  totalTokens: number | null;
  latencyMs: number;
}

/**
 * One web search query in the gateway's terms (spec 4.14). `search_domain_filter` as Perplexity
 * takes it: domains to keep, or, each prefixed with `-`, domains to leave out (not mixed).
 * `country`: an ISO 3166-1 alpha-2 code.
 */
export interface SearchBody {
  query: string;
  max_results: number;
  search_domain_filter?: string[];
  country?: string;
}

/** One result, whatever the engine's shape: `content` is the page's text where the engine gives it, else the snippet. */
export interface SearchHit {
  title: string;
  url: string;
  snippet: string;
  content: string;
  /** Publication date as the engine gives it, or null. */
  date: string | null;
}

export interface SearchResult {
  /** Best first, at most `max_results`, only from the domains the filter allows. */
  results: SearchHit[];
  latencyMs: number;
}

export interface JsonResult {
  json: Record<string, unknown>;
  latencyMs: number;
}

/** A body that is not JSON (audio, or a transcript as text), with the type the provider gave it. */
export interface BinaryResult {
  bytes: Buffer;
  contentType: string;
  latencyMs: number;
}

/** An audio file and the text fields that go with it in a multipart form. */
export interface AudioForm {
  file: Buffer;
  filename: string;
  contentType: string;
  fields: Record<string, string>;
  /** Fields given once per value (`timestamp_granularities[]`). */
  lists?: [string, string][];
}

/** Usage in the gateway's terms; absent members are 0. Reasoning is inside completionTokens. */
export function normalizeUsage(usage: unknown): NormalizedUsage {
  const u = isRecord(usage) ? usage : {};
  const prompt = isRecord(u.prompt_tokens_details) ? u.prompt_tokens_details : {};
  const completion = isRecord(u.completion_tokens_details) ? u.completion_tokens_details : {};
  return {
    promptTokens: count(u.prompt_tokens),
    completionTokens: count(u.completion_tokens),
    cachedTokens: count(prompt.cached_tokens),
    reasoningTokens: count(completion.reasoning_tokens),
  };
}

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

/** What a catalog provider entry gives its client. */
export interface AdapterOptions {
  baseUrl: string;
  apiKey: string;
  timeoutMs?: number;
  /** OpenAI-compatible upstreams: OpenAI's own request fields, or a router's (see the catalog). */
  dialect?: 'openai' | 'router';
}

/**
 * A provider, in the manner of Portkey's provider configs: the operations it serves, each with
 * its request mapping (which known fields it takes, under which names); an operation it does not
 * declare is unsupported, and the catalog refuses to route a model of that type to it. Its client
 * speaks the wire format: it sends the mapped request and turns the answer (and every failure)
 * back into the gateway's shapes.
 */
export interface ProviderDeclaration {
  readonly operations: { readonly [O in OperationName]?: ParameterConfig<O> };
  client(options: AdapterOptions): ChatProvider;
}

/** The client method that carries each operation. */
export const OPERATION_METHODS = {
  chat: 'chatCompletion',
  embed: 'embeddings',
  image: 'images',
  speech: 'speech',
  transcription: 'transcribe',
  translation: 'transcribe',
  rerank: 'rerank',
  moderation: 'moderations',
  search: 'search',
  video: 'createVideo',
  realtime: 'realtimeConnection',
} as const satisfies Record<OperationName, keyof ChatProvider>;
