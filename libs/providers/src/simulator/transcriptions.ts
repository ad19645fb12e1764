/**
 * The simulated speech-to-text model (`POST /v1/audio/transcriptions` and `/translations`,
 * multipart/form-data).
 *
 * The transcript is the text of the lines `#sim-text <text>` found anywhere in the uploaded file
 * (a test appends them to a WAV), joined by spaces; lines `#sim {json}` in the file, and in the
 * `prompt` field, are directives. Without `#sim-text` the transcript is English words picked by
 * a hash of the file's bytes, 2.5 a second. A translation answers the same text as English.
 *
 * The duration comes from the file: a WAV's header, an MP3's frame headers, else its size read
 * as 128 kbit/s. Whisper models (a name containing `whisper`) bill
 * `{type: "duration", seconds}` (whole seconds, rounded up) and speak every response_format;
 * the others bill tokens (10 audio tokens a second, the prompt's text tokens, the transcript's
 * output tokens) and, as gpt-4o-transcribe does, answer only `json`.
 *
 * `text`, `srt` and `vtt` are plain-text bodies, `text/plain; charset=utf-8` as OpenAI sends them.
 */
import { createHash } from 'node:crypto';
import { countTextTokens, encodeText } from '../tokens';
import { audioSeconds as headerSeconds } from '../audio-duration';
import { parseDirectives, type SimDirectives } from './directives';
import { SimError } from './http';
import type { MultipartForm, UploadedFile } from './multipart';

export type TranscriptionTask = 'transcribe' | 'translate';
export type TranscriptionFormat = 'json' | 'text' | 'srt' | 'verbose_json' | 'vtt';

export interface TranscriptionRequest {
  task: TranscriptionTask;
  model: string;
  file: UploadedFile;
  /** ISO-639-1 code, as sent. */
  language: string | undefined;
  /** The prompt without its `#sim` lines. */
  prompt: string;
  responseFormat: TranscriptionFormat;
  temperature: number;
  granularities: Array<'word' | 'segment'>;
  directives: SimDirectives;
  /** The `#sim-text` of the file, if it has any. */
  simText: string | null;
}

export interface Segment {
  id: number;
  seek: number;
  start: number;
  end: number;
  text: string;
  tokens: number[];
  temperature: number;
  avg_logprob: number;
  compression_ratio: number;
  no_speech_prob: number;
}

export interface Transcript {
  text: string;
  /** Seconds of audio in the upload. */
  duration: number;
  /** Full lower-case name, as verbose_json reports it. */
  language: string;
  /** One per sentence, timed in proportion to its length. */
  segments: Segment[];
  words: Array<{ word: string; start: number; end: number }>;
}

const FORMATS: readonly TranscriptionFormat[] = ['json', 'text', 'srt', 'verbose_json', 'vtt'];
const GRANULARITIES = ['word', 'segment'] as const;
const WORDS_PER_SECOND = 2.5;
const WORDS_PER_SENTENCE = 12;
const AUDIO_TOKENS_PER_SECOND = 10;
/** Bytes a second of an unknown format: 128 kbit/s, a common compressed-audio rate. */
const UNKNOWN_FORMAT_BYTES_PER_SECOND = 16_000;
/** Whisper decodes 30 s windows; `seek` is where a segment's window starts, in 10 ms frames. */
const WINDOW_SECONDS = 30;
const VOCABULARY = (
  'the a quiet river runs past old stone houses while children play near green fields and birds sing ' +
  'over small boats that carry bread fruit and letters to every town along the bright northern coast'
).split(' ');

const LANGUAGES: Record<string, string> = {
  en: 'english',
  de: 'german',
  fr: 'french',
  es: 'spanish',
  it: 'italian',
  pt: 'portuguese',
  nl: 'dutch',
  sv: 'swedish',
  no: 'norwegian',
  da: 'danish',
  fi: 'finnish',
  pl: 'polish',
  cs: 'czech',
  uk: 'ukrainian',
  ru: 'russian',
  tr: 'turkish',
  ar: 'arabic',
  hi: 'hindi',
  ja: 'japanese',
  ko: 'korean',
  zh: 'chinese',
};

const single = (form: MultipartForm, name: string): string | undefined => form.fields[name]?.at(-1);

