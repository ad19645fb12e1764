/**
 * The operations a provider may serve (ARCHITECTURE 10) and, for each, the one list of request
 * fields the gateway knows: the spec's table for its endpoint. The request parsers read it (a
 * field not on it is ignored and reported, spec 4.2 rule 1) and each provider's parameter
 * config maps fields of it, and only of it, to its own wire format, in the manner of Portkey's
 * `ParameterConfig`: a known field a provider's config leaves out is not sent to that provider.
 */
export const OPERATIONS = ['chat', 'embed', 'image', 'speech', 'transcription', 'translation', 'rerank', 'moderation', 'search', 'video', 'realtime'] as const;
export type OperationName = (typeof OPERATIONS)[number];

export const PARAMETERS = {
  /**
   * Spec 4.2's table, and OpenRouter's `usage` (`{include: true}`, which its AI SDK provider sends
   * on every request): the gateway reads it as `stream_options.include_usage` and sends it nowhere.
   */
  chat: [
    'model',
    'preset',
    'messages',
    'models',
    'stream',
    'stream_options',
    'max_tokens',
    'max_completion_tokens',
    'temperature',
    'top_p',
    'top_k',
    'min_p',
    'stop',
    'seed',
    'presence_penalty',
    'frequency_penalty',
    'repetition_penalty',
    'logit_bias',
    'tools',
    'tool_choice',
    'parallel_tool_calls',
    'response_format',
    'reasoning',
    'reasoning_effort',
    'include_reasoning',
    'plugins',
    'transforms',
    'safety_identifier',
    'prompt_cache_key',
    'provider',
    'logprobs',
    'top_logprobs',
    'modalities',
    'prediction',
    'user',
    'n',
    'usage',
  ],
  /** Spec 4.7. */
  embed: ['model', 'input', 'dimensions', 'encoding_format', 'user', 'provider'],
  /** Spec 4.8. */
  image: ['model', 'prompt', 'n', 'size', 'quality', 'response_format', 'image', 'user', 'provider'],
  /** Spec 4.9. */
  speech: ['model', 'input', 'voice', 'response_format', 'speed', 'instructions', 'stream_format', 'provider'],
  /** Spec 4.10: form fields. */
  transcription: ['model', 'file', 'language', 'prompt', 'response_format', 'temperature', 'timestamp_granularities[]', 'provider'],
  translation: ['model', 'file', 'prompt', 'response_format', 'temperature', 'provider'],
  /** Spec 4.12, Cohere's shape. */
  rerank: ['model', 'query', 'documents', 'top_n', 'return_documents', 'provider'],
  /** Spec 4.13. */
  moderation: ['model', 'input', 'provider'],
  /** Spec 4.14 (`max_tokens_per_page` is applied by the gateway to what the engine returns). */
  search: ['model', 'query', 'search_tool_name', 'max_results', 'search_domain_filter', 'country', 'max_tokens_per_page', 'provider'],
  /** Spec 4.15: POST /videos (`seconds` a number or numeric string; `size` or `aspect_ratio`). */
  video: ['model', 'prompt', 'seconds', 'size', 'aspect_ratio', 'resolution', 'image_url', 'provider'],
  /** Spec 4.16: the WebSocket's query; the session's settings travel in its events (`session.update`). */
  realtime: ['model'],
} as const satisfies Record<OperationName, readonly string[]>;

export type ParameterOf<O extends OperationName> = (typeof PARAMETERS)[O][number];

/** One operation's known fields as a set, for the parsers. */
export function knownParameters(operation: OperationName): ReadonlySet<string> {
  return KNOWN[operation];
}

const KNOWN = Object.fromEntries(OPERATIONS.map((o) => [o, new Set<string>(PARAMETERS[o])])) as unknown as Record<OperationName, ReadonlySet<string>>;

/**
 * How one provider takes one known field: as it is under a name (a string), or as the fields a
 * function of it returns (undefined: none).
 */
export type ParameterMapping = string | ((value: unknown, body: Readonly<Record<string, unknown>>) => Record<string, unknown> | undefined);

/** A provider's request mapping for one operation; typed so it can name only known fields. */
export type ParameterConfig<O extends OperationName> = { readonly [P in ParameterOf<O>]?: ParameterMapping };

/**
 * The body a provider is sent: each field of `fields` its config names, mapped; every other field
 * dropped. A field left undefined is absent; null is passed on (OpenAI reads it as the default).
 * A mapping function sees the whole request as `body`.
 */
export function mapParameters(
  config: Readonly<Record<string, ParameterMapping | undefined>>,
  fields: Readonly<Record<string, unknown>>,
  body: Readonly<Record<string, unknown>> = fields,
): Record<string, unknown> {
  const mapped: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(fields)) {
    const target = config[field];
    if (value === undefined || target === undefined) continue;
    if (typeof target === 'string') mapped[target] = value;
    else Object.assign(mapped, target(value, body));
  }
  return mapped;
}

/** A field passed on under its own name, for configs that take most fields as they are. */
export function sameNames<O extends OperationName>(fields: readonly ParameterOf<O>[]): ParameterConfig<O> {
  return Object.fromEntries(fields.map((f) => [f, f])) as ParameterConfig<O>;
}

/**
 * The operations that serve each catalog model type. A route's provider must declare at least
 * one of its model's type (checked when the catalog loads). A type absent here would have no
 * operation: its models would be listed, not called (every type has one now).
 */
export const MODEL_TYPE_OPERATIONS: Readonly<Record<string, readonly OperationName[]>> = {
  chat: ['chat'],
  embedding: ['embed'],
  image: ['image'],
  audio: ['speech', 'transcription', 'translation'],
  rerank: ['rerank'],
  moderation: ['moderation'],
  search: ['search'],
  video: ['video'],
  realtime: ['realtime'],
};
