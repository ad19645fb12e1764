import type { ModelPrices } from '@svc/catalog';
import { METERS, type Meter, type MeterUsage, type TokenUsage } from '@svc/ledger';
import { ceilDiv, type Nano } from '@svc/platform';

export { METERS, type Meter, type MeterUsage };

const PER_MILLION = 1_000_000n;

const count = (usage: MeterUsage, meter: Meter): bigint => BigInt(usage[meter] ?? 0);

/**
 * How a meter is priced: per million units (tokens, characters, audio tokens), rounded up once
 * per `group` over the group's sum, or per unit (`group` null), exact.
 */
export interface MeterPrice {
  quantity: bigint;
  price: Nano;
  perMillion: boolean;
  group: 'tokens' | 'characters' | 'audio' | null;
}

/**
 * The billed quantity and price of each meter of `usage` at `prices`: the one pricing table,
 * which the charge (costOfMeters) and its lines (cost-lines.ts) both read. Token prices are per
 * million (spec 1 rule 5: cached input at the cached price, the rest of the input at the input
 * price, reasoning inside output); characters per million; spec 4.16: audio tokens at the audio
 * prices, cached audio at its own, like the text tokens; the others per unit. A meter the model
 * has no price for costs nothing: the catalog decides what is billed.
 */
export function pricedUsage(usage: MeterUsage, p: ModelPrices): Record<Meter, MeterPrice> {
  const min = (a: bigint, b: bigint) => (a < b ? a : b);
  const input = count(usage, 'input');
  const cached = min(count(usage, 'cached_input'), input);
  const audioInput = count(usage, 'audio_input');
  const cachedAudio = min(count(usage, 'cached_audio_input'), audioInput);
  const perM = (quantity: bigint, price: Nano | null, group: MeterPrice['group']): MeterPrice => ({ quantity, price: price ?? 0n, perMillion: true, group });
  const perUnit = (quantity: bigint, price: Nano | null): MeterPrice => ({ quantity, price: price ?? 0n, perMillion: false, group: null });
  return {
    input: perM(input - cached, p.inputPerM, 'tokens'),
    cached_input: perM(cached, p.cachedInputPerM, 'tokens'),
    output: perM(count(usage, 'output'), p.outputPerM, 'tokens'),
    characters: perM(count(usage, 'characters'), p.perMillionCharacters, 'characters'),
    search_units: perUnit(count(usage, 'search_units'), p.perSearchUnit),
    queries: perUnit(count(usage, 'queries'), p.perQuery),
    seconds: perUnit(count(usage, 'seconds'), p.perSecond),
    images: perUnit(count(usage, 'images'), p.perImage),
    // Already nano-USD, as the provider reported it.
    provider_cost: perUnit(count(usage, 'provider_cost'), 1n),
    audio_input: perM(audioInput - cachedAudio, p.audioInputPerM, 'audio'),
    cached_audio_input: perM(cachedAudio, p.cachedAudioInputPerM, 'audio'),
    audio_output: perM(count(usage, 'audio_output'), p.audioOutputPerM, 'audio'),
  };
}

/** The exact charge for `usage` at `prices` (pricedUsage), rounded up to the nano once per group. */
export function costOfMeters(usage: MeterUsage, prices: ModelPrices): Nano {
  const groups = { tokens: 0n, characters: 0n, audio: 0n };
  let cost = 0n;
  for (const { quantity, price, group } of Object.values(pricedUsage(usage, prices))) {
    if (group) groups[group] += quantity * price;
    else cost += quantity * price;
  }
  return cost + ceilDiv(groups.tokens, PER_MILLION) + ceilDiv(groups.characters, PER_MILLION) + ceilDiv(groups.audio, PER_MILLION);
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
