/**
 * `POST /v1/audio/transcriptions` and `/v1/audio/translations` (spec 4.10): OpenAI's multipart
 * forms, the answer in the format asked for, billed on what the model reports (seconds or
 * tokens) or, when its answer says nothing (text, srt, vtt), on the audio's own length.
 */
import type { CatalogModel, ModelPrices } from '@svc/catalog';
import { type MeterUsage, type Operation, operationOf, pricesOf, type Target } from '@svc/metering';
import { audioSeconds, isRecord, PARAMETERS } from '@svc/providers';
import type { BinaryResult } from '@svc/providers';
import { DomainError, isStorableText } from '@svc/platform';
import { invalid } from './types';

export type AudioTask = 'transcriptions' | 'translations';

/** Spec 4.10 and 8: the audio file is at most 25 MB. */
export const MAX_AUDIO_BYTES = 25 * 1024 * 1024;
export const TRANSCRIPTION_FORMATS = ['json', 'text', 'srt', 'verbose_json', 'vtt'] as const;
/**
 * Bounds on what a model billed in tokens may report per second of audio, for the hold
 * (spec 1 rule 1): OpenAI's audio models count about 10 input tokens a second, and speech runs
 * at 2-4 words a second; both bounds are several times that.
 */
export const MAX_INPUT_TOKENS_PER_SECOND = 50;
export const MAX_OUTPUT_TOKENS_PER_SECOND = 20;

/**
 * Fields each task passes to the provider: its known fields (spec 4.10) but the ones the gateway
 * reads itself; the others are ignored and reported.
 */
const FIELDS: Record<AudioTask, readonly string[]> = {
  transcriptions: PARAMETERS.transcription.filter((f) => !['model', 'file', 'provider'].includes(f)),
  translations: PARAMETERS.translation.filter((f) => !['model', 'file', 'provider'].includes(f)),
};

/** A multipart form as read: text fields (a repeated name gives several values) and the file. */
export interface AudioFormInput {
  fields: Record<string, string[]>;
  file: { bytes: Buffer; filename: string; contentType: string } | null;
}

export interface TranscriptionCall {
  task: AudioTask;
  model: string;
  file: { bytes: Buffer; filename: string; contentType: string };
  /** Forwarded upstream as form fields (a list field repeated). */
  fields: [string, string][];
  responseFormat: (typeof TRANSCRIPTION_FORMATS)[number];
  /** The audio's length, rounded up: the hold, and the charge when the model reports nothing. */
  seconds: number;
  promptTokens: number;
  /** Form fields the gateway does not read (x-svc-ignored-params). */
  ignored: string[];
}

export function transcriptionRequest(task: AudioTask, form: AudioFormInput): TranscriptionCall {
  const one = (name: string): string | undefined => {
    const values = form.fields[name];
    if (values === undefined) return undefined;
    if (values.length > 1) throw invalid(`${name} is given ${values.length} times; give it once.`, name);
    if (!isStorableText(values[0])) throw invalid(`${name} holds a NUL or an unpaired surrogate.`, name);
    return values[0];
  };
  const model = one('model');
  if (model === undefined || model === '') throw invalid('model is required.', 'model');
  if (form.file === null) throw invalid('file is required: the audio, as a file part of the form.', 'file');
  if (form.file.bytes.length === 0) throw invalid('file is empty.', 'file');
  const responseFormat = one('response_format') ?? 'json';
  if (!TRANSCRIPTION_FORMATS.includes(responseFormat as (typeof TRANSCRIPTION_FORMATS)[number])) {
    throw invalid(`response_format must be one of ${TRANSCRIPTION_FORMATS.join(', ')}.`, 'response_format');
  }
  const temperature = one('temperature');
  if (temperature !== undefined && !(Number(temperature) >= 0 && Number(temperature) <= 1 && temperature.trim() !== ''))
    throw invalid('temperature must be a number from 0 to 1.', 'temperature');
  const prompt = one('prompt');
  const forwarded = FIELDS[task];
  const fields: [string, string][] = [];
  for (const name of forwarded) {
    const values = name.endsWith('[]') ? (form.fields[name] ?? []) : [one(name)].filter((v): v is string => v !== undefined);
    for (const value of values) {
      if (!isStorableText(value)) throw invalid(`${name} holds a NUL or an unpaired surrogate.`, name);
      fields.push([name, value]);
    }
  }
  if (!fields.some(([name]) => name === 'response_format')) fields.push(['response_format', responseFormat]);
  const ignored = Object.keys(form.fields).filter((name) => name !== 'model' && name !== 'provider' && !forwarded.includes(name));
  return {
    task,
    model,
    file: form.file,
    fields,
    responseFormat: responseFormat as TranscriptionCall['responseFormat'],
    seconds: Math.max(1, Math.ceil(audioSeconds(form.file.bytes))),
    promptTokens: prompt === undefined ? 0 : Math.ceil(Buffer.byteLength(prompt) / 4),
    ignored,
  };
}

