import { ceilDiv, type Nano } from '../../platform/src/money';

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

const PER_MILLION = 1_000_000n;

/** Spec 1, rule 5: cached input at the cached price, the rest of the input at the input price. */
export function costOfUsage(usage: TokenUsage, prices: TokenPrices): Nano {
  const cached = BigInt(Math.min(usage.cachedTokens, usage.promptTokens));
  const uncached = BigInt(usage.promptTokens) - cached;
  const micro =
    uncached * prices.inputPerM + cached * prices.cachedInputPerM + BigInt(usage.completionTokens) * prices.outputPerM;
  return ceilDiv(micro, PER_MILLION);
}

/** Output tokens assumed when the request sets no cap (spec 1, rule 1 and section 8). */
export const DEFAULT_MAX_OUTPUT_TOKENS = 4096;

/** Spec 1, rule 1: the worst case is the whole input at the full input price plus the output cap. */
export function worstCaseCost(inputTokens: number, maxOutputTokens: number | null, prices: TokenPrices): Nano {
  const output = BigInt(maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS);
  return ceilDiv(BigInt(inputTokens) * prices.inputPerM + output * prices.outputPerM, PER_MILLION);
}