export function parseTranscriptionRequest(form: MultipartForm, task: TranscriptionTask): TranscriptionRequest {
  const model = single(form, 'model');
  if (!model) throw new SimError(400, 'model is required', 'model');
  if (!form.file) throw new SimError(400, 'file is required (a multipart file part named "file")', 'file');
  const responseFormat = single(form, 'response_format') ?? 'json';
  if (!FORMATS.includes(responseFormat as TranscriptionFormat)) {
    throw new SimError(400, `response_format must be one of ${FORMATS.join(', ')}`, 'response_format');
  }
  if (!isWhisper(model) && responseFormat !== 'json') {
    throw new SimError(400, `response_format '${responseFormat}' is not compatible with model '${model}'; use json`, 'response_format', 'unsupported_value');
  }
  const language = single(form, 'language');
  if (language !== undefined && !/^[a-z]{2,3}$/i.test(language)) {
    throw new SimError(400, 'language must be an ISO-639-1 code such as "en"', 'language');
  }
  const temperatureText = single(form, 'temperature') ?? '0';
  const temperature = Number(temperatureText);
  if (temperatureText.trim() === '' || !(temperature >= 0 && temperature <= 1)) {
    throw new SimError(400, 'temperature must be a number from 0 to 1', 'temperature');
  }
  const granularities = form.fields['timestamp_granularities[]'] ?? form.fields.timestamp_granularities ?? ['segment'];
  if (!granularities.every((g) => (GRANULARITIES as readonly string[]).includes(g))) {
    throw new SimError(400, 'timestamp_granularities must hold word and/or segment', 'timestamp_granularities');
  }
  const { simText, simLines } = simLinesOf(form.file.bytes);
  const { directives, text: prompt } = parseDirectives([single(form, 'prompt') ?? '', ...simLines].join('\n'));
  return {
    task,
    model,
    file: form.file,
    language,
    prompt,
    responseFormat: responseFormat as TranscriptionFormat,
    temperature,
    granularities: granularities as Array<'word' | 'segment'>,
    directives,
    simText,
  };
}

export const isWhisper = (model: string) => model.toLowerCase().includes('whisper');

const MARKER = Buffer.from('#sim', 'latin1');

/** The `#sim-text` transcript and the `#sim` directive lines found at line starts in the bytes. */
export function simLinesOf(bytes: Buffer): { simText: string | null; simLines: string[] } {
  const texts: string[] = [];
  const simLines: string[] = [];
  for (let at = bytes.indexOf(MARKER); at >= 0; at = bytes.indexOf(MARKER, at + MARKER.length)) {
    if (at > 0 && bytes[at - 1] !== 0x0a) continue;
    const end = bytes.indexOf(0x0a, at);
    const line = bytes.toString('utf8', at, end < 0 ? bytes.length : end).replace(/\r$/, '');
    if (line.startsWith('#sim-text ')) texts.push(line.slice('#sim-text '.length).trim());
    else if (line.startsWith('#sim ')) simLines.push(line);
  }
  return { simText: texts.length ? texts.join(' ') : null, simLines };
}

/** Seconds of audio: from a WAV header, MP3 frame headers, else the size at 128 kbit/s (a typical file's rate). */
export function audioSeconds(bytes: Buffer): number {
  return headerSeconds(bytes, UNKNOWN_FORMAT_BYTES_PER_SECOND);
}

export function transcribe(request: TranscriptionRequest): Transcript {
  const duration = audioSeconds(request.file.bytes);
  const code = (request.language ?? 'en').toLowerCase();
  const language = request.task === 'translate' ? 'english' : (LANGUAGES[code] ?? code);
  const text = request.directives.empty ? '' : (request.simText ?? hashedWords(request.file.bytes, duration));
  // Times are proportional to the character offset in the sentences joined by single spaces.
  const sentences = sentencesOf(text);
  const length = sentences.join(' ').length;
  const timeAt = (offset: number) => round3(length ? (duration * offset) / length : 0);

  const segments: Segment[] = [];
  const words: Transcript['words'] = [];
  let offset = 0;
  for (const [id, sentence] of sentences.entries()) {
    const start = timeAt(offset);
    segments.push({
      id,
      seek: Math.floor(start / WINDOW_SECONDS) * WINDOW_SECONDS * 100,
      start,
      end: timeAt(offset + sentence.length),
      text: ` ${sentence}`, // whisper's segment texts start with the space before their first word
      tokens: encodeText(` ${sentence}`),
      temperature: request.temperature,
      avg_logprob: -0.25,
      compression_ratio: 1.2,
      no_speech_prob: 0.01,
    });
    for (const word of sentence.split(' ')) {
      words.push({ word: word.replace(/[.,!?]+$/, ''), start: timeAt(offset), end: timeAt(offset + word.length) });
      offset += word.length + 1;
    }
  }
  return { text, duration: round3(duration), language, segments, words };
}