/** Spec 4.10 against the requested model: it must take audio in (a speech model is `audio` too). */
export function checkTranscriptionModel(model: CatalogModel): void {
  if (!model.inputModalities.includes('audio')) {
    throw DomainError.invalid(
      `${model.id} does not take audio; use a model whose input_modalities include audio (GET /v1/models?type=audio).`,
      'model',
      'model_type_mismatch',
    );
  }
}

export function transcriptionOperation(task: AudioTask): Operation<TranscriptionCall, BinaryResult> {
  return {
    modelType: 'audio',
    endpoint: `/v1/audio/${task}`,
    promptTokens: (call) => call.promptTokens,
    // Whichever way the model is priced (per second or per token), the hold covers it.
    worstCase: (call) => ({
      seconds: call.seconds,
      input: call.seconds * MAX_INPUT_TOKENS_PER_SECOND + call.promptTokens,
      output: call.seconds * MAX_OUTPUT_TOKENS_PER_SECOND,
    }),
    call: (target: Target, call) => {
      const fields = Object.fromEntries([['model', target.route.upstreamModel], ...call.fields.filter(([name]) => !name.endsWith('[]'))]);
      const lists = call.fields.filter(([name]) => name.endsWith('[]'));
      return operationOf(
        target,
        call.task === 'transcriptions' ? 'transcription' : 'translation',
      )({
        file: call.file.bytes,
        filename: call.file.filename,
        contentType: call.file.contentType,
        fields,
        lists,
      });
    },
    usageOf: (result, call, target) => reportedUsage(result, pricesOf(target)) ?? { seconds: call.seconds },
    returned: (result) => transcriptText(result).trim().length,
  };
}

/** What the model reported, as meters: OpenAI's `{type: "duration", seconds}` or `{type: "tokens", ...}`. */
function reportedUsage(result: BinaryResult, prices: ModelPrices): MeterUsage | null {
  const json = asJson(result);
  return isRecord(json) ? transcriptionMeters(json.usage, prices) : null;
}

/**
 * A transcription's usage as OpenAI reports it (WIRE-FORMATS 3.3 and 4.3: HTTP transcriptions and
 * a realtime session's input transcription alike) in meters: `{type: "duration", seconds}` as
 * whole seconds; `{type: "tokens"}` as input and output tokens, the audio ones apart when the
 * model has an audio input price (else at the input price, never free); null when it is neither.
 */
export function transcriptionMeters(usage: unknown, prices: Pick<ModelPrices, 'audioInputPerM'>): MeterUsage | null {
  if (!isRecord(usage)) return null;
  if (usage.type === 'duration' && typeof usage.seconds === 'number') return { seconds: Math.ceil(usage.seconds) };
  if (usage.type !== 'tokens' || typeof usage.input_tokens !== 'number' || typeof usage.output_tokens !== 'number') return null;
  const details = isRecord(usage.input_token_details) ? usage.input_token_details : {};
  const audio = typeof details.audio_tokens === 'number' ? Math.min(details.audio_tokens, usage.input_tokens) : 0;
  if (prices.audioInputPerM === null || audio === 0) return { input: usage.input_tokens, output: usage.output_tokens };
  return { input: usage.input_tokens - audio, audio_input: audio, output: usage.output_tokens };
}

/** The text of a transcript, whatever its format: nothing returned is not billed (spec 1 rule 3). */
export function transcriptText(result: BinaryResult): string {
  const json = asJson(result);
  if (json === undefined) return result.bytes.toString('utf8');
  return isRecord(json) && typeof json.text === 'string' ? json.text : '';
}

/**
 * Spec 1 rule 2 in a JSON answer (`json`, `verbose_json`): the service's id, the model that
 * answered, and `usage.cost` (USD) beside what the model reported in `usage` (its seconds or
 * tokens). A text, srt or vtt answer is left as the model wrote it: its id and cost are in the
 * headers only, since a subtitle file cannot carry them.
 */
export function transcriptionBody(
  result: BinaryResult,
  call: Pick<TranscriptionCall, 'responseFormat'>,
  billed: { id: string; model: string; cost: number },
): Buffer {
  if (call.responseFormat !== 'json' && call.responseFormat !== 'verbose_json') return result.bytes;
  const json = asJson(result);
  if (!isRecord(json)) return result.bytes;
  const usage = isRecord(json.usage) ? json.usage : {};
  return Buffer.from(JSON.stringify({ ...json, id: billed.id, model: billed.model, usage: { ...usage, cost: billed.cost } }));
}

function asJson(result: BinaryResult): unknown {
  if (!/json/i.test(result.contentType)) return undefined;
  try {
    return JSON.parse(result.bytes.toString('utf8'));
  } catch {
    return undefined;
  }
}
