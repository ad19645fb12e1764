/** Chat completions (spec 4.2) and the legacy text completions (spec 4.6), which share their usage object. */
import { PARAMETERS } from '@svc/providers';
import { anyObject, arr, bool, constant, extension, int, type JsonSchema, nullable, num, obj, oneOfValues, ref, str, unixSeconds, usd } from '../json-schema';
import { modelId, nullWhenOptional, stringOrStrings, ProviderPreferences } from './shared';

/** Spec 2.6: usage of a chat answer, OpenAI's fields plus `cost`. */
export const ChatUsage = obj(
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
export const ChatCompletionRequest = obj(nullWhenOptional(chatRequestProperties, ['model', 'messages'], ['plugins', 'transforms']), {
  required: ['model', 'messages'],
  open: true,
  description: 'Spec 4.2. Unknown fields are ignored and named in `x-svc-ignored-params` (rule 1).',
});

export const ChatCompletion = obj(
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

export const CompletionRequest = obj(
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
export const Completion = obj(
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
