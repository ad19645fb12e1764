/**
 * Billing rules of a realtime session (spec 4.16, spec 1 rules 1 and 3), as pure functions:
 * what a session has put in its conversation so far, each response's worst case from it, and a
 * reported `response.usage` as the meters the catalog prices.
 *
 * The worst case of one response (spec 1 rule 1, spec 8 "Worst-case balance check"):
 * - output: the response's `max_output_tokens`, else the session's, else 4,096 (also for "inf"),
 *   all at the dearer of the text and audio output prices, since a model may spend its whole
 *   budget on either (the cap counts text and audio output tokens together);
 * - input: everything the conversation can hold by now, at the full (uncached) prices: the
 *   session's instructions, the text and audio the client sent (items, appended audio, an
 *   out-of-band response's own input), and what earlier responses read and wrote, taken from
 *   their reported usage. Deleted or truncated items are not subtracted: the hold stays an
 *   upper bound, and what the model reports is what is charged.
 * Text is counted with the gateway's tokenizer; audio at 1 token per 100 ms of 24 kHz PCM16
 * (4,800 bytes), the rate OpenAI's realtime models count input audio at. Images are not counted.
 */
import type { ModelPrices } from '@svc/catalog';
import { DEFAULT_MAX_OUTPUT_TOKENS, type MeterUsage } from '@svc/metering';
import { countTextTokens, isRecord } from '@svc/providers';
import type { Wire } from './events';

/** 100 ms of 24 kHz mono PCM16: one input audio token. */
export const AUDIO_BYTES_PER_TOKEN = 4800;

/** What the session's conversation may hold, in tokens, as far as the gateway can tell. */
export interface ConversationTally {
  /** The session's instructions, as the client set them or the upstream reports them. */
  instructionsText: number;
  /** Text and audio in the conversation other than the instructions. */
  text: number;
  audio: number;
  /** The session's `max_output_tokens` (an integer, "inf", or null when never set). */
  maxOutputTokens: number | 'inf' | null;
}

export const EMPTY_TALLY: ConversationTally = { instructionsText: 0, text: 0, audio: 0, maxOutputTokens: null };

const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0);

/** Audio tokens of a base64 PCM16 payload, rounded up: an overestimate is a larger hold, never a larger charge. */
export function audioTokensOfBase64(base64: string): number {
  const padding = base64.endsWith('==') ? 2 : base64.endsWith('=') ? 1 : 0;
  const bytes = Math.max(0, Math.floor((base64.length * 3) / 4) - padding);
  return Math.ceil(bytes / AUDIO_BYTES_PER_TOKEN);
}

const TEXT_FIELDS = new Set(['text', 'transcript', 'output', 'arguments', 'name', 'instructions']);

/** Text and audio tokens of conversation items as the client sends them. */
export function itemTokens(items: unknown): { text: number; audio: number } {
  let text = 0;
  let audio = 0;
  const walk = (value: unknown, key: string | null): void => {
    if (typeof value === 'string') {
      if (key === 'audio') audio += audioTokensOfBase64(value);
      else if (key !== null && TEXT_FIELDS.has(key)) text += countTextTokens(value);
    } else if (Array.isArray(value)) {
      for (const v of value) walk(v, null);
    } else if (isRecord(value)) {
      for (const [k, v] of Object.entries(value)) walk(v, k);
    }
  };
  walk(items, null);
  return { text, audio };
}

const maxTokensOf = (v: unknown): number | 'inf' | null => (v === 'inf' ? 'inf' : Number.isInteger(v) && (v as number) > 0 ? (v as number) : null);

function withSession(tally: ConversationTally, session: unknown): ConversationTally {
  if (!isRecord(session)) return tally;
  const next = { ...tally };
  if (typeof session.instructions === 'string') next.instructionsText = countTextTokens(session.instructions);
  if ('max_output_tokens' in session) next.maxOutputTokens = maxTokensOf(session.max_output_tokens);
  return next;
}

/** The tally once a client event (already checked) is relayed upstream. */
export function tallyClientEvent(tally: ConversationTally, event: Wire): ConversationTally {
  switch (event.type) {
    case 'session.update':
      return withSession(tally, event.session);
    case 'conversation.item.create': {
      const added = itemTokens(event.item);
      return { ...tally, text: tally.text + added.text, audio: tally.audio + added.audio };
    }
    case 'input_audio_buffer.append':
      return typeof event.audio === 'string' ? { ...tally, audio: tally.audio + audioTokensOfBase64(event.audio) } : tally;
    default:
      return tally;
  }
}

