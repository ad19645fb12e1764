/**
 * The named schemas of the document (`components.schemas`), one per resource of the spec or of
 * the manual (docs/api/) where the spec leaves it open (spec 2.8). Names follow the spec; each says where
 * its rules come from.
 */
import { PARAMETERS } from '@svc/providers';
import { QUANTIZATIONS, SORTS } from '@svc/catalog';
import {
  IMAGE_QUALITIES,
  MAX_DOMAIN_FILTERS,
  MAX_EMBEDDING_INPUTS,
  MAX_IMAGE_SIDE,
  MAX_IMAGES_PER_REQUEST,
  MAX_INPUT_IMAGES,
  MAX_MODERATION_INPUTS,
  MAX_QUERY_CHARACTERS,
  MAX_RERANK_DOCUMENTS,
  MAX_SEARCH_QUERIES,
  MAX_SEARCH_RESULTS,
  MAX_SPEECH_CHARACTERS,
  MAX_TOKENS_PER_PAGE,
  SPEECH_FORMATS,
} from '@svc/interfaces';
import { MAX_VIDEO_PROMPT_CHARACTERS } from '@svc/videos';
import {
  anyObject,
  arr,
  bool,
  constant,
  cursorList,
  dataOf,
  dateTime,
  extension,
  int,
  type JsonSchema,
  nullable,
  num,
  obj,
  oneOfValues,
  ref,
  str,
  unixSeconds,
  usd,
} from './json-schema';

/**
 * The request rules below come from the constants the server's validators use (libs/interfaces,
 * libs/videos), so the document cannot drift from what the server refuses (issue 41 item 12).
 * `model` and the other identifiers the server reads with `requireString` must not be empty.
 */
const modelId = (description?: string): JsonSchema => str(description, { minLength: 1 });
/** What the server checks with `value.trim() !== ''`: at least one character that is not white space. */
const NOT_BLANK = '\\S';
const text = (description?: string, more: JsonSchema = {}): JsonSchema => str(description, { minLength: 1, pattern: NOT_BLANK, ...more });

/** `^(?:1|...|max)$` for whole numbers from 1 to `max` without leading zeros, as a pattern can say it. */
export function upToPattern(max: number): string {
  const digits = String(max);
  const alternatives: string[] = [];
  for (let length = 1; length < digits.length; length++) alternatives.push(length === 1 ? '[1-9]' : `[1-9]\\d{${length - 1}}`);
  for (let i = 0; i < digits.length; i++) {
    const low = i === 0 ? 1 : 0;
    const high = Number(digits[i]) - 1;
    const rest = digits.length - i - 1;
    if (high >= low) alternatives.push(`${digits.slice(0, i)}[${low}-${high}]${rest > 0 ? `\\d{${rest}}` : ''}`);
  }
  alternatives.push(digits);
  return `(?:${alternatives.join('|')})`;
}

/**
 * The chat, messages and responses validators read an optional field set to null as left out
 * (class-validator's IsOptional, the `optional*` readers of libs/interfaces): so does the document.
 */
function nullWhenOptional(properties: Record<string, JsonSchema>, required: readonly string[], notNull: readonly string[] = []): Record<string, JsonSchema> {
  const typed = (schema: JsonSchema) => 'type' in schema || 'anyOf' in schema || 'const' in schema || 'enum' in schema;
  const keep = (name: string, schema: JsonSchema) => required.includes(name) || notNull.includes(name) || !typed(schema);
  return Object.fromEntries(Object.entries(properties).map(([name, schema]) => [name, keep(name, schema) ? schema : nullable(schema)]));
}

const stringOrStrings = (description?: string): JsonSchema => ({ anyOf: [str(), arr(str())], ...(description ? { description } : {}) });

/** Spec 2.1: every 4XX/5XX body. */
const ErrorObject = obj(
  {
    error: obj(
      {
        message: str(),
        type: str(
          'spec 7: invalid_request_error, authentication_error, insufficient_quota, permission_error, not_found_error, idempotency_conflict, model_retired, rate_limit_error, api_error, service_unavailable',
        ),
        code: nullable(str('machine-readable reason, e.g. model_not_found, unsupported_parameter')),
        param: nullable(str('the request field at fault, e.g. messages[0].content')),
      },
      { required: ['message', 'type'] },
    ),
  },
  { description: 'Spec 2.1: the error object of every 4XX/5XX answer.' },
);

/** Spec 2.1 and 4.3: on /v1/messages* errors take Anthropic's shape; our `code` and `param` ride along when set. */
const AnthropicError = obj(
  {
    type: constant('error'),
    error: obj(
      {
        type: oneOfValues([
          'invalid_request_error',
          'authentication_error',
          'billing_error',
          'permission_error',
          'not_found_error',
          'request_too_large',
          'rate_limit_error',
          'api_error',
          'overloaded_error',
          'timeout_error',
        ]),
        message: str(),
        code: extension(str()),
        param: extension(str()),
      },
      { required: ['type', 'message'] },
    ),
  },
  { description: "Anthropic's error shape (spec 4.3)." },
);

/** Spec 2.2. */
const keyLimits = {
  limit: nullable(usd('spend limit in USD per `limit_reset` period')),
  limit_reset: nullable(oneOfValues(['daily', 'weekly', 'monthly', 'never'])),
  limit_remaining: nullable(usd()),
  limit_resets_at: nullable(dateTime()),
  usage: nullable(usd('lifetime spend in USD')),
  usage_daily: nullable(usd()),
  usage_weekly: nullable(usd('since Monday 00:00 UTC')),
  usage_monthly: nullable(usd()),
};

