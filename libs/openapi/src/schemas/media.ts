/** Images (spec 4.8), speech (spec 4.9), transcriptions (spec 4.10) and videos (spec 2.4, 4.15). */
import { PARAMETERS } from '@svc/providers';
import { IMAGE_QUALITIES, MAX_IMAGE_SIDE, MAX_IMAGES_PER_REQUEST, MAX_INPUT_IMAGES, MAX_SPEECH_CHARACTERS, SPEECH_FORMATS } from '@svc/interfaces';
import { MAX_VIDEO_PROMPT_CHARACTERS } from '@svc/videos';
import { anyObject, arr, constant, extension, int, type JsonSchema, nullable, num, obj, oneOfValues, str, unixSeconds, usd } from '../json-schema';
import { modelId, text, upToPattern, ProviderPreferences } from './shared';

/** Spec 2.4, with OpenAI's `size` and `expires_at`. */
export const Video = obj(
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

export const ImagesRequest = obj(
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
export const ImagesResponse = obj(
  {
    id: extension(str()),
    created: unixSeconds(),
    model: extension(str()),
    data: arr(obj({ b64_json: str(), url: str(), revised_prompt: str() }, { required: [], open: true })),
    usage: obj({ cost: extension(usd()) }, { required: ['cost'], open: true }),
  },
  { required: ['id', 'created', 'model', 'data', 'usage'], open: true },
);

export const SpeechRequest = obj(
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
export const TranscriptionForm = obj(transcriptionFields, { required: ['file', 'model'], open: true, description: 'Spec 4.10 (multipart).' });
export const TranslationForm = obj(
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
export const Transcription = obj(
  { id: str('the generation id (spec 1 rule 2)'), model: str(), text: str(), usage: anyObject() },
  { required: ['text'], open: true },
);

export const VideoRequest = obj(
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
