/**
 * How an OpenAI-compatible upstream takes each operation's known fields. Gateway-only fields
 * (`preset`, `models`, `plugins`, `transforms`, `provider` on OpenAI's own API) are not named, so
 * they are never sent; `stream` and `stream_options` are set by the client.
 */
import { isRecord } from '../json';
import { sameNames, type ParameterConfig } from '../operations';
import { ProviderError } from '../provider-error';

/** OpenAI's own chat API. */
const OPENAI_CHAT: ParameterConfig<'chat'> = {
  ...sameNames<'chat'>([
    'model',
    'messages',
    'max_tokens',
    'max_completion_tokens',
    'temperature',
    'top_p',
    'stop',
    'seed',
    'presence_penalty',
    'frequency_penalty',
    'logit_bias',
    'logprobs',
    'top_logprobs',
    'n',
    'tools',
    'tool_choice',
    'parallel_tool_calls',
    'response_format',
    'reasoning_effort',
    'modalities',
    'prediction',
    'user',
    'safety_identifier',
    'prompt_cache_key',
  ]),
  // OpenAI takes reasoning only as `reasoning_effort`; the gateway's `reasoning.effort` (which
  // the `:thinking` suffix sets) becomes it unless the caller gave it. `reasoning.max_tokens`
  // has no OpenAI equivalent and stays behind.
  reasoning: (value, body) =>
    isRecord(value) && typeof value.effort === 'string' && body.reasoning_effort == null ? { reasoning_effort: value.effort } : undefined,
};

/**
 * The sizes OpenAI's Videos API takes (WIRE-FORMATS 2), by the gateway's aspect ratio and
 * resolution: sora-2's 720p, and sora-2-pro's larger 1792x1024, whose short side is 1024. A
 * catalog that lists 1080p for such a model gets that larger size, the nearest OpenAI has.
 */
const OPENAI_VIDEO_SIZES: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  '16:9': { '720p': '1280x720', '1024p': '1792x1024', '1080p': '1792x1024' },
  '9:16': { '720p': '720x1280', '1024p': '1024x1792', '1080p': '1024x1792' },
};

/** The OpenAI `size` for an aspect ratio (and resolution, 720p when not given); anything else is refused before calling. */
export function openAiVideoSize(aspectRatio: string, resolution: unknown): string {
  const size = OPENAI_VIDEO_SIZES[aspectRatio]?.[typeof resolution === 'string' ? resolution : '720p'];
  if (size === undefined) {
    const known = Object.entries(OPENAI_VIDEO_SIZES).flatMap(([ratio, sizes]) => Object.keys(sizes).map((r) => `${ratio} ${r}`));
    throw new ProviderError({ kind: 'http', status: 400, message: `OpenAI videos come in ${known.join(', ')}, not ${aspectRatio} ${resolution ?? '720p'}` });
  }
  return size;
}

/**
 * OpenAI's POST /videos (WIRE-FORMATS 2): `seconds` a string ("4", "8", "12"), the picture as
 * `size`, a first frame as `input_reference: {image_url}`. An aspect ratio becomes the size it
 * names when no size is given; a resolution alone says nothing OpenAI takes.
 */
const OPENAI_VIDEO: ParameterConfig<'video'> = {
  model: 'model',
  prompt: 'prompt',
  seconds: (value) => ({ seconds: String(value) }),
  size: 'size',
  aspect_ratio: (value, body) => (body.size == null ? { size: openAiVideoSize(value as string, body.resolution) } : undefined),
  image_url: (value) => ({ input_reference: { image_url: value } }),
};

/**
 * Routers (OpenRouter) and open-weight servers (vLLM, Ollama, llama.cpp) take these on top, as
 * they are; OpenAI itself answers 400 to them, hence a dialect chosen per upstream.
 */
const ROUTER_CHAT: ParameterConfig<'chat'> = {
  ...OPENAI_CHAT,
  ...sameNames<'chat'>(['top_k', 'min_p', 'repetition_penalty', 'reasoning', 'include_reasoning', 'provider']),
};

export const OPENAI_PARAMETERS = {
  chat: { openai: OPENAI_CHAT, router: ROUTER_CHAT },
  embed: sameNames<'embed'>(['model', 'input', 'dimensions', 'encoding_format', 'user']),
  image: sameNames<'image'>(['model', 'prompt', 'n', 'size', 'quality', 'response_format', 'image', 'user']),
  speech: sameNames<'speech'>(['model', 'input', 'voice', 'response_format', 'speed', 'instructions']),
  transcription: sameNames<'transcription'>(['model', 'language', 'prompt', 'response_format', 'temperature', 'timestamp_granularities[]']),
  translation: sameNames<'translation'>(['model', 'prompt', 'response_format', 'temperature']),
  moderation: sameNames<'moderation'>(['model', 'input']),
  video: OPENAI_VIDEO,
  realtime: sameNames<'realtime'>(['model']),
} as const;
