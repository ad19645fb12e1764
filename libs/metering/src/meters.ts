import type { ModelPrices } from '@svc/catalog';
import { METERS, type Meter, type MeterUsage, type TokenUsage } from '@svc/ledger';
import { ceilDiv, type Nano } from '@svc/platform';

export { METERS, type Meter, type MeterUsage };

const PER_MILLION = 1_000_000n;

const count = (usage: MeterUsage, meter: Meter): bigint => BigInt(usage[meter] ?? 0);

/**
 * The exact charge for `usage` at `prices`, rounded up to the nano once per kind of price.
 * Token prices are per million (spec 1 rule 5: cached input at the cached price, the rest of
 * the input at the input price, reasoning inside output); characters per million; the others
 * per unit. A meter the model has no price for costs nothing: the catalog decides what is billed.
 */
export function costOfMeters(usage: MeterUsage, prices: ModelPrices): Nano {
  const input = count(usage, 'input');
  const cached = [count(usage, 'cached_input'), input].reduce((a, b) => (a < b ? a : b));
  const tokens = ceilDiv((input - cached) * prices.inputPerM + cached * prices.cachedInputPerM + count(usage, 'output') * prices.outputPerM, PER_MILLION);
  const characters = ceilDiv(count(usage, 'characters') * (prices.perMillionCharacters ?? 0n), PER_MILLION);
  // Spec 4.16: audio tokens at the audio prices, cached audio at its own, like the text tokens.
  const audioInput = count(usage, 'audio_input');
  const cachedAudio = [count(usage, 'cached_audio_input'), audioInput].reduce((a, b) => (a < b ? a : b));
  const audio = ceilDiv(
    (audioInput - cachedAudio) * (prices.audioInputPerM ?? 0n) + cachedAudio * (prices.cachedAudioInputPerM ?? 0n) + count(usage, 'audio_output') * (prices.audioOutputPerM ?? 0n),
    PER_MILLION,
  );
  return (
    tokens +
    characters +
    audio +
    count(usage, 'search_units') * (prices.perSearchUnit ?? 0n) +
    count(usage, 'queries') * (prices.perQuery ?? 0n) +
    count(usage, 'seconds') * (prices.perSecond ?? 0n) +
    count(usage, 'images') * (prices.perImage ?? 0n) +
    count(usage, 'provider_cost')
  );
}

/** Token usage as meters: the shape of every text call. */
export function tokenMeters(usage: TokenUsage): MeterUsage {
  return { input: usage.promptTokens, cached_input: usage.cachedTokens, output: usage.completionTokens };
}

/** Output tokens assumed when the request sets no cap (spec 1, rule 1 and section 8). */
export const DEFAULT_MAX_OUTPUT_TOKENS = 4096;

/** Spec 1 rule 1 for a text call: the whole input at the full input price, plus the output cap (4,096 when none). */
export function tokenWorstCase(promptTokens: number, maxOutputTokens: number | null): MeterUsage {
  return { input: promptTokens, output: maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS };
}

/** Only the meters that are not 0, in METERS order: what an event records. */
export function recordedMeters(usage: MeterUsage): MeterUsage {
  const recorded: MeterUsage = {};
  for (const meter of METERS) {
    const value = usage[meter];
    if (value !== undefined && value !== 0) recorded[meter] = value;
  }
  return recorded;
}
