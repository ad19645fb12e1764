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
 * Every call a provider may serve, by name, with its signature: requests and answers in the
 * gateway's (OpenAI's) terms, every failure a ProviderError. The names are the operations'
 * (OPERATIONS); chat and video are served by more than one call each (OPERATION_CALLS).
 */
export interface Calls {
  chat: (body: object, signal?: AbortSignal) => Promise<ChatCompletionResult>;
  /** OpenAI chunks, the usage chunk last; a stream cut short throws a `network` ProviderError. */
  chat_stream: (body: object, signal?: AbortSignal) => AsyncGenerator<ChatChunk>;
  embed: (body: object, signal?: AbortSignal) => Promise<EmbeddingsResult>;
  /** Spec 4.8. */
  image: (body: object, signal?: AbortSignal) => Promise<JsonResult>;
  /** Spec 4.9. */
  speech: (body: object, signal?: AbortSignal) => Promise<BinaryResult>;
  /** Spec 4.10. */
  transcription: (form: AudioForm, signal?: AbortSignal) => Promise<BinaryResult>;
  translation: (form: AudioForm, signal?: AbortSignal) => Promise<BinaryResult>;
  /** Spec 4.12. */
  rerank: (body: RerankBody, signal?: AbortSignal) => Promise<RerankResult>;
  /** Spec 4.13. */
  moderation: (body: object, signal?: AbortSignal) => Promise<JsonResult>;
  /** Spec 4.14: one query. */
  search: (body: SearchBody, signal?: AbortSignal) => Promise<SearchResult>;
  /**
   * Spec 4.15 and 3.1: a video job is started by video_create and followed by video_get until it
   * is `completed` or `failed`.
   */
  video_create: (body: VideoJobRequest, signal?: AbortSignal) => Promise<VideoJob>;
  video_get: (id: string, signal?: AbortSignal) => Promise<VideoJob>;
  /** Stops the job; idempotent: a job already finished (or already cancelled) is not an error. */
  video_cancel: (id: string, signal?: AbortSignal) => Promise<void>;
  /** The clip (`video/mp4`) or its poster image, once the job has completed. */
  video_content: (id: string, variant: VideoVariant, signal?: AbortSignal) => Promise<BinaryResult>;
  /**
   * Spec 4.16: where to open a realtime session with `model` (the provider's id) and the
   * headers of the upgrade; the gateway dials it and relays the events both ways.
   */
  realtime: (model: string) => RealtimeConnection;
}

export type CallName = keyof Calls;

/** The calls that serve each operation: a provider that declares an operation serves all of them. */
export const OPERATION_CALLS = {
  chat: ['chat', 'chat_stream'],
  embed: ['embed'],
  image: ['image'],
  speech: ['speech'],
  transcription: ['transcription'],
  translation: ['translation'],
  rerank: ['rerank'],
  moderation: ['moderation'],
  search: ['search'],
  video: ['video_create', 'video_get', 'video_cancel', 'video_content'],
  realtime: ['realtime'],
} as const satisfies Record<OperationName, readonly CallName[]>;

export type CallsOf<O extends OperationName> = (typeof OPERATION_CALLS)[O][number];

/**
 * A provider's client: the calls of the operations it declares, nothing else. There is no call
 * every provider must have: one it does not serve is absent, and operationOf says so.
 */
export type Provider = { readonly [C in CallName]?: Calls[C] };

/** The provider's `call`, or undefined where it does not serve it. */
export function operationOf<C extends CallName>(provider: Provider, call: C): Calls[C] | undefined {
  return provider[call];
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

/** One call as a provider folder writes it: the provider's connection first, then the call's own arguments. */
export type Implementation<C extends CallName, Connection> = (connection: Connection, ...args: Parameters<Calls[C]>) => ReturnType<Calls[C]>;

/**
 * One operation of a provider, in one file of its folder: its request mapping (which known
 * fields it takes, under which names) and the calls that serve it.
 */
export interface Operation<O extends OperationName, Connection> {
  readonly parameters: ParameterConfig<O>;
  readonly calls: { readonly [C in CallsOf<O>]: Implementation<C, Connection> };
}

export type Operations<Connection> = { readonly [O in OperationName]?: Operation<O, Connection> };

/**
 * A provider, in the manner of Portkey's provider configs: the operations it serves, each with
 * its request mapping; an operation it does not declare is unsupported, and the catalog refuses
 * to route a model of that type to it. Its client speaks the wire format: it sends the mapped
 * request and turns the answer (and every failure) back into the gateway's shapes.
 */
export interface ProviderDeclaration {
  readonly operations: { readonly [O in OperationName]?: { readonly parameters: ParameterConfig<O> } };
  client(options: AdapterOptions): Provider;
}

/** The client of a provider that declares `Ops`: each of their calls, and only those. */
export type Served<Ops> = { readonly [C in CallsOf<keyof Ops & OperationName>]: Calls[C] };

/**
 * A provider folder's declaration: how it connects (its base URL, key and headers, once per
 * client) and its operations, each a line of its `index.ts`.
 */
export function declareProvider<Connection, Options extends AdapterOptions, const Ops extends Operations<Connection>>(
  connect: (options: Options) => Connection,
  operations: Ops,
): { readonly operations: Ops; client(options: Options): Served<Ops> } {
  return {
    operations,
    client: (options) => {
      const connection = connect(options);
      const provider: Record<string, (...args: unknown[]) => unknown> = {};
      for (const operation of Object.values(operations) as Operation<OperationName, Connection>[]) {
        for (const [name, call] of Object.entries(operation.calls) as [CallName, (connection: Connection, ...args: unknown[]) => unknown][]) {
          provider[name] = (...args) => call(connection, ...args);
        }
      }
      return provider as Served<Ops>;
    },
  };
}