/** Spec 2.3 plus the fields docs/api/keys.md lists. */
const KeyRecord = obj(
  {
    id: str(),
    name: str(),
    project: nullable(str()),
    environment: oneOfValues(['live', 'test']),
    scope: oneOfValues(['full', 'read_only', 'management']),
    hint: str('prefix and last four characters of the secret'),
    organization_id: nullable(str()),
    created_by: str(),
    created_at: dateTime(),
    updated_at: dateTime(),
    expires_at: nullable(dateTime()),
    revoked: bool(),
    revoked_at: nullable(dateTime()),
    ...keyLimits,
    allowed_models: nullable(arr(str())),
    allowed_ips: nullable(arr(str())),
    allowed_referrers: nullable(arr(str())),
    rpm_limit: nullable(int()),
    tpm_limit: nullable(int()),
    rate_limit: obj({ requests_per_minute: int(), tokens_per_minute: int(), concurrent_requests: int() }),
  },
  { description: 'Spec 2.3: a key record (KeyLimits, spec 2.2, plus its settings).' },
);

/** Spec 4.19 (`libs/management/src/key.request.ts`): every field optional; `null` clears a nullable one on PATCH. */
const keyRequestProperties = {
  name: str(undefined, { maxLength: 200 }),
  project: nullable(str(undefined, { maxLength: 200 })),
  environment: oneOfValues(['live', 'test']),
  scope: oneOfValues(['full', 'read_only', 'management']),
  limit: nullable(num('USD per `limit_reset` period', { minimum: 0, maximum: 1_000_000_000 })),
  limit_reset: oneOfValues(['daily', 'weekly', 'monthly', 'never'], 'default monthly; never is a lifetime budget'),
  allowed_models: nullable(arr(str(), { maxItems: 1000 })),
  allowed_ips: nullable(arr(str('IP address or CIDR range'), { maxItems: 1000 })),
  allowed_referrers: nullable(arr(str('example.com or *.example.com'), { maxItems: 1000 })),
  rpm_limit: nullable(int('can only lower the default', { minimum: 1, maximum: 2147483647 })),
  tpm_limit: nullable(int('can only lower the default', { minimum: 1, maximum: 2147483647 })),
  expires_in_days: nullable(int(undefined, { minimum: 1, maximum: 3650 })),
};
const KeyRequest = obj(keyRequestProperties, { required: [], description: 'Spec 4.19: POST /keys body; all optional.' });
/** docs/api/operator.md: as POST /v1/keys, plus the organization the key belongs to. */
const AdminKeyRequest = obj({ ...keyRequestProperties, org_id: str() }, { required: [] });

const CreatedKey = obj({
  data: ref('KeyRecord'),
  key: str('the secret (`svc_live_...` or `svc_test_...`), returned only this once', { pattern: '^svc_(live|test)_' }),
});

/** Spec 2.6: usage of a chat answer, OpenAI's fields plus `cost`. */
const ChatUsage = obj(
  {
    prompt_tokens: int(),
    completion_tokens: int(),
    total_tokens: int(),
    prompt_tokens_details: obj({ cached_tokens: int() }, { required: [], open: true }),
    completion_tokens_details: obj({ reasoning_tokens: int() }, { required: [], open: true }),
    cost: extension(usd('USD charged (spec 1 rule 2)')),
    server_tool_use: extension(obj({ web_search_requests: int(), web_search_cost: usd() }, { required: [], open: true })),
  },
  { required: ['prompt_tokens', 'completion_tokens', 'total_tokens', 'cost'], open: true },
);

/** Spec 4.2, as `parseProviderPreferences` (libs/catalog) reads it: unknown members are refused; null is none. */
const providerNames = arr(str(undefined, { minLength: 1 }));
const ProviderPreferences = extension(
  nullable(
    obj(
      {
        order: providerNames,
        only: providerNames,
        ignore: providerNames,
        allow_fallbacks: bool(),
        sort: oneOfValues(SORTS),
        require_parameters: bool(),
        data_collection: oneOfValues(['allow', 'deny']),
        quantizations: arr(oneOfValues(QUANTIZATIONS)),
        zdr: bool(),
      },
      { required: [], description: 'Spec 4.2: provider routing preferences.' },
    ),
  ),
);

const Plugin = obj({ id: oneOfValues(['web', 'response-healing', 'context-compression']), enabled: bool() }, { required: ['id'], open: true });

/**
 * The rules of libs/interfaces/src/chat-completion.request.ts (ROLES, the ranges of its `Is`
 * checks), written as decorators this document does not read: the generated-request test
 * (test/e2e/openapi-requests.e2e.ts) sends their bounds and one past them to keep both in step.
 */
const chatContent = { anyOf: [str(), arr(anyObject('a content part: text, image_url or file')), { type: 'null' }] };
const toolCall = obj(
  { id: str(), type: constant('function'), function: obj({ name: str(), arguments: str('JSON text') }, { open: true }) },
  { required: ['id', 'function'], open: true },
);
const chatMessage = {
  anyOf: [
    obj(
      { role: oneOfValues(['system', 'developer', 'user', 'assistant']), content: chatContent, name: str(), tool_calls: arr(toolCall) },
      { required: ['role'], open: true },
    ),
    obj(
      { role: constant('tool'), content: chatContent, tool_call_id: str('the id of the tool call this message answers', { minLength: 1 }) },
      { required: ['role', 'tool_call_id'], open: true },
    ),
  ],
};
const REASONING_EFFORTS = ['minimal', 'low', 'medium', 'high'];

