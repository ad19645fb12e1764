import { anthropicMessages } from '../schemas/messages';
import { anyObject, arr, constant, cursorList, int, nullable, obj, ref, str } from '../json-schema';
import { json, limitQuery, afterQuery, orderQuery, gen } from './shared';
import type { OperationDescription } from './types';

const eventStream = { 'text/event-stream': str('server-sent events') };

/** Spec 4.2 to 4.7: the model interfaces that answer with text (chat, messages, responses, completions) and embeddings. */
export const TEXT_OPERATIONS: Record<string, OperationDescription> = {
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
};
