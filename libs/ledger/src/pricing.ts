import type { Nano } from '@svc/platform';

/** Catalog prices, in nano-USD per million tokens (so "$0.15 / M" is 150_000_000n). */
export interface TokenPrices {
  inputPerM: Nano;
  outputPerM: Nano;
  cachedInputPerM: Nano;
}

/**
 * Usage as providers report it, normalised. `completionTokens` includes reasoning tokens
 * (spec 1, rule 5: reasoning is billed as output), `promptTokens` includes cached tokens.
 */
export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  reasoningTokens: number;
}

/**
 * What a billed call is measured in (ARCHITECTURE section 10; spec 1: tokens for text models,
 * characters for speech, search units for rerank, queries for search, seconds or the
 * provider's cost for video, the provider's cost for images; spec 4.16: text and audio tokens
 * for realtime). Every value is a whole number: tokens, characters, units, queries, images,
 * seconds (rounded up), and `provider_cost` in nano-USD as the provider reported it. The audio
 * meters count audio tokens apart from `input`/`output`, which stay the text tokens, since
 * realtime models price the two differently.
 */
export const METERS = [
  'input',
  'cached_input',
  'output',
  'characters',
  'search_units',
  'queries',
  'seconds',
  'images',
  'provider_cost',
  'audio_input',
  'cached_audio_input',
  'audio_output',
] as const;
export type Meter = (typeof METERS)[number];

/** Usage by meter; a meter left out is 0. `input` includes `cached_input`, and `audio_input` includes `cached_audio_input`, as providers report them. */
export type MeterUsage = Partial<Record<Meter, number>>;

/**
 * Usage as it was billed, by meter: what the caller reads (a generation's `usage_by_meter`, a
 * statement's and an export's `meters`). Events and the read models keep `input` including
 * `cached_input` (and `audio_input` including `cached_audio_input`), as providers report them;
 * shown that way, a reader pricing each meter at its price (spec 1 rule 5) would bill the cached
 * tokens twice, at the input price and again at the cached price. So `input` here is the input
 * not served from cache, like the cost line `input` (issue 41 item 14). Linear: the billed
 * meters of a difference are the difference of the billed meters, so a correction's
 * `usage_added` reads the same way. Meters that come out 0 are left out.
 */
export function billedMeters(usage: MeterUsage): MeterUsage {
  const billed: MeterUsage = { ...usage };
  const less = (meter: Meter, part: Meter) => {
    if (billed[meter] === undefined) return;
    const quantity = (billed[meter] ?? 0) - (usage[part] ?? 0);
    if (quantity === 0) delete billed[meter];
    else billed[meter] = quantity;
  };
  less('input', 'cached_input');
  less('audio_input', 'cached_audio_input');
  return billed;
}

/** The meters other than tokens: what a non-text call is billed in, shown beside the token counts. */
export const UNIT_METERS = [
  'characters',
  'search_units',
  'queries',
  'seconds',
  'images',
  'provider_cost',
  'audio_input',
  'cached_audio_input',
  'audio_output',
] as const satisfies readonly Meter[];
export type UnitMeter = (typeof UNIT_METERS)[number];

/**
 * Spec 1 rule 3: a call that returned nothing (`returned`, in its own units: output tokens,
 * vectors, images...) is not billed, whatever it cost; otherwise it is billed its cost. The
 * ledger settles by it, and a job presents a cost before settling by it.
 */
export function billedAmount(costNano: Nano, returned: number): Nano {
  return returned === 0 ? 0n : costNano;
}

/**
 * One line of a charge's explanation (issue 23), as UsageCharged records it: `quantity` units of
 * `meter` at `unit_price_usd` (USD per unit, an exact decimal, possibly finer than a nano) come
 * to `amount_nano`, that product truncated toward zero. Besides the meters, a line may be
 * `rounding` (the nanos the charge rounds up, quantity in nanos), `batch_discount` (quantity:
 * the percent), `byok_credit` and `byok_fee` (quantity: the percent). The amounts of a charge's
 * lines add up to its `amount_nano` exactly; libs/metering/src/cost-lines.ts makes them.
 */
export interface CostLine {
  meter: string;
  quantity: number;
  unit_price_usd: string;
  amount_nano: string;
}