/** Spec 4.2's table; every field `libs/providers` knows for chat (PARAMETERS.chat). */
const chatRequestProperties: Record<(typeof PARAMETERS.chat)[number], JsonSchema> = {
  model: modelId('model id from /models, or `@preset/<slug>`, with optional suffixes (`:online`, `:nitro`, `:floor`, `:exacto`, `:thinking`)'),
  preset: extension(nullable(str('preset slug; request fields override it', { minLength: 1 }))),
  messages: arr(chatMessage, { minItems: 1 }),
  models: extension(arr(str(), { maxItems: 2, description: 'up to 2 fallback models tried in order (spec 4.2 rule 6)' })),
  stream: bool(),
  stream_options: obj({ include_usage: bool() }, { required: [], open: true }),
  usage: extension(
    obj({ include: bool('OpenRouter usage accounting: on a stream, the same as `stream_options.include_usage`') }, { required: [], open: true }),
  ),
  max_tokens: int(undefined, { minimum: 1 }),
  max_completion_tokens: int(undefined, { minimum: 1 }),
  temperature: num(undefined, { minimum: 0, maximum: 2 }),
  top_p: num(undefined, { minimum: 0, maximum: 1 }),
  top_k: extension(int(undefined, { minimum: 0 })),
  min_p: extension(num(undefined, { minimum: 0, maximum: 1 })),
  stop: { anyOf: [str(), arr(str(), { maxItems: 4 })] },
  seed: int(),
  presence_penalty: num(undefined, { minimum: -2, maximum: 2 }),
  frequency_penalty: num(undefined, { minimum: -2, maximum: 2 }),
  repetition_penalty: extension(num(undefined, { minimum: 0, maximum: 2 })),
  logit_bias: anyObject(),
  tools: arr(anyObject('function tool')),
  tool_choice: { description: 'none, auto, required, or a named function' },
  parallel_tool_calls: bool(),
  response_format: {
    anyOf: [
      obj({ type: oneOfValues(['text', 'json_object']) }, { open: true }),
      obj(
        {
          type: constant('json_schema'),
          json_schema: obj({ name: str(), schema: anyObject('a JSON schema'), strict: bool() }, { required: ['name'], open: true }),
        },
        { open: true },
      ),
    ],
  },
  reasoning: extension(
    obj({ effort: oneOfValues(REASONING_EFFORTS), max_tokens: int(undefined, { minimum: 0 }), exclude: bool(), enabled: bool() }, { required: [], open: true }),
  ),
  reasoning_effort: oneOfValues([...REASONING_EFFORTS, 'none']),
  include_reasoning: extension(bool()),
  plugins: extension(arr(Plugin)),
  transforms: extension(arr(constant('middle-out'), { description: '["middle-out"] equals context-compression; [] disables it' })),
  safety_identifier: str(),
  prompt_cache_key: str(),
  provider: ProviderPreferences,
  logprobs: nullable(bool()),
  top_logprobs: nullable(int(undefined, { minimum: 0, maximum: 20 })),
  modalities: nullable(arr(oneOfValues(['text', 'audio', 'image']))),
  prediction: nullable(obj({ type: constant('content'), content: { anyOf: [str(), arr(anyObject('text part'))] } }, { open: true })),
  user: str(),
  n: int('must be 1 (spec 4.2 rule 2)', { const: 1 }),
};

// The plugin step reads `plugins` and `transforms` itself, and refuses null for them.
const ChatCompletionRequest = obj(nullWhenOptional(chatRequestProperties, ['model', 'messages'], ['plugins', 'transforms']), {
  required: ['model', 'messages'],
  open: true,
  description: 'Spec 4.2. Unknown fields are ignored and named in `x-svc-ignored-params` (rule 1).',
});

const ChatCompletion = obj(
  {
    id: str('the generation id, also in `x-svc-generation-id`'),
    object: constant('chat.completion'),
    created: unixSeconds(),
    model: str('the catalog model that answered'),
    system_fingerprint: nullable(str()),
    service_tier: nullable(str()),
    choices: arr(
      obj(
        {
          index: int(),
          message: obj(
            {
              role: constant('assistant'),
              content: nullable(str()),
              refusal: nullable(str()),
              tool_calls: arr(anyObject()),
              annotations: arr(anyObject('url_citation')),
              reasoning: extension(nullable(str('reasoning text (spec 2.6)'))),
            },
            { required: ['role', 'content'], open: true },
          ),
          logprobs: nullable(anyObject()),
          finish_reason: nullable(str()),
        },
        { required: ['index', 'message', 'finish_reason'], open: true },
      ),
    ),
    usage: ref('ChatUsage'),
  },
  { required: ['id', 'object', 'created', 'model', 'choices', 'usage'], open: true, description: 'Spec 4.2 response 200 (JSON).' },
);

const Embedding = obj({ object: constant('embedding'), index: int(), embedding: { anyOf: [arr(num()), str('base64')] } }, { open: true });

