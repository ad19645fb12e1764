/**
 * The simulated text-to-speech model (`POST /v1/audio/speech`): binary audio lasting 60 ms per
 * character of the input (its `#sim` lines removed) divided by `speed`, at least 0.5 s. WAV,
 * PCM and FLAC carry a quiet 440 Hz tone at 24 kHz (OpenAI's speech rate); MP3 and Opus carry
 * silence of that length (see ./audio-formats.ts). AAC is refused with a 400 naming
 * `response_format`: there is no simple valid AAC bitstream to build by hand, and answering
 * another format under its name would mislead a client that decodes it.
 *
 * With the `empty` directive the audio holds no samples: a WAV or FLAC header only, an empty
 * PCM or MP3 body, an Opus stream of its two header pages.
 */
import { isRecord } from '../json';
import { flac, pcm, silentMp3, silentOpus, SPEECH_SAMPLE_RATE, tone, wav } from './audio-formats';
import { parseDirectives, type SimDirectives } from './directives';
import { SimError } from './http';

export type SpeechFormat = 'mp3' | 'opus' | 'aac' | 'flac' | 'wav' | 'pcm';

export interface SpeechRequest {
  model: string;
  /** The input without its `#sim` lines. */
  input: string;
  voice: string;
  responseFormat: Exclude<SpeechFormat, 'aac'>;
  speed: number;
  directives: SimDirectives;
}

const MAX_INPUT_CHARS = 4096;
const SECONDS_PER_CHAR = 0.06;
const MIN_SECONDS = 0.5;
const FORMATS: readonly SpeechFormat[] = ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'];

/** What OpenAI answers in `content-type` for each format. */
export const SPEECH_CONTENT_TYPES: Record<SpeechRequest['responseFormat'], string> = {
  mp3: 'audio/mpeg',
  opus: 'audio/opus',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
};

export function parseSpeechRequest(body: unknown): SpeechRequest {
  if (!isRecord(body)) throw new SimError(400, 'request body must be a JSON object');
  if (typeof body.model !== 'string' || body.model === '') throw new SimError(400, 'model is required', 'model');
  if (typeof body.input !== 'string' || body.input === '') throw new SimError(400, 'input must be a non-empty string', 'input');
  if (body.input.length > MAX_INPUT_CHARS) {
    throw new SimError(400, `input must be at most ${MAX_INPUT_CHARS} characters`, 'input', 'string_above_max_length');
  }
  const voice = isRecord(body.voice) ? body.voice.id : body.voice;
  if (typeof voice !== 'string' || voice === '') throw new SimError(400, 'voice must be a voice name or {"id": ...}', 'voice');
  const format = body.response_format ?? 'mp3';
  if (typeof format !== 'string' || !FORMATS.includes(format as SpeechFormat)) {
    throw new SimError(400, `response_format must be one of ${FORMATS.join(', ')}`, 'response_format');
  }
  if (format === 'aac') {
    throw new SimError(400, 'the simulator renders mp3, opus, flac, wav and pcm, not aac', 'response_format', 'unsupported_value');
  }
  const speed = body.speed ?? 1;
  if (typeof speed !== 'number' || !(speed >= 0.25 && speed <= 4)) throw new SimError(400, 'speed must be a number from 0.25 to 4', 'speed');
  const { directives, text } = parseDirectives(body.input);
  return { model: body.model, input: text, voice, responseFormat: format as SpeechRequest['responseFormat'], speed, directives };
}

export function speechSeconds(request: Pick<SpeechRequest, 'input' | 'speed' | 'directives'>): number {
  if (request.directives.empty) return 0;
  return Math.max(MIN_SECONDS, ([...request.input].length * SECONDS_PER_CHAR) / request.speed);
}

/** The audio file of a request; the same request always gives the same bytes. */
export function renderSpeech(request: SpeechRequest): Buffer {
  const seconds = speechSeconds(request);
  const samples = () => tone(Math.round(seconds * SPEECH_SAMPLE_RATE));
  switch (request.responseFormat) {
    case 'wav':
      return wav(samples());
    case 'pcm':
      return pcm(samples());
    case 'flac':
      return flac(samples());
    case 'mp3':
      return silentMp3(seconds);
    case 'opus':
      return silentOpus(seconds);
  }
}