/**
 * The tally once an upstream event is seen: the session as the upstream has it (its default
 * instructions count too), and a finished response's input and output joining the conversation.
 */
export function tallyServerEvent(tally: ConversationTally, event: Wire): ConversationTally {
  if (event.type === 'session.created' || event.type === 'session.updated') return withSession(tally, event.session);
  if (event.type !== 'response.done' || !isRecord(event.response)) return tally;
  const tokens = reportedTokens(event.response.usage);
  if (!tokens) return tally;
  return {
    ...tally,
    text: Math.max(tally.text, tokens.inputText - tally.instructionsText) + tokens.outputText,
    audio: Math.max(tally.audio, tokens.inputAudio) + tokens.outputAudio,
  };
}

/** The most one response may cost, by meter (see the top of this file). */
export function responseWorstCase(tally: ConversationTally, responseCreate: Wire, prices: Pick<ModelPrices, 'outputPerM' | 'audioOutputPerM'>): MeterUsage {
  const overrides = isRecord(responseCreate.response) ? responseCreate.response : {};
  const cap = maxTokensOf(overrides.max_output_tokens) ?? tally.maxOutputTokens;
  const output = typeof cap === 'number' ? cap : DEFAULT_MAX_OUTPUT_TOKENS;
  const instructions =
    typeof overrides.instructions === 'string' ? Math.max(tally.instructionsText, countTextTokens(overrides.instructions)) : tally.instructionsText;
  const own = itemTokens(overrides.input);
  const audioDearer = (prices.audioOutputPerM ?? 0n) > prices.outputPerM;
  return {
    input: instructions + tally.text + own.text,
    audio_input: tally.audio + own.audio,
    ...(audioDearer ? { audio_output: output } : { output }),
  };
}

interface ReportedTokens {
  inputText: number;
  cachedText: number;
  inputAudio: number;
  cachedAudio: number;
  outputText: number;
  outputAudio: number;
  outputTotal: number;
}

function reportedTokens(usage: unknown): ReportedTokens | null {
  if (!isRecord(usage)) return null;
  const input = isRecord(usage.input_token_details) ? usage.input_token_details : null;
  const cached = input && isRecord(input.cached_tokens_details) ? input.cached_tokens_details : null;
  const output = isRecord(usage.output_token_details) ? usage.output_token_details : null;
  // Without details every token is text: the cheaper guess never applies to audio the model did not report.
  const inputText = input ? num(input.text_tokens) + num(input.image_tokens) : num(usage.input_tokens);
  const inputAudio = input ? num(input.audio_tokens) : 0;
  const cachedText = cached ? num(cached.text_tokens) + num(cached.image_tokens) : 0;
  const cachedAudio = cached ? num(cached.audio_tokens) : 0;
  const outputText = output ? num(output.text_tokens) : num(usage.output_tokens);
  const outputAudio = output ? num(output.audio_tokens) : 0;
  const outputTotal = typeof usage.output_tokens === 'number' ? num(usage.output_tokens) : outputText + outputAudio;
  return { inputText, cachedText, inputAudio, cachedAudio, outputText, outputAudio, outputTotal };
}

/**
 * A `response.done`'s `response.usage` (WIRE-FORMATS 3.3) as meters: `input`, `cached_input`,
 * `output` are text tokens; `audio_input`, `cached_audio_input`, `audio_output` audio tokens.
 * `returned` is every output token: none (a failed or empty response) is free (spec 1 rule 3).
 * Null when the event reports no usage.
 */
export function responseMeters(usage: unknown): { usage: MeterUsage; returned: number } | null {
  const t = reportedTokens(usage);
  if (!t) return null;
  return {
    usage: {
      input: t.inputText,
      cached_input: Math.min(t.cachedText, t.inputText),
      audio_input: t.inputAudio,
      cached_audio_input: Math.min(t.cachedAudio, t.inputAudio),
      output: t.outputText,
      audio_output: t.outputAudio,
    },
    returned: t.outputTotal,
  };
}