const EmbeddingsRequest = obj(
  {
    model: modelId(),
    input: {
      description: `a string, up to ${MAX_EMBEDDING_INPUTS} strings, a token array or up to ${MAX_EMBEDDING_INPUTS} token arrays; nothing empty`,
      anyOf: [
        str(undefined, { minLength: 1 }),
        arr(str(undefined, { minLength: 1 }), { minItems: 1, maxItems: MAX_EMBEDDING_INPUTS }),
        arr(int(undefined, { minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), { minItems: 1 }),
        arr(arr(int(undefined, { minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), { minItems: 1 }), { minItems: 1, maxItems: MAX_EMBEDDING_INPUTS }),
      ],
    },
    dimensions: nullable(int(undefined, { minimum: 1 })),
    encoding_format: nullable(oneOfValues(['float', 'base64'])),
    user: str(),
    provider: ProviderPreferences,
  } satisfies Record<(typeof PARAMETERS.embed)[number], JsonSchema>,
  { required: ['model', 'input'], open: true, description: 'Spec 4.7.' },
);

const EmbeddingsResponse = obj(
  {
    object: constant('list'),
    data: arr(ref('Embedding')),
    model: str(),
    usage: obj({ prompt_tokens: int(), total_tokens: int(), cost: extension(usd()) }, { required: ['prompt_tokens', 'total_tokens', 'cost'], open: true }),
    id: extension(str('the generation id')),
  },
  { required: ['object', 'data', 'model', 'usage', 'id'], open: true },
);

/** Spec 2.8 (catalog entry), as `apps/gateway/src/models/model.presenter.ts` shows it. */
const Pricing = obj(
  {
    prompt: str('USD per input token'),
    completion: str('USD per output token'),
    input_cache_read: str('USD per cached input token'),
    request: str('USD per query'),
    image: str('USD per image'),
    second: str('USD per second'),
    character: str('USD per character'),
    search_unit: str('USD per search unit'),
    audio_input: str(),
    audio_input_cache_read: str(),
    audio_output: str(),
  },
  { required: ['prompt', 'completion', 'input_cache_read'], description: 'USD as exact decimal strings.' },
);

const modelProperties = {
  id: str(),
  object: constant('model'),
  created: unixSeconds(),
  owned_by: str(),
  name: extension(str()),
  type: extension(oneOfValues(['chat', 'embedding', 'image', 'audio', 'rerank', 'moderation', 'search', 'video', 'realtime'])),
  context_length: extension(int()),
  architecture: extension(obj({ input_modalities: arr(str()), output_modalities: arr(str()) })),
  supported_parameters: extension(arr(str())),
  pricing: extension(ref('Pricing')),
  deprecated: extension(bool()),
  sunset: extension(nullable(dateTime())),
  replacement: extension(nullable(str())),
  uptime: extension(nullable(num())),
  voices: extension(arr(str())),
  video: extension(obj({ durations: arr(num()), aspect_ratios: arr(str()), resolutions: arr(str()), sizes: arr(str()), image_to_video: bool() })),
};
const modelRequired = [
  'id',
  'object',
  'created',
  'owned_by',
  'name',
  'type',
  'context_length',
  'architecture',
  'supported_parameters',
  'pricing',
  'deprecated',
  'sunset',
  'replacement',
  'uptime',
];

const Model = obj(modelProperties, { required: modelRequired, description: 'Spec 2.8: a catalog entry.' });

const ModelWithProviders = obj(
  {
    ...modelProperties,
    providers: extension(
      arr(
        obj({
          name: str(),
          context_length: int(),
          pricing: ref('Pricing'),
          quantization: nullable(str()),
          supports_tools: bool(),
          data_collection: oneOfValues(['allow', 'deny']),
          zdr: bool(),
          uptime: nullable(num()),
        }),
      ),
    ),
  },
  { required: [...modelRequired, 'providers'] },
);

/** docs/api/account.md "Generations and activity". */
const generationProperties = {
  id: str(),
  model: str(),
  provider: nullable(str()),
  endpoint: str(),
  status: oneOfValues(['in_progress', 'completed', 'not_billed', 'failed', 'expired', 'cached']),
  key_id: nullable(str()),
  client_request_id: nullable(str()),
  preset: nullable(obj({ slug: str(), version: int() })),
  created_at: dateTime(),
  finished_at: nullable(dateTime()),
  tokens_prompt: int(),
  tokens_completion: int(),
  tokens_cached: int(),
  tokens_reasoning: int(),
  total_cost: usd(),
  usage_by_meter: { type: 'object', additionalProperties: num(), description: 'what the charge billed, by meter' },
  cost_lines: nullable(
    arr(
      obj({
        meter: str('a meter of usage_by_meter (input counts only the input not served from cache), or rounding, batch_discount, byok_credit, byok_fee'),
        quantity: num('units of the meter; for rounding, nanos; for batch_discount and byok_fee, the percent'),
        unit_price: usd('USD per unit, exact (may be finer than a nano-dollar)'),
        amount: usd('USD, quantity x unit_price truncated to the nano-dollar; negative for a discount or credit'),
      }),
      {
        description:
          'issue 23: the charge line by line; the amounts add up to total_cost exactly. [] when nothing was charged; null for a charge recorded before lines were whose lines cannot be rebuilt',
      },
    ),
  ),
  byok: bool("answered with the account's own provider key: billed the BYOK fee"),
  batch: bool('a batch line, billed at the batch discount'),
  latency_ms: nullable(int()),
  time_to_first_token_ms: nullable(int()),
  error_code: nullable(str()),
  cache_source_id: nullable(str()),
};
const Generation = obj(generationProperties);
/** POST /v1/generations/lookup: a generation found, flagged so. */
const GenerationFound = obj({ found: constant(true), ...generationProperties });

const Credits = obj(
  {
    total_credits: usd(),
    total_usage: usd(),
    total_adjustments: usd('issue 23: credit notes and operator adjustments, signed'),
    balance: usd('total_credits - total_usage + total_adjustments'),
    held: usd(),
    open_holds: int(),
    available: usd(),
  },
  { description: 'Spec 4.20: balance and lifetime totals.' },
);

const Activity = obj(
  {
    date: str(undefined, { format: 'date' }),
    model: str(),
    endpoint: str(),
    key_id: str(),
    requests: int(),
    requests_not_billed: int(),
    prompt_tokens: int(),
    completion_tokens: int(),
    cached_tokens: int(),
    reasoning_tokens: int(),
    usage: usd(),
  },
  {
    required: [
      'date',
      'model',
      'endpoint',
      'requests',
      'requests_not_billed',
      'prompt_tokens',
      'completion_tokens',
      'cached_tokens',
      'reasoning_tokens',
      'usage',
    ],
    open: true,
  },
);

const AuditEntry = obj({
  id: str(),
  at: dateTime(),
  account_id: str(),
  actor: str(),
  actor_account_id: nullable(str()),
  ip: nullable(str()),
  action: str(),
  target_id: nullable(str()),
  details: anyObject(),
});

/** Spec 2.5. */
const PresetConfig = obj(
  {
    model: str(),
    models: arr(str(), { maxItems: 2 }),
    system_prompt: str(),
    params: anyObject(),
    provider: anyObject('routing preferences'),
    reasoning: anyObject(),
    plugins: arr(anyObject()),
    tools: arr(anyObject()),
    cache: obj({ enabled: bool(), ttl_seconds: int(undefined, { minimum: 1, maximum: 86400 }) }, { required: [] }),
  },
  { required: [] },
);
const PresetRequest = obj(
  { slug: str(undefined, { pattern: '^[a-z0-9][a-z0-9-]{0,63}$' }), name: nullable(str()), description: nullable(str()), config: ref('PresetConfig') },
  { required: ['slug'] },
);
const presetProperties = {
  slug: str(),
  name: nullable(str()),
  description: nullable(str()),
  version: int(),
  config: ref('PresetConfig'),
  created_at: dateTime(),
  updated_at: dateTime(),
};
const Preset = obj(presetProperties);
const PresetWithVersions = obj({
  ...presetProperties,
  versions: arr(obj({ version: int(), config: ref('PresetConfig'), rolled_back_to: nullable(int()), created_at: dateTime(), created_by: str() })),
});

const WebhookEndpoint = obj({ id: str(), url: str(), events: nullable(arr(str())), paused: bool(), consecutive_failures: int(), updated_at: dateTime() });
const Settings = obj({
  prompt_logging: obj({ enabled: bool(), retention_days: int(undefined, { minimum: 1, maximum: 30 }) }),
  step_up: obj({ enabled: bool(), email: nullable(str()) }),
  webhook: nullable(ref('WebhookEndpoint')),
});
const webhookEventProperties = {
  id: str(),
  type: str(),
  created: unixSeconds(),
  data: anyObject(),
  delivery: obj({
    state: oneOfValues(['pending', 'delivered', 'failed', 'cancelled']),
    attempts: int(),
    next_attempt_at: nullable(dateTime()),
    last_status_code: nullable(int()),
    last_error: nullable(str()),
  }),
};
const WebhookEvent = obj(webhookEventProperties);
const WebhookEventWithAttempts = obj({
  ...webhookEventProperties,
  attempts: arr(obj({ attempt: int(), at: dateTime(), status_code: nullable(int()), latency_ms: nullable(int()), error: nullable(str()), delivered: bool() })),
});

const PromptLogSummary = obj({ generation_id: str(), key_id: str(), endpoint: str(), created_at: dateTime(), expires_at: dateTime() });

/** OpenAI's file object (spec 2.8 leaves it open). */
const File = obj(
  {
    id: str(),
    object: constant('file'),
    bytes: int(),
    created_at: unixSeconds(),
    filename: str(),
    purpose: str(),
    status: str(),
    expires_at: nullable(unixSeconds()),
    status_details: nullable(str()),
  },
  { required: ['id', 'object', 'bytes', 'created_at', 'filename', 'purpose'], open: true },
);

/** OpenAI's batch object (spec 2.8 leaves it open; docs/api/files-batches.md "Batches"). */
const ts = nullable(unixSeconds());
const Batch = obj(
  {
    id: str(),
    object: constant('batch'),
    endpoint: oneOfValues(['/v1/chat/completions', '/v1/embeddings']),
    errors: nullable(
      obj({
        object: constant('list'),
        data: arr(obj({ code: str(), message: str(), param: nullable(str()), line: nullable(int()) }, { required: ['message'], open: true })),
      }),
    ),
    input_file_id: str(),
    completion_window: constant('24h'),
    status: oneOfValues(['validating', 'failed', 'in_progress', 'finalizing', 'completed', 'expired', 'cancelling', 'cancelled']),
    output_file_id: nullable(str()),
    error_file_id: nullable(str()),
    created_at: unixSeconds(),
    in_progress_at: ts,
    expires_at: ts,
    finalizing_at: ts,
    completed_at: ts,
    failed_at: ts,
    expired_at: ts,
    cancelling_at: ts,
    cancelled_at: ts,
    request_counts: obj({ total: int(), completed: int(), failed: int() }),
    metadata: nullable({ type: 'object', additionalProperties: str() }),
  },
  { required: ['id', 'object', 'endpoint', 'input_file_id', 'completion_window', 'status', 'created_at', 'request_counts'], open: true },
);

/** Spec 2.4, with OpenAI's `size` and `expires_at`. */
const Video = obj(
  {
    id: str('form video_<id>', { pattern: '^video_' }),
    object: constant('video'),
    model: str(),
    status: oneOfValues(['queued', 'in_progress', 'completed', 'failed', 'cancelled']),
    progress: int(),
    created_at: unixSeconds(),
    completed_at: nullable(unixSeconds()),
    expires_at: nullable(unixSeconds()),
    prompt: nullable(str()),
    seconds: str(),
    size: nullable(str()),
    aspect_ratio: nullable(str()),
    resolution: nullable(str()),
    error: nullable(obj({ code: str(), message: str() })),
    url: nullable(str('direct MP4 URL once completed')),
    thumbnail_url: nullable(str()),
    usage: extension(obj({ cost: usd(), estimated_cost: usd() })),
    remixed_from_video_id: nullable(str()),
  },
  {
    required: ['id', 'object', 'model', 'status', 'progress', 'created_at', 'completed_at', 'prompt', 'seconds', 'error', 'url', 'thumbnail_url', 'usage'],
    open: true,
  },
);

/** Spec 4.3 and 4.4: Anthropic's message list. */
export const anthropicMessages = arr(
  obj(
    { role: oneOfValues(['user', 'assistant']), content: { anyOf: [str(), arr(anyObject('content block'))] } },
    { required: ['role', 'content'], open: true },
  ),
  { minItems: 1 },
);

const AnthropicMessagesRequest = obj(
  nullWhenOptional(
    {
      model: modelId(),
      max_tokens: int(undefined, { minimum: 1 }),
      messages: anthropicMessages,
      system: { description: 'a string or text blocks' },
      tools: arr(anyObject()),
      tool_choice: { description: 'read only when tools are given' },
      thinking: anyObject(),
      stream: nullable(bool()),
      temperature: num(),
      top_p: num(),
      top_k: nullable(num('read as a number: a fraction is not refused')),
      stop_sequences: arr(str()),
      metadata: anyObject(),
      preset: extension(nullable(str(undefined, { minLength: 1 }))),
    },
    ['model', 'max_tokens', 'messages'],
  ),
  { required: ['model', 'max_tokens', 'messages'], open: true, description: 'Spec 4.3.' },
);

const AnthropicMessage = obj(
  {
    id: str(),
    type: constant('message'),
    role: constant('assistant'),
    model: str(),
    content: arr(obj({ type: str() }, { open: true })),
    stop_reason: nullable(str()),
    stop_sequence: nullable(str()),
    usage: obj(
      {
        input_tokens: int(),
        output_tokens: int(),
        cache_creation_input_tokens: nullable(int()),
        cache_read_input_tokens: nullable(int()),
        server_tool_use: anyObject(),
        cost: extension(usd()),
      },
      { required: ['input_tokens', 'output_tokens', 'cost'], open: true },
    ),
  },
  { required: ['id', 'type', 'role', 'model', 'content', 'stop_reason', 'usage'], open: true },
);

const ResponsesRequest = obj(
  nullWhenOptional(
    {
      model: modelId(),
      input: { anyOf: [str(), arr(anyObject('an input item'))], description: 'a string or input items' },
      instructions: str(),
      previous_response_id: str(),
      store: bool('default true; kept 30 days'),
      stream: bool(),
      max_output_tokens: nullable(int(undefined, { minimum: 1 })),
      tools: arr(anyObject()),
      tool_choice: { description: 'any: none, auto, required, or a named tool' },
      text: anyObject('`format`: a JSON schema'),
      reasoning: anyObject(),
      temperature: num(),
      top_p: num(),
      preset: extension(nullable(str(undefined, { minLength: 1 }))),
    },
    ['model', 'input'],
  ),
  { required: ['model', 'input'], open: true, description: 'Spec 4.5.' },
);

const Response = obj(
  {
    id: str(),
    object: constant('response'),
    created_at: unixSeconds(),
    status: str(),
    model: str(),
    output: arr(obj({ type: str() }, { open: true })),
    usage: nullable(
      obj(
        { input_tokens: int(), output_tokens: int(), total_tokens: int(), cost: extension(usd()) },
        { required: ['input_tokens', 'output_tokens', 'total_tokens'], open: true },
      ),
    ),
  },
  { required: ['id', 'object', 'created_at', 'status', 'model', 'output'], open: true, description: 'OpenAI Responses object (spec 2.8 leaves it open).' },
);

const CompletionRequest = obj(
  {
    model: modelId(),
    prompt: { anyOf: [str(), arr(str(), { minItems: 1, maxItems: 1 })], description: 'a string (or an array of exactly one string)' },
    max_tokens: nullable(int('default 16', { minimum: 1 })),
    stream: nullable(bool()),
    echo: nullable(bool()),
    n: nullable(int(undefined, { const: 1 })),
    best_of: nullable(int(undefined, { const: 1 })),
    suffix: nullable(str()),
    logprobs: nullable(int(undefined, { minimum: 0, maximum: 5 })),
    temperature: nullable(num()),
    top_p: nullable(num()),
    stop: nullable(stringOrStrings()),
  },
  { required: ['model', 'prompt'], open: true, description: 'Spec 4.6.' },
);
const Completion = obj(
  {
    id: str(),
    object: constant('text_completion'),
    created: unixSeconds(),
    model: str(),
    choices: arr(obj({ text: str(), index: int(), logprobs: nullable(anyObject()), finish_reason: nullable(str()) }, { open: true })),
    usage: ref('ChatUsage'),
  },
  { required: ['id', 'object', 'created', 'model', 'choices', 'usage'], open: true },
);

const ImagesRequest = obj(
  {
    model: modelId(),
    prompt: text(),
    n: nullable(int(undefined, { minimum: 1, maximum: MAX_IMAGES_PER_REQUEST })),
    size: nullable(
      str(`auto or <W>x<H>, each side from 1 to ${MAX_IMAGE_SIDE}`, { pattern: `^(?:auto|${upToPattern(MAX_IMAGE_SIDE)}x${upToPattern(MAX_IMAGE_SIDE)})$` }),
    ),
    quality: nullable(oneOfValues(IMAGE_QUALITIES)),
    response_format: nullable(oneOfValues(['b64_json', 'url'])),
    image: nullable(
      arr(str(undefined, { pattern: '^(?:https://\\S+|data:image/[A-Za-z0-9.+-]+;base64,[A-Za-z0-9+/]+={0,2})$' }), {
        maxItems: MAX_INPUT_IMAGES,
        description: 'https or data:image/ URLs to edit',
      }),
    ),
    user: nullable(str()),
    provider: ProviderPreferences,
  } satisfies Record<(typeof PARAMETERS.image)[number], JsonSchema>,
  { required: ['model', 'prompt'], open: true, description: 'Spec 4.8.' },
);
const ImagesResponse = obj(
  {
    id: extension(str()),
    created: unixSeconds(),
    model: extension(str()),
    data: arr(obj({ b64_json: str(), url: str(), revised_prompt: str() }, { required: [], open: true })),
    usage: obj({ cost: extension(usd()) }, { required: ['cost'], open: true }),
  },
  { required: ['id', 'created', 'model', 'data', 'usage'], open: true },
);

const SpeechRequest = obj(
  {
    model: modelId(),
    input: str('characters (code points), each billed', { minLength: 1, maxLength: MAX_SPEECH_CHARACTERS }),
    voice: str("one of the model's voices (GET /v1/models/{id}: `voices`); its first when left out"),
    response_format: nullable(oneOfValues(SPEECH_FORMATS, 'default mp3')),
    speed: nullable(num(undefined, { minimum: 0.25, maximum: 4 })),
    instructions: str(),
    stream_format: oneOfValues(['audio'], 'sse is refused'),
    provider: ProviderPreferences,
  } satisfies Record<(typeof PARAMETERS.speech)[number], JsonSchema>,
  { required: ['model', 'input'], open: true, description: 'Spec 4.9.' },
);

const transcriptionFields = {
  file: str('the audio, at most 25 MB', { contentMediaType: 'application/octet-stream' }),
  model: modelId(),
  language: str(),
  prompt: str(),
  response_format: oneOfValues(['json', 'text', 'srt', 'verbose_json', 'vtt']),
  temperature: num(undefined, { minimum: 0, maximum: 1 }),
  'timestamp_granularities[]': arr(oneOfValues(['word', 'segment'])),
  provider: str('routing preferences as JSON'),
};
const TranscriptionForm = obj(transcriptionFields, { required: ['file', 'model'], open: true, description: 'Spec 4.10 (multipart).' });
const TranslationForm = obj(
  {
    file: transcriptionFields.file,
    model: modelId(),
    prompt: str(),
    response_format: transcriptionFields.response_format,
    temperature: transcriptionFields.temperature,
    provider: transcriptionFields.provider,
  },
  { required: ['file', 'model'], open: true, description: 'Spec 4.10 (multipart).' },
);
const Transcription = obj({ id: str('the generation id (spec 1 rule 2)'), model: str(), text: str(), usage: anyObject() }, { required: ['text'], open: true });

const RerankRequest = obj(
  {
    model: modelId(),
    query: text(),
    documents: arr({ anyOf: [str(), obj({ text: str() }, { open: true })] }, { minItems: 1, maxItems: MAX_RERANK_DOCUMENTS }),
    top_n: nullable(int(undefined, { minimum: 1 })),
    return_documents: nullable(bool()),
    provider: ProviderPreferences,
  } satisfies Record<(typeof PARAMETERS.rerank)[number], JsonSchema>,
  { required: ['model', 'query', 'documents'], open: true, description: "Spec 4.12, Cohere's shape." },
);
const RerankResponse = obj(
  {
    id: str(),
    model: str(),
    results: arr(obj({ index: int(), relevance_score: num(), document: anyObject() }, { required: ['index', 'relevance_score'] })),
    meta: obj({ billed_units: obj({ search_units: int() }, { open: true }) }, { open: true }),
    usage: obj({ search_units: int(), cost: usd() }),
  },
  { open: true },
);

const ModerationRequest = obj(
  {
    model: nullable(modelId('the catalog default moderation model when left out or null')),
    input: {
      anyOf: [
        str(undefined, { minLength: 1 }),
        arr(str(), { minItems: 1, maxItems: MAX_MODERATION_INPUTS }),
        arr(
          {
            anyOf: [
              obj({ type: constant('text'), text: str() }, { open: true }),
              obj(
                {
                  type: constant('image_url'),
                  image_url: obj(
                    { url: str('https or a base64 data URL of an image', { pattern: '^(?:https://|data:image/)' }) },
                    { required: ['url'], open: true },
                  ),
                },
                { open: true },
              ),
            ],
          },
          { minItems: 1, maxItems: MAX_MODERATION_INPUTS },
        ),
      ],
    },
    provider: { description: 'accepted and not read: a moderation goes to the first provider of its model' },
  } satisfies Record<(typeof PARAMETERS.moderation)[number], JsonSchema>,
  { required: ['input'], open: true, description: 'Spec 4.13.' },
);
const ModerationResponse = obj(
  {
    id: str(),
    model: str(),
    results: arr(
      obj(
        { flagged: bool(), categories: { type: 'object', additionalProperties: bool() }, category_scores: { type: 'object', additionalProperties: num() } },
        { open: true },
      ),
    ),
    usage: extension(obj({ cost: usd('always 0') })),
  },
  { open: true },
);

const SearchRequest = obj(
  {
    model: { description: 'not read: the engine is `search_tool_name` on /v1/search, the path on /v1/search/{engine}' },
    query: {
      anyOf: [
        text(undefined, { maxLength: MAX_QUERY_CHARACTERS }),
        arr(text(undefined, { maxLength: MAX_QUERY_CHARACTERS }), { minItems: 1, maxItems: MAX_SEARCH_QUERIES }),
      ],
    },
    search_tool_name: nullable(modelId('search engine id from GET /v1/models?type=search')),
    max_results: nullable(int(undefined, { minimum: 1, maximum: MAX_SEARCH_RESULTS, default: 10 })),
    search_domain_filter: nullable(
      arr(str('example.com, or -example.com to exclude it; all kept or all excluded'), { minItems: 1, maxItems: MAX_DOMAIN_FILTERS }),
    ),
    country: nullable(str('ISO 3166-1 alpha-2', { pattern: '^[A-Za-z]{2}$' })),
    max_tokens_per_page: nullable(int(undefined, { minimum: 1, maximum: MAX_TOKENS_PER_PAGE })),
    provider: ProviderPreferences,
  } satisfies Record<(typeof PARAMETERS.search)[number], JsonSchema>,
  { required: ['query'], open: true, description: 'Spec 4.14.' },
);
const SearchResult = obj({ title: str(), url: str(), snippet: str(), content: str(), date: nullable(str()) });
const SearchResponse = obj({
  id: str(),
  object: constant('search'),
  model: str(),
  results: { anyOf: [arr(ref('SearchResult')), arr(arr(ref('SearchResult')))] },
  usage: obj({ queries: int(), cost: usd() }),
});

const VideoRequest = obj(
  {
    model: modelId(),
    prompt: text(undefined, { maxLength: MAX_VIDEO_PROMPT_CHARACTERS }),
    seconds: {
      anyOf: [int(undefined, { minimum: 1 }), str(undefined, { pattern: '^\\s*[0-9]{1,6}\\s*$' }), { type: 'null' }],
      description: "whole seconds, a number or numeric string; one of the model's `video.durations` (its shortest when left out)",
    },
    size: nullable(str("<width>x<height>; one of the model's `video.sizes` when it lists any")),
    aspect_ratio: nullable(str("one of the model's `video.aspect_ratios`")),
    resolution: nullable(str("one of the model's `video.resolutions`")),
    image_url: nullable(str('public https first frame, on a model with `video.image_to_video`')),
    provider: ProviderPreferences,
  } satisfies Record<(typeof PARAMETERS.video)[number], JsonSchema>,
  { required: ['model', 'prompt'], open: true, description: 'Spec 4.15 (JSON or multipart); `aspect_ratio` or `size`, not both.' },
);

const BatchRequest = obj(
  {
    input_file_id: str(),
    endpoint: oneOfValues(['/v1/chat/completions', '/v1/embeddings']),
    completion_window: constant('24h'),
    metadata: { type: 'object', additionalProperties: str() },
  },
  { required: ['input_file_id', 'endpoint'], open: true, description: 'Spec 4.11.' },
);

const Organization = obj({
  id: str(),
  name: nullable(str()),
  owner_account_id: str(),
  role: oneOfValues(['owner', 'admin', 'member']),
  created_at: dateTime(),
});
const Member = obj({ account_id: str(), role: oneOfValues(['owner', 'admin', 'member']), added_at: dateTime() });
const MemberChange = obj({ org_id: str(), account_id: str(), role: oneOfValues(['admin', 'member']) });
const ProviderKey = obj({ provider: str(), hint: str('last four characters, never the key'), saved_at: dateTime() });
const AccountCredits = obj({
  account_id: str(),
  total_credits: usd(),
  total_usage: usd(),
  total_adjustments: usd(),
  balance: usd(),
  daily_limit_usd: nullable(usd()),
});

/** Issue 23, corrections (docs/api/account.md "Statements and corrections"). */
const adjustmentKind = oneOfValues(['credit_note', 'adjustment'], 'credit_note: money given back (positive); adjustment: either sign');
const AdjustmentRequest = obj(
  {
    amount_usd: usd('non-zero, at most 9 decimals; negative lowers the balance (never below what open requests hold)'),
    kind: adjustmentKind,
    reason: str(undefined, { minLength: 1, maxLength: 500 }),
    operator: str('who makes the correction (the admin token is shared)', { minLength: 1, maxLength: 200 }),
    adjustment_id: str('makes a retry safe: the same id and content answers the recorded correction again; other content is a 409', {
      pattern: '^[A-Za-z0-9_.:-]{1,100}$',
    }),
  },
  { required: ['amount_usd', 'kind', 'reason', 'operator'] },
);
const Adjustment = obj({
  adjustment_id: str(),
  account_id: str(),
  kind: adjustmentKind,
  amount_usd: usd(),
  reason: str(),
  operator: str(),
  created_at: dateTime(),
});
const meters = { type: 'object', additionalProperties: num(), description: 'quantity by meter' };
/** Issue 23, statements: replayed from the log up to the end of a period that has ended. */
const Statement = obj({
  account_id: str(),
  from: dateTime('inclusive'),
  to: dateTime('exclusive'),
  built_at_position: nullable(str('log position of the last event of the account stream included (not the log head); null when none is')),
  currency: constant('USD'),
  opening_balance: usd(),
  closing_balance: usd('opening_balance + totals.credits - totals.charges + totals.adjustments'),
  credits: arr(obj({ at: dateTime(), amount: usd(), reason: str() })),
  charges: arr(obj({ date: str('UTC day', { format: 'date' }), model: str(), key_id: str(), requests: int(), amount: usd(), meters })),
  totals: obj(
    {
      credits: usd(),
      charges: usd('the charges listed'),
      other_keys_charges: usd(
        'issue 41 item 13, only to a key of an organization: what the keys it may not see were charged, one sum (closing = opening + credits - charges - other_keys_charges + adjustments)',
      ),
      adjustments: usd(),
      by_meter: meters,
    },
    { required: ['credits', 'charges', 'adjustments', 'by_meter'] },
  ),
  releases: arr(obj({ at: dateTime(), hold_id: str(), key_id: str(), held_amount: usd('freed, not a movement of the balance'), reason: str() })),
  expiries: arr(obj({ at: dateTime(), hold_id: str(), key_id: str(), held_amount: usd('freed, not a movement of the balance') })),
  adjustments: arr(
    obj({
      at: dateTime(),
      adjustment_id: str(),
      kind: adjustmentKind,
      amount: usd(),
      reason: nullable(str('null to a key of an organization (issue 41 item 13)')),
      operator: nullable(str('null to a key of an organization')),
    }),
  ),
});

const Notice = obj({ id: str(), type: str(), title: str(), message: str(), data: anyObject(), created: unixSeconds() });

/** docs/operations.md "Health". */
const Check = obj(
  {
    status: oneOfValues(['ok', 'fail']),
    reason: str(),
    backend: oneOfValues(['postgresql', 'pglite']),
    lag_seconds: num(),
    max_lag_seconds: num(),
    slowest: nullable(str()),
  },
  { required: ['status'] },
);
const Readiness = obj({
  status: oneOfValues(['ready', 'degraded', 'not_ready']),
  checks: obj({ postgres: ref('Check'), redis: ref('Check'), eventstore: ref('Check'), projections: ref('Check') }, { required: ['postgres', 'projections'] }),
});

export const SCHEMAS: Record<string, JsonSchema> = {
  ErrorObject,
  AnthropicError,
  KeyRecord,
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
  AccountCredits,
  AdjustmentRequest,
  Adjustment,
  Statement,
  Notice,
  Check,
  Readiness,
};

export { cursorList, dataOf };
