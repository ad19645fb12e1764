/**
 * What each route the gateway serves does, keyed "METHOD /path" exactly as Fastify registers it
 * (`:id`, `*`). The document's paths are the routes the app registered joined with these
 * (document.ts): a route missing here, or an entry no route matches, is reported, never dropped.
 */
import { SPEECH_FORMATS } from '@svc/interfaces';
import { anthropicMessages } from './components';
import { anyObject, arr, bool, constant, cursorList, dataOf, dateTime, int, type JsonSchema, nullable, obj, oneOfValues, ref, str, usd } from './json-schema';

/**
 * Who may call it (spec 5.3): `none` no key; `any` any key scope (read-only too); `full` a
 * full key (model calls); `management` a management key; `admin` the operator's
 * SVC_ADMIN_TOKEN (docs/api/operator.md, and "Metrics" in docs/operations.md).
 */
export type Access = 'none' | 'any' | 'full' | 'management' | 'admin';

export interface QueryParameter {
  name: string;
  schema: JsonSchema;
  description?: string;
  required?: boolean;
}

export interface OperationDescription {
  summary: string;
  description?: string;
  tag: string;
  access: Access;
  /** The OpenAPI path, where Fastify's wildcard (`*`) stands for a named parameter. */
  path?: string;
  pathParameters?: Record<string, string>;
  query?: QueryParameter[];
  /** Billed POSTs take Idempotency-Key and the attribution headers (spec 4). */
  billed?: boolean;
  /** The response cache headers (spec 4.2, "Response caching"). */
  cacheable?: boolean;
  body?: { schema: JsonSchema; multipart?: boolean; json?: boolean; required?: boolean };
  ok: { status?: number; description?: string; schema?: JsonSchema; content?: Record<string, JsonSchema>; stream?: boolean; headers?: Record<string, string> };
  /** Error statuses besides those every route of its access level can answer (see document.ts). */
  errors?: number[];
  /** Other answers that are not the error object (readiness's 503). */
  also?: Record<number, { description: string; schema: JsonSchema }>;
  /** Spec 2.1, 4.3: errors in Anthropic's shape. */
  anthropic?: boolean;
  /** Spec 4.16: not an HTTP route but a WebSocket upgrade on the server's `upgrade` event. */
  websocket?: boolean;
}

const json = (schema: JsonSchema) => ({ schema });
const limitQuery = (max: number, fallback: number): QueryParameter => ({
  name: 'limit',
  schema: int(undefined, { minimum: 1, maximum: max, default: fallback }),
});
const afterQuery: QueryParameter = { name: 'after', schema: str(), description: 'cursor: the last id of the previous page' };
const orderQuery: QueryParameter = { name: 'order', schema: oneOfValues(['asc', 'desc']), description: 'default desc' };
const modelFilters: QueryParameter[] = [
  { name: 'type', schema: oneOfValues(['chat', 'embedding', 'image', 'audio', 'rerank', 'moderation', 'search', 'video', 'realtime']) },
  { name: 'supported_parameters', schema: str(), description: 'comma-separated; all must match' },
  { name: 'input_modalities', schema: str(), description: 'comma-separated; all must match' },
  { name: 'output_modalities', schema: str(), description: 'comma-separated; all must match' },
];
const deleted = (more: Record<string, JsonSchema> = {}) => obj({ ...more, deleted: constant(true) });
const gen = { 'x-svc-generation-id': 'the generation id (GET /v1/generation?id=...)' };
const genCost = { ...gen, 'x-svc-cost': 'USD charged' };
const memberBody = obj({ account_id: str(), role: oneOfValues(['admin', 'member']) });
const roleBody = obj({ role: oneOfValues(['admin', 'member']) });
const webhookSaved = obj(
  { data: ref('WebhookEndpoint'), secret: str('whsec_...; only when the endpoint is new or its secret rotated') },
  { required: ['data'] },
);
const stepUpActions = ['create_key', 'rotate_key', 'grant_management', 'save_webhook', 'change_step_up', 'save_provider_key', 'delete_organization'];
/** Spec 4.9: the audio in the `response_format` asked for (mp3 by default), typed as the provider sends it. */
const SPEECH_CONTENT_TYPES: Record<(typeof SPEECH_FORMATS)[number], string> = {
  mp3: 'audio/mpeg',
  opus: 'audio/opus',
  aac: 'audio/aac',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
};
const speechContent = Object.fromEntries(
  Object.entries(SPEECH_CONTENT_TYPES).map(([format, type]) => [type, str(`response_format ${format}`, { contentMediaType: type })]),
);
const eventStream = { 'text/event-stream': str('server-sent events') };

