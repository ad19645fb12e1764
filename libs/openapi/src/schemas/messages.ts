/** Anthropic's Messages interface (spec 4.3, 4.4). */
import { anyObject, arr, bool, constant, extension, int, nullable, num, obj, oneOfValues, str, usd } from '../json-schema';
import { modelId, nullWhenOptional } from './shared';

/** Spec 4.3 and 4.4: Anthropic's message list. */
export const anthropicMessages = arr(
  obj(
    { role: oneOfValues(['user', 'assistant']), content: { anyOf: [str(), arr(anyObject('content block'))] } },
    { required: ['role', 'content'], open: true },
  ),
  { minItems: 1 },
);

export const AnthropicMessagesRequest = obj(
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

export const AnthropicMessage = obj(
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