const round3 = (seconds: number) => Math.round(seconds * 1000) / 1000;

/** Sentences ending at . ! or ?, else runs of WORDS_PER_SENTENCE words. */
function sentencesOf(text: string): string[] {
  const words = text.split(/\s+/).filter(Boolean);
  const sentences: string[] = [];
  let current: string[] = [];
  for (const word of words) {
    current.push(word);
    if (/[.!?]$/.test(word) || current.length === WORDS_PER_SENTENCE) {
      sentences.push(current.join(' '));
      current = [];
    }
  }
  if (current.length) sentences.push(current.join(' '));
  return sentences;
}

/** Deterministic English-looking text for audio without `#sim-text`. */
function hashedWords(bytes: Buffer, seconds: number): string {
  const count = Math.max(1, Math.round(seconds * WORDS_PER_SECOND));
  const digest = createHash('sha256').update(bytes).digest();
  const words = Array.from({ length: count }, (_, i) => VOCABULARY[(digest[i % digest.length] + i * 7) % VOCABULARY.length]);
  const sentences: string[] = [];
  for (let i = 0; i < words.length; i += WORDS_PER_SENTENCE) {
    const sentence = words.slice(i, i + WORDS_PER_SENTENCE).join(' ');
    sentences.push(`${sentence[0].toUpperCase()}${sentence.slice(1)}.`);
  }
  return sentences.join(' ');
}

export type TranscriptionUsage =
  | { type: 'duration'; seconds: number }
  | {
      type: 'tokens';
      input_tokens: number;
      input_token_details: { audio_tokens: number; text_tokens: number };
      output_tokens: number;
      total_tokens: number;
    };

export function transcriptionUsage(request: TranscriptionRequest, transcript: Transcript): TranscriptionUsage {
  if (isWhisper(request.model)) return { type: 'duration', seconds: Math.ceil(transcript.duration) };
  const audio = Math.ceil(transcript.duration * AUDIO_TOKENS_PER_SECOND);
  const text = countTextTokens(request.prompt);
  const output = countTextTokens(transcript.text);
  return {
    type: 'tokens',
    input_tokens: audio + text,
    input_token_details: { audio_tokens: audio, text_tokens: text },
    output_tokens: output,
    total_tokens: audio + text + output,
  };
}

/** The body of the answer in the requested format, and its content type. */
export function renderTranscription(request: TranscriptionRequest, transcript: Transcript): { contentType: string; body: string } {
  const usage = transcriptionUsage(request, transcript);
  const json = (value: unknown) => ({ contentType: 'application/json', body: JSON.stringify(value) });
  const plain = (body: string) => ({ contentType: 'text/plain; charset=utf-8', body });
  switch (request.responseFormat) {
    case 'json':
      return json({ text: transcript.text, usage });
    case 'verbose_json':
      return json({
        task: request.task,
        language: transcript.language,
        duration: transcript.duration,
        text: transcript.text,
        ...(request.granularities.includes('segment') ? { segments: transcript.segments } : {}),
        ...(request.granularities.includes('word') ? { words: transcript.words } : {}),
        usage,
      });
    case 'text':
      return plain(`${transcript.text}\n`);
    case 'srt':
      return plain(transcript.segments.map((s, i) => `${i + 1}\n${timestamp(s.start, ',')} --> ${timestamp(s.end, ',')}\n${s.text.trim()}\n\n`).join(''));
    case 'vtt':
      return plain(`WEBVTT\n\n${transcript.segments.map((s) => `${timestamp(s.start, '.')} --> ${timestamp(s.end, '.')}\n${s.text.trim()}\n\n`).join('')}`);
  }
}

/** `HH:MM:SS,mmm` (SRT) or `HH:MM:SS.mmm` (WebVTT). */
export function timestamp(seconds: number, separator: ',' | '.'): string {
  const ms = Math.round(seconds * 1000);
  const pad = (n: number, width = 2) => String(n).padStart(width, '0');
  return `${pad(Math.floor(ms / 3_600_000))}:${pad(Math.floor(ms / 60_000) % 60)}:${pad(Math.floor(ms / 1000) % 60)}${separator}${pad(ms % 1000, 3)}`;
}
