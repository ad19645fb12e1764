/** The model catalog as GET /v1/models shows it (spec 2.8, 4.17). */
import { arr, bool, constant, dateTime, extension, int, nullable, num, obj, oneOfValues, ref, str, unixSeconds } from '../json-schema';

/** Spec 2.8 (catalog entry), as `apps/gateway/src/models/model.presenter.ts` shows it. */
export const Pricing = obj(
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

export const Model = obj(modelProperties, { required: modelRequired, description: 'Spec 2.8: a catalog entry.' });

export const ModelWithProviders = obj(
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
