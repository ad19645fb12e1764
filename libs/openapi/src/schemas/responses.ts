/** OpenAI's Responses interface (spec 4.5). */
import { anyObject, arr, bool, constant, extension, int, nullable, num, obj, str, unixSeconds, usd } from '../json-schema';
import { modelId, nullWhenOptional } from './shared';

export const ResponsesRequest = obj(
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

export const Response = obj(
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
