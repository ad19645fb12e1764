/**
 * `POST /v1/audio/speech` (spec 4.9): OpenAI's request, binary audio back, priced per
 * character of input (spec 1).
 */
import type { CatalogModel } from '@svc/catalog';
import { DomainError } from '@svc/platform';
import { operationOf, type Operation } from '@svc/metering';
import type { BinaryResult } from '@svc/providers';
import { countTextTokens, PARAMETERS } from '@svc/providers';
import { invalid, optionalNumber, requireBody, requireString, type Json } from './types';

/** OpenAI's limit on one request's text. */
export const MAX_SPEECH_CHARACTERS = 4096;
export const SPEECH_FORMATS = ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'] as const;
/** The known fields (spec 4.9) the provider is given; the gateway reads the others itself. */
const FORWARDED = PARAMETERS.speech.filter((f) => !['model', 'stream_format', 'provider'].includes(f));

export interface SpeechCall {
  model: string;
  body: Json;
  /** Characters (code points) of `input`: what is billed (spec 1). */
  characters: number;
  /** The text in tokens: what counts against the key's tokens per minute (spec 8). */
  tokens: number;
  voice: string | null;
  provider: unknown;
}

export function speechRequest(raw: unknown): SpeechCall {
  const body = requireBody(raw);
  const model = requireString(body, 'model');
  const input = requireString(body, 'input');
  const characters = [...input].length;
  if (characters === 0) throw invalid('input must not be empty.', 'input');
  if (characters > MAX_SPEECH_CHARACTERS) throw invalid(`input holds ${characters} characters; at most ${MAX_SPEECH_CHARACTERS}.`, 'input');
  if (body.voice !== undefined && typeof body.voice !== 'string')
    throw invalid("voice must be a string, one of the model's voices (GET /v1/models/{model}).", 'voice');
  const format = body.response_format ?? 'mp3';
  if (!SPEECH_FORMATS.includes(format as (typeof SPEECH_FORMATS)[number]))
    throw invalid(`response_format must be one of ${SPEECH_FORMATS.join(', ')}.`, 'response_format');
  const speed = optionalNumber(body, 'speed');
  if (speed !== undefined && !(speed >= 0.25 && speed <= 4)) throw invalid('speed must be from 0.25 to 4.0.', 'speed');
  if (body.instructions !== undefined && typeof body.instructions !== 'string') throw invalid('instructions must be a string.', 'instructions');
  // Streamed speech (server-sent audio deltas) is not offered: the whole file is the answer.
  if (body.stream_format !== undefined && body.stream_format !== 'audio')
    throw invalid('stream_format must be "audio": the audio comes back whole.', 'stream_format');
  const forwarded = Object.fromEntries(FORWARDED.filter((f) => body[f] !== undefined && body[f] !== null).map((f) => [f, body[f]]));
  return {
    model,
    body: { ...forwarded, response_format: format },
    characters,
    tokens: countTextTokens(input),
    voice: (body.voice as string | undefined) ?? null,
    provider: body.provider,
  };
}

/**
 * Spec 4.9 against the requested model: it must speak (audio out; a transcription model is
 * `audio` too), and the voice must be one of its voices; without one, its first.
 */
export function withVoice(call: SpeechCall, model: CatalogModel): SpeechCall {
  if (!model.outputModalities.includes('audio')) {
    throw DomainError.invalid(
      `${model.id} does not produce speech; use a model whose output_modalities include audio (GET /v1/models?type=audio).`,
      'model',
      'model_type_mismatch',
    );
  }
  if (model.voices.length === 0) {
    if (call.voice === null) throw invalid(`voice is required for ${model.id}.`, 'voice');
    return call;
  }
  if (call.voice === null) return { ...call, voice: model.voices[0], body: { ...call.body, voice: model.voices[0] } };
  if (!model.voices.includes(call.voice)) throw invalid(`voice '${call.voice}' is not a voice of ${model.id}: one of ${model.voices.join(', ')}.`, 'voice');
  return call;
}

/**
 * Spec 4.9 through the metering pipeline: billed per character of input, which is known
 * before the call, so the hold is exactly the charge. No audio returned, nothing billed.
 */
export const speechOperation: Operation<SpeechCall, BinaryResult> = {
  modelType: 'audio',
  endpoint: '/v1/audio/speech',
  promptTokens: (call) => call.tokens,
  worstCase: (call) => ({ characters: call.characters }),
  call: (target, call) => {
    return operationOf(target, 'speech')({ ...call.body, model: target.route.upstreamModel });
  },
  usageOf: (_result, call) => ({ characters: call.characters }),
  returned: (result) => audioBytes(result),
  // Issue 44: the text to speak, read by the guardrails' content filters. A redacted input is
  // what is spoken, so it is what is counted and billed.
  prompt: {
    param: 'input',
    texts: (call) => [String(call.body.input)],
    withTexts: (call, [input]) => ({ ...call, body: { ...call.body, input }, characters: [...input].length, tokens: countTextTokens(input) }),
  },
};

/**
 * The audio an answer carries: a WAV's data chunk, or the whole body for the other formats
 * (an MP3 with no frame, raw PCM with no sample, is empty). A WAV header alone is no audio.
 */
export function audioBytes(result: BinaryResult): number {
  const { bytes } = result;
  if (bytes.length >= 12 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WAVE') {
    for (let at = 12; at + 8 <= bytes.length;) {
      const size = bytes.readUInt32LE(at + 4);
      if (bytes.toString('latin1', at, at + 4) === 'data') return Math.min(size, bytes.length - at - 8);
      at += 8 + size + (size % 2);
    }
    return 0;
  }
  return bytes.length;
}