export const OPERATIONS: Record<string, OperationDescription> = {
  // Spec 4.2 to 4.7: the model interfaces.
  'POST /v1/chat/completions': {
    summary: 'Chat completion, streaming or not',
    description: 'Spec 4.2. With `stream: true`, `chat.completion.chunk` events then `data: [DONE]`.',
    tag: 'Models',
    access: 'full',
    billed: true,
    cacheable: true,
    body: json(ref('ChatCompletionRequest')),
    ok: {
      schema: ref('ChatCompletion'),
      content: eventStream,
      headers: { ...gen, 'x-svc-ignored-params': 'unknown request fields, comma-separated (spec 4.2 rule 1)' },
    },
    errors: [402, 403, 404, 409, 410, 413, 422, 429, 502, 503, 504],
  },
  'POST /v1/messages': {
    summary: 'Messages (Anthropic format)',
    description: "Spec 4.3. Errors use Anthropic's shape. Streams Anthropic's events with `stream: true`.",
    tag: 'Models',
    access: 'full',
    billed: true,
    cacheable: true,
    anthropic: true,
    body: json(ref('AnthropicMessagesRequest')),
    ok: { schema: ref('AnthropicMessage'), content: eventStream, headers: gen },
    errors: [402, 403, 404, 409, 410, 413, 422, 429, 502, 503, 504],
  },
  'POST /v1/messages/count_tokens': {
    summary: 'Count prompt tokens (Anthropic format)',
    description: 'Spec 4.4. Not billed.',
    tag: 'Models',
    access: 'any',
    anthropic: true,
    body: json(
      obj(
        {
          model: str(undefined, { minLength: 1 }),
          messages: anthropicMessages,
          system: { description: 'a string or text blocks' },
          tools: nullable(
            arr(obj({ name: str(undefined, { minLength: 1 }), input_schema: anyObject('a JSON schema') }, { required: ['name', 'input_schema'], open: true })),
          ),
        },
        { required: ['model', 'messages'], open: true },
      ),
    ),
    ok: { schema: obj({ input_tokens: int() }) },
    errors: [404],
  },
  'POST /v1/responses': {
    summary: 'Create a response (OpenAI Responses)',
    description: 'Spec 4.5. Stored 30 days unless `store: false`.',
    tag: 'Models',
    access: 'full',
    billed: true,
    cacheable: true,
    body: json(ref('ResponsesRequest')),
    ok: { schema: ref('Response'), content: eventStream, headers: gen },
    errors: [402, 403, 404, 409, 410, 413, 422, 429, 502, 503, 504],
  },
  'GET /v1/responses/:id': {
    summary: 'Retrieve a stored response',
    description: 'Spec 4.5.',
    tag: 'Models',
    access: 'any',
    ok: { schema: ref('Response') },
    errors: [404, 503],
  },
  'DELETE /v1/responses/:id': {
    summary: 'Delete a stored response',
    tag: 'Models',
    access: 'full',
    ok: { schema: obj({ id: str(), object: constant('response'), deleted: constant(true) }, { open: true }) },
    errors: [403, 404, 503],
  },
  'GET /v1/responses/:id/input_items': {
    summary: 'Input items of a stored response',
    tag: 'Models',
    access: 'any',
    query: [limitQuery(100, 20), afterQuery, orderQuery],
    ok: { schema: cursorList(obj({ type: str() }, { open: true })) },
    errors: [404, 503],
  },
  'POST /v1/completions': {
    summary: 'Legacy text completion',
    description: 'Spec 4.6.',
    tag: 'Models',
    access: 'full',
    billed: true,
    cacheable: true,
    body: json(ref('CompletionRequest')),
    ok: { schema: ref('Completion'), content: eventStream, headers: gen },
    errors: [402, 403, 404, 409, 410, 422, 429, 502, 503, 504],
  },
  'POST /v1/embeddings': {
    summary: 'Embeddings',
    description: 'Spec 4.7. Billed on input tokens.',
    tag: 'Models',
    access: 'full',
    billed: true,
    body: json(ref('EmbeddingsRequest')),
    ok: { schema: ref('EmbeddingsResponse'), headers: gen },
    errors: [402, 403, 404, 409, 410, 422, 429, 502, 503, 504],
  },
  'POST /v1/images/generations': {
    summary: 'Image generation',
    description: 'Spec 4.8.',
    tag: 'Models',
    access: 'full',
    billed: true,
    body: json(ref('ImagesRequest')),
    ok: { schema: ref('ImagesResponse'), headers: gen },
    errors: [402, 403, 404, 409, 422, 429, 502, 503, 504],
  },
  'GET /v1/images/content/:file': {
    summary: 'An image answered with response_format "url"',
    description: 'No key: the unguessable id is the secret; kept for an hour.',
    tag: 'Models',
    access: 'none',
    pathParameters: { file: '`<id>.png`' },
    ok: { content: { 'image/png': str(undefined, { contentMediaType: 'image/png' }) } },
    errors: [404],
  },
  'POST /v1/audio/speech': {
    summary: 'Text to speech',
    description: 'Spec 4.9. The body is the audio; the cost is in `x-svc-cost`.',
    tag: 'Models',
    access: 'full',
    billed: true,
    cacheable: true,
    body: json(ref('SpeechRequest')),
    ok: { content: { ...speechContent, 'application/octet-stream': str('when the provider names no type') }, headers: genCost },
    errors: [402, 403, 404, 409, 422, 429, 502, 503, 504],
  },
  'POST /v1/audio/transcriptions': {
    summary: 'Speech to text',
    description: 'Spec 4.10 (multipart form).',
    tag: 'Models',
    access: 'full',
    billed: true,
    body: { schema: ref('TranscriptionForm'), multipart: true },
    ok: { schema: ref('Transcription'), content: { 'text/plain': str() }, headers: genCost },
    errors: [402, 403, 404, 409, 413, 415, 422, 429, 502, 503, 504],
  },
  'POST /v1/audio/translations': {
    summary: 'Speech to English text',
    description: 'Spec 4.10 (multipart form).',
    tag: 'Models',
    access: 'full',
    billed: true,
    body: { schema: ref('TranslationForm'), multipart: true },
    ok: { schema: ref('Transcription'), content: { 'text/plain': str() }, headers: genCost },
    errors: [402, 403, 404, 409, 413, 415, 422, 429, 502, 503, 504],
  },
  'POST /v1/rerank': {
    summary: 'Rerank documents',
    description: 'Spec 4.12. Billed per search unit.',
    tag: 'Models',
    access: 'full',
    billed: true,
    body: json(ref('RerankRequest')),
    ok: { schema: ref('RerankResponse'), headers: gen },
    errors: [402, 403, 404, 409, 422, 429, 502, 503, 504],
  },
  'POST /v1/moderations': {
    summary: 'Moderation (free)',
    description: 'Spec 4.13.',
    tag: 'Models',
    access: 'full',
    body: json(ref('ModerationRequest')),
    ok: { schema: ref('ModerationResponse'), headers: gen },
    errors: [403, 404, 429, 502, 503, 504],
  },
  'POST /v1/search': {
    summary: 'Web search',
    description: 'Spec 4.14. Billed per query.',
    tag: 'Models',
    access: 'full',
    billed: true,
    body: json(ref('SearchRequest')),
    ok: { schema: ref('SearchResponse'), headers: gen },
    errors: [402, 403, 404, 409, 422, 429, 502, 503, 504],
  },
  'POST /v1/search/*': {
    path: '/v1/search/{engine}',
    summary: 'Web search on one engine',
    description: 'Spec 4.14.',
    tag: 'Models',
    access: 'full',
    billed: true,
    pathParameters: { engine: 'search engine model id (keeps its `/`, e.g. `sim/tavily`)' },
    body: json(ref('SearchRequest')),
    ok: { schema: ref('SearchResponse'), headers: gen },
    errors: [402, 403, 404, 409, 422, 429, 502, 503, 504],
  },
  'GET /v1/realtime': {
    summary: 'Realtime session (WebSocket upgrade)',
    description:
      "Spec 4.16: `GET` with `Connection: Upgrade`, `Upgrade: websocket`, answered 101 Switching Protocols; then OpenAI's realtime protocol. Refusals (key, scope, model, rate limits) are plain HTTP answers with the error object, before anything is upgraded. From a browser, the subprotocol `svc-insecure-api-key.<key>` carries the key (spec 5 rule 7).",
    tag: 'Models',
    access: 'full',
    websocket: true,
    query: [{ name: 'model', schema: str(), required: true }],
    ok: { status: 101, description: 'Switching Protocols: the WebSocket session starts.' },
    errors: [402, 403, 404, 429, 502, 504],
  },

  // Spec 4.11: files and batches.
  'POST /v1/files': {
    summary: 'Upload a batch input file',
    description: 'Spec 4.11 (multipart form).',
    tag: 'Files and batches',
    access: 'full',
    body: {
      schema: obj(
        {
          file: str('JSONL', { contentMediaType: 'application/jsonl' }),
          purpose: constant('batch'),
          'expires_after[anchor]': constant('created_at'),
          'expires_after[seconds]': int(undefined, { minimum: 3600, maximum: 2592000 }),
        },
        { required: ['file', 'purpose'] },
      ),
      multipart: true,
    },
    ok: { schema: ref('File') },
    errors: [403, 413, 415, 503],
  },
  'GET /v1/files': {
    summary: 'List files',
    tag: 'Files and batches',
    access: 'any',
    query: [{ name: 'purpose', schema: str() }, limitQuery(10000, 10000), orderQuery, afterQuery],
    ok: { schema: cursorList(ref('File')) },
  },
  'GET /v1/files/:id': { summary: 'Retrieve a file', tag: 'Files and batches', access: 'any', ok: { schema: ref('File') }, errors: [404] },
  'DELETE /v1/files/:id': {
    summary: 'Delete a file',
    tag: 'Files and batches',
    access: 'full',
    ok: { schema: obj({ id: str(), object: constant('file'), deleted: bool() }) },
    errors: [403, 404],
  },
  'GET /v1/files/:id/content': {
    summary: 'Download file content',
    tag: 'Files and batches',
    access: 'any',
    ok: { content: { 'application/jsonl': str(), 'application/octet-stream': str() } },
    errors: [404, 503],
  },
  'POST /v1/batches': {
    summary: 'Create a batch',
    description: 'Spec 4.11.',
    tag: 'Files and batches',
    access: 'full',
    body: json(ref('BatchRequest')),
    ok: { schema: ref('Batch') },
    errors: [403, 404],
  },
  'GET /v1/batches': {
    summary: 'List batches',
    tag: 'Files and batches',
    access: 'any',
    query: [limitQuery(100, 20), afterQuery],
    ok: { schema: cursorList(ref('Batch')) },
  },
  'GET /v1/batches/:id': { summary: 'Retrieve a batch', tag: 'Files and batches', access: 'any', ok: { schema: ref('Batch') }, errors: [404] },
  'POST /v1/batches/:id/cancel': { summary: 'Cancel a batch', tag: 'Files and batches', access: 'full', ok: { schema: ref('Batch') }, errors: [403, 404, 409] },

  // Spec 4.15: videos.
  'POST /v1/videos': {
    summary: 'Start a video generation',
    description: 'Spec 4.15, 3.1. JSON or a multipart form; answers the video `queued`.',
    tag: 'Videos',
    access: 'full',
    billed: true,
    body: { schema: ref('VideoRequest'), multipart: true, json: true },
    ok: { schema: ref('Video'), headers: gen },
    errors: [402, 403, 404, 409, 422, 429, 502, 503, 504],
  },
  'GET /v1/videos': {
    summary: 'List videos',
    tag: 'Videos',
    access: 'any',
    query: [limitQuery(100, 20), afterQuery, orderQuery],
    ok: { schema: cursorList(ref('Video')) },
  },
  'GET /v1/videos/:id': {
    summary: 'Retrieve a video',
    tag: 'Videos',
    access: 'any',
    ok: { schema: ref('Video'), headers: { 'openai-poll-after-ms': 'while not final', 'retry-after': 'while not final' } },
    errors: [404],
  },
  'DELETE /v1/videos/:id': {
    summary: 'Cancel or delete a video',
    description: 'Queued or in progress: cancels it and answers the video; ended: deletes it and its clip.',
    tag: 'Videos',
    access: 'full',
    ok: { schema: { anyOf: [ref('Video'), obj({ id: str(), object: constant('video.deleted'), deleted: bool() })] } },
    errors: [403, 404],
  },
  'GET /v1/videos/:id/content': {
    summary: 'Redirect to the MP4 (or its poster)',
    description: "Spec 4.15: 302 to the signed URL of the file (the video object's `url`), good for an hour.",
    tag: 'Videos',
    access: 'any',
    query: [{ name: 'variant', schema: oneOfValues(['video', 'thumbnail']) }],
    ok: { status: 302, description: 'Redirect to the signed file URL', headers: { location: 'the signed URL of the file, no key needed, good for an hour' } },
    errors: [404, 409],
  },
  'GET /v1/videos/:id/file': {
    summary: 'The MP4 (or its poster) at a signed URL',
    description: 'No key: the signature (workspace, video, variant, expiry) is the secret; an altered or expired URL is 403. Usable as `<video src>`.',
    tag: 'Videos',
    access: 'none',
    query: [
      { name: 'variant', schema: oneOfValues(['video', 'thumbnail']) },
      { name: 'workspace', schema: str() },
      { name: 'expires', schema: str('unix seconds') },
      { name: 'signature', schema: str() },
    ],
    ok: { content: { 'video/mp4': str(), 'image/jpeg': str(), 'image/png': str(), 'image/webp': str() } },
    errors: [403, 404, 409],
  },

  // Spec 4.17: models.
  'GET /v1/models': {
    summary: 'List usable models',
    description: 'Spec 4.17.',
    tag: 'Models catalog',
    access: 'any',
    query: modelFilters,
    ok: { schema: obj({ object: constant('list'), data: arr(ref('Model')) }) },
  },
  'GET /v1/models/count': {
    summary: 'Count models for the same filters',
    tag: 'Models catalog',
    access: 'any',
    query: modelFilters,
    ok: { schema: dataOf(obj({ count: int() })) },
  },
  'GET /v1/models/*': {
    path: '/v1/models/{id}',
    summary: 'Retrieve a model with its providers',
    tag: 'Models catalog',
    access: 'any',
    pathParameters: { id: 'model id, the rest of the path: encoded (`sim%2Fecho`, as OpenAPI clients send it) or with its `/` as is (`/v1/models/sim/echo`)' },
    ok: { schema: ref('ModelWithProviders') },
    errors: [404],
  },

  // Spec 4.18: presets.
  'GET /v1/presets': { summary: "List the workspace's presets", tag: 'Presets', access: 'any', ok: { schema: dataOf(arr(ref('Preset'))) } },
  'POST /v1/presets': {
    summary: 'Create a preset',
    tag: 'Presets',
    access: 'management',
    body: json(ref('PresetRequest')),
    ok: { status: 201, schema: dataOf(ref('PresetWithVersions')) },
    errors: [409],
  },
  'GET /v1/presets/:slug': {
    summary: 'A preset with its versions',
    tag: 'Presets',
    access: 'any',
    ok: { schema: dataOf(ref('PresetWithVersions')) },
    errors: [404],
  },
  'PATCH /v1/presets/:slug': {
    summary: 'Update a preset (a config change adds a version)',
    tag: 'Presets',
    access: 'management',
    body: json(ref('PresetRequest')),
    ok: { schema: dataOf(ref('PresetWithVersions')) },
    errors: [404],
  },
  'DELETE /v1/presets/:slug': { summary: 'Delete a preset', tag: 'Presets', access: 'management', ok: { schema: deleted({ slug: str() }) }, errors: [404] },
  'POST /v1/presets/:slug/rollback': {
    summary: "Make an earlier version's config the latest",
    tag: 'Presets',
    access: 'management',
    body: json(obj({ version: int(undefined, { minimum: 1 }) })),
    ok: { schema: dataOf(ref('PresetWithVersions')) },
    errors: [404],
  },

  // Spec 4.19: keys.
  'POST /v1/keys': {
    summary: 'Create a key',
    description: 'Spec 4.19. The secret is returned once, in `key`. Honours Idempotency-Key.',
    tag: 'Keys',
    access: 'management',
    billed: true,
    body: json(ref('KeyRequest')),
    ok: { status: 201, schema: ref('CreatedKey') },
    errors: [409, 422, 503],
  },
  'GET /v1/keys': { summary: "List the workspace's keys", tag: 'Keys', access: 'management', ok: { schema: dataOf(arr(ref('KeyRecord'))) } },
  'GET /v1/keys/:id': { summary: 'Get a key', tag: 'Keys', access: 'management', ok: { schema: dataOf(ref('KeyRecord')) }, errors: [404] },
  'PATCH /v1/keys/:id': {
    summary: 'Update a key',
    description: 'Same fields as create; `null` clears.',
    tag: 'Keys',
    access: 'management',
    body: json(ref('KeyRequest')),
    ok: { schema: dataOf(ref('KeyRecord')) },
    errors: [404],
  },
  'DELETE /v1/keys/:id': {
    summary: 'Revoke a key',
    description: 'Immediate (spec 3.3).',
    tag: 'Keys',
    access: 'management',
    ok: { schema: dataOf(ref('KeyRecord')) },
    errors: [404],
  },
  'POST /v1/keys/:id/rotate': {
    summary: 'Rotate a key',
    description: 'A new secret in `key`; the old one works until the grace period ends.',
    tag: 'Keys',
    access: 'management',
    body: { schema: obj({ grace_period_seconds: int(undefined, { minimum: 0, maximum: 604800, default: 0 }) }, { required: [] }), required: false },
    ok: { schema: ref('CreatedKey') },
    errors: [404],
  },

  // Spec 4.20: account endpoints.
  'GET /v1/key': {
    summary: 'The calling key: limits and spend',
    description: 'Spec 4.20, 2.3.',
    tag: 'Account',
    access: 'any',
    ok: { schema: dataOf(ref('KeyRecord')) },
  },
  'GET /v1/credits': {
    summary: 'Credit balance and lifetime totals',
    description: 'Spec 4.20.',
    tag: 'Account',
    access: 'any',
    ok: { schema: dataOf(ref('Credits')) },
  },
  'GET /v1/credits/statement': {
    summary: "The account's statement for a period that has ended",
    description:
      'Issue 23 (docs/api/account.md, "Statements and corrections"): opening balance, credits, charges per day, model and key with meters, releases, expiries, adjustments, closing balance; replayed from the event log, so it never changes once built. An organization key states its owner\'s account, as GET /v1/credits does.',
    tag: 'Account',
    access: 'management',
    query: [
      { name: 'from', schema: str(), required: true, description: 'inclusive; ISO 8601 date (00:00 UTC) or date-time (UTC when no offset)' },
      { name: 'to', schema: str(), required: true, description: 'exclusive; not in the future; at most 366 days after from' },
    ],
    ok: { schema: dataOf(ref('Statement')) },
    errors: [404],
  },
  'GET /v1/generation': {
    summary: 'Tokens, cost and latency of one request',
    description: 'Spec 4.20.',
    tag: 'Account',
    access: 'any',
    query: [{ name: 'id', schema: str(), required: true, description: 'the response id (`gen-...` or `resp_...`)' }],
    ok: { schema: dataOf(ref('Generation')) },
    errors: [404],
  },
  'POST /v1/generations/lookup': {
    summary: 'Cost and stats of up to 1,000 request ids',
    tag: 'Account',
    access: 'any',
    body: json(obj({ ids: arr(str(), { minItems: 1, maxItems: 1000 }) })),
    ok: {
      schema: dataOf(
        arr({
          anyOf: [ref('GenerationFound'), obj({ id: str(), found: constant(false) })],
        }),
      ),
    },
  },
  'GET /v1/activity': {
    summary: 'Daily usage per model and endpoint, last 30 days',
    tag: 'Account',
    access: 'any',
    query: [
      { name: 'date', schema: str(undefined, { format: 'date' }) },
      { name: 'key_id', schema: str() },
      { name: 'user', schema: str() },
    ],
    ok: { schema: dataOf(arr(ref('Activity'))) },
    errors: [404],
  },
  'GET /v1/audit-log': {
    summary: "The account's audit log",
    tag: 'Account',
    access: 'management',
    query: [
      limitQuery(1000, 100),
      { name: 'action', schema: str(undefined, { pattern: '^[a-z_]+\\.[a-z_]+$' }) },
      { name: 'since', schema: str() },
      { name: 'until', schema: str() },
    ],
    ok: { schema: dataOf(arr(ref('AuditEntry'))) },
  },
  'GET /v1/notices': {
    summary: 'In-app notices (model deprecations)',
    tag: 'Account',
    access: 'any',
    query: [limitQuery(100, 20)],
    ok: { schema: obj({ object: constant('list'), data: arr(ref('Notice')) }) },
  },

  // Settings, webhooks, prompt logs, step-up (spec 1, 6.1).
  'GET /v1/settings': { summary: 'Account settings', tag: 'Settings', access: 'management', ok: { schema: dataOf(ref('Settings')) } },
  'PATCH /v1/settings': {
    summary: 'Change prompt logging or step-up',
    tag: 'Settings',
    access: 'management',
    body: json(
      obj(
        {
          prompt_logging: obj({ enabled: bool(), retention_days: int(undefined, { minimum: 1, maximum: 30 }) }, { required: [] }),
          step_up: obj({ enabled: bool(), email: nullable(str()) }, { required: [] }),
        },
        { required: [] },
      ),
    ),
    ok: { schema: dataOf(ref('Settings')) },
    errors: [503],
  },
  'PUT /v1/settings/webhook': {
    summary: 'Save the webhook endpoint',
    tag: 'Settings',
    access: 'management',
    body: json(obj({ url: str('https, public addresses only'), events: nullable(arr(str())) }, { required: ['url'] })),
    ok: { schema: webhookSaved },
  },
  'DELETE /v1/settings/webhook': { summary: 'Remove the webhook endpoint', tag: 'Settings', access: 'management', ok: { schema: deleted() }, errors: [404] },
  'POST /v1/settings/webhook/rotate-secret': {
    summary: 'Rotate the webhook signing secret',
    tag: 'Settings',
    access: 'management',
    ok: { schema: webhookSaved },
    errors: [404],
  },
  'POST /v1/settings/webhook/resume': {
    summary: 'Resume a paused webhook endpoint',
    tag: 'Settings',
    access: 'management',
    ok: { schema: obj({ data: ref('WebhookEndpoint') }) },
    errors: [404],
  },
  'GET /v1/webhook-events': {
    summary: 'Webhook events and their delivery state',
    tag: 'Settings',
    access: 'management',
    query: [limitQuery(100, 20), afterQuery],
    ok: { schema: cursorList(ref('WebhookEvent')) },
  },
  'GET /v1/webhook-events/:id': {
    summary: 'One webhook event with its attempts',
    tag: 'Settings',
    access: 'management',
    ok: { schema: dataOf(ref('WebhookEventWithAttempts')) },
    errors: [404],
  },
  'POST /v1/webhook-events/:id/redeliver': {
    summary: 'Redeliver an event',
    tag: 'Settings',
    access: 'management',
    ok: { status: 202, schema: dataOf(ref('WebhookEventWithAttempts')) },
    errors: [404],
  },
  'GET /v1/prompt-logs': {
    summary: 'Prompt logs',
    tag: 'Settings',
    access: 'management',
    query: [limitQuery(100, 20), afterQuery],
    ok: { schema: cursorList(ref('PromptLogSummary')) },
  },
  'DELETE /v1/prompt-logs': { summary: 'Purge every prompt log', tag: 'Settings', access: 'management', ok: { schema: obj({ deleted: int() }) } },
  'GET /v1/prompt-logs/:generationId': {
    summary: 'One prompt log',
    tag: 'Settings',
    access: 'management',
    ok: {
      schema: dataOf(
        obj({
          generation_id: str(),
          key_id: str(),
          endpoint: str(),
          created_at: dateTime(),
          expires_at: dateTime(),
          request: { description: 'the request as sent' },
          response: { description: 'the answer as sent' },
        }),
      ),
    },
    errors: [404],
  },
  'DELETE /v1/prompt-logs/:generationId': {
    summary: 'Purge one prompt log',
    tag: 'Settings',
    access: 'management',
    ok: { schema: obj({ deleted: int(), generation_id: str() }) },
    errors: [404],
  },
  'POST /v1/step-up/codes': {
    summary: 'Mail a step-up code for one sensitive action',
    tag: 'Settings',
    access: 'management',
    body: json(obj({ action: oneOfValues(stepUpActions) })),
    ok: { schema: dataOf(obj({ action: oneOfValues(stepUpActions), sent_to: str('masked address'), expires_at: dateTime() })) },
  },

  // Bring your own key, organizations (spec 1).
  'GET /v1/provider-keys': {
    summary: "The account's own provider keys",
    tag: 'Account',
    access: 'management',
    ok: { schema: obj({ data: arr(ref('ProviderKey')), providers: arr(str()) }) },
  },
  'PUT /v1/provider-keys/:provider': {
    summary: 'Save a provider key',
    tag: 'Account',
    access: 'management',
    body: json(obj({ api_key: str() })),
    ok: { schema: dataOf(obj({ provider: str(), hint: str() })) },
    errors: [404, 503],
  },
  'DELETE /v1/provider-keys/:provider': {
    summary: 'Delete a provider key',
    tag: 'Account',
    access: 'management',
    ok: { schema: dataOf(deleted({ provider: str() })) },
    errors: [404],
  },
  'GET /v1/organizations': {
    summary: 'Organizations the account owns or belongs to',
    tag: 'Organizations',
    access: 'management',
    ok: { schema: dataOf(arr(ref('Organization'))) },
  },
  'POST /v1/organizations': {
    summary: 'Create an organization',
    tag: 'Organizations',
    access: 'management',
    body: json(obj({ name: str() }, { required: [] })),
    ok: { status: 201, schema: dataOf(ref('Organization')) },
  },
  'DELETE /v1/organizations/:id': {
    summary: 'Delete an organization (owner only)',
    tag: 'Organizations',
    access: 'management',
    ok: { schema: dataOf(deleted({ id: str() })) },
    errors: [404],
  },
  'GET /v1/organizations/:id/members': {
    summary: 'Members, owner first',
    tag: 'Organizations',
    access: 'management',
    ok: { schema: dataOf(arr(ref('Member'))) },
    errors: [404],
  },
  'POST /v1/organizations/:id/members': {
    summary: 'Add a member',
    tag: 'Organizations',
    access: 'management',
    body: json(memberBody),
    ok: { status: 201, schema: dataOf(ref('MemberChange')) },
    errors: [404],
  },
  'PATCH /v1/organizations/:id/members/:account': {
    summary: "Change a member's role",
    tag: 'Organizations',
    access: 'management',
    body: json(roleBody),
    ok: { schema: dataOf(ref('MemberChange')) },
    errors: [404],
  },
  'DELETE /v1/organizations/:id/members/:account': {
    summary: 'Remove a member (or leave)',
    tag: 'Organizations',
    access: 'management',
    ok: { schema: dataOf(obj({ org_id: str(), account_id: str(), removed: bool() })) },
    errors: [404],
  },

  // Operator API (docs/api/operator.md).
  'POST /admin/accounts': {
    summary: 'Create an account',
    tag: 'Operator',
    access: 'admin',
    body: json(obj({ initial_credits_usd: usd() }, { required: [] })),
    ok: { status: 201, schema: obj({ id: str() }) },
  },
  'GET /admin/accounts/:id': {
    summary: "An account's credits",
    tag: 'Operator',
    access: 'admin',
    ok: { schema: dataOf(ref('AccountCredits')) },
    errors: [404],
  },
  'PATCH /admin/accounts/:id': {
    summary: "Set the account's daily spend limit",
    tag: 'Operator',
    access: 'admin',
    body: json(obj({ daily_limit_usd: nullable(usd()) })),
    ok: { schema: dataOf(ref('AccountCredits')) },
    errors: [404],
  },
  'POST /admin/accounts/:id/credits': {
    summary: 'Add credits',
    tag: 'Operator',
    access: 'admin',
    body: json(obj({ amount_usd: usd() })),
    ok: { schema: dataOf(ref('AccountCredits')) },
    errors: [404],
  },
  'POST /admin/accounts/:id/adjustments': {
    summary: 'Record a credit note or adjustment',
    description:
      "Issue 23: recorded as an event with the operator's name, shown on statements and in the audit log; nothing is edited in place. 409 `adjustment_exceeds_balance` when a negative amount would take the available balance below zero, `adjustment_id_conflict` when the id was used with other content.",
    tag: 'Operator',
    access: 'admin',
    body: json(ref('AdjustmentRequest')),
    ok: { status: 201, schema: obj({ data: ref('Adjustment'), balance: ref('AccountCredits') }) },
    errors: [404, 409],
  },
  'POST /admin/accounts/:id/keys': {
    summary: 'Create a key for an account',
    tag: 'Operator',
    access: 'admin',
    body: json(ref('AdminKeyRequest')),
    ok: { status: 201, schema: ref('CreatedKey') },
    errors: [404],
  },
  'GET /admin/accounts/:id/provider-keys': {
    summary: "An account's provider keys",
    tag: 'Operator',
    access: 'admin',
    ok: { schema: dataOf(arr(ref('ProviderKey'))) },
  },
  'PUT /admin/accounts/:id/provider-keys/:provider': {
    summary: 'Save a provider key for an account',
    tag: 'Operator',
    access: 'admin',
    body: json(obj({ api_key: str() })),
    ok: { schema: dataOf(obj({ provider: str(), hint: str() })) },
    errors: [404, 503],
  },
  'DELETE /admin/accounts/:id/provider-keys/:provider': {
    summary: 'Delete a provider key of an account',
    tag: 'Operator',
    access: 'admin',
    ok: { schema: dataOf(deleted({ provider: str() })) },
    errors: [404],
  },
  'POST /admin/orgs': {
    summary: 'Create an organization',
    tag: 'Operator',
    access: 'admin',
    body: json(obj({ owner_account_id: str(), name: str() }, { required: ['owner_account_id'] })),
    ok: { status: 201, schema: obj({ id: str() }) },
  },
  'DELETE /admin/orgs/:id': {
    summary: 'Delete an organization',
    tag: 'Operator',
    access: 'admin',
    ok: { schema: dataOf(deleted({ id: str() })) },
    errors: [404],
  },
  'POST /admin/orgs/:id/members': {
    summary: 'Add a member',
    tag: 'Operator',
    access: 'admin',
    body: json(memberBody),
    ok: { status: 201, schema: dataOf(ref('MemberChange')) },
    errors: [404],
  },
  'PATCH /admin/orgs/:id/members/:account': {
    summary: "Change a member's role",
    tag: 'Operator',
    access: 'admin',
    body: json(roleBody),
    ok: { schema: dataOf(ref('MemberChange')) },
    errors: [404],
  },
  'DELETE /admin/orgs/:id/members/:account': {
    summary: 'Remove a member',
    tag: 'Operator',
    access: 'admin',
    ok: { schema: dataOf(obj({ org_id: str(), account_id: str(), removed: bool() })) },
    errors: [404],
  },
  'GET /admin/audit-log': {
    summary: 'The audit log, newest first',
    tag: 'Operator',
    access: 'admin',
    query: [{ name: 'account_id', schema: str() }, limitQuery(1000, 100)],
    ok: { schema: dataOf(arr(ref('AuditEntry'))) },
  },

  // Operating it (docs/operations.md "Health", "Metrics") and this document.
  'GET /health/live': { summary: 'Liveness', tag: 'Operations', access: 'none', ok: { schema: obj({ status: constant('ok') }) } },
  'GET /health/ready': {
    summary: 'Readiness of the database, Redis, the event store and the projections',
    tag: 'Operations',
    access: 'none',
    ok: { schema: ref('Readiness') },
    also: { 503: { description: 'Not ready: a check failed (the same body).', schema: ref('Readiness') } },
  },
  'GET /metrics': {
    summary: 'Prometheus metrics',
    description: 'On the main port only without SVC_METRICS_PORT.',
    tag: 'Operations',
    access: 'admin',
    ok: { content: { 'text/plain': str('Prometheus text format') } },
  },
  'GET /openapi.json': {
    summary: 'This document',
    tag: 'Operations',
    access: 'none',
    ok: { content: { 'application/json': { type: 'object', required: ['openapi', 'paths'] } } },
  },
  'GET /docs': { summary: 'The API reference page (Swagger UI)', tag: 'Operations', access: 'none', ok: { content: { 'text/html': str() } } },
};
