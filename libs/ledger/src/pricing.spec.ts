import { costOfUsage, worstCaseCost } from './pricing';

// $2 / M input, $8 / M output, $0.50 / M cached input.
const prices = { inputPerM: 2_000_000_000n, outputPerM: 8_000_000_000n, cachedInputPerM: 500_000_000n };
const usage = (over = {}) => ({ promptTokens: 1000, completionTokens: 100, cachedTokens: 0, reasoningTokens: 0, ...over });

describe('pricing (spec 1)', () => {
  it('prices input and output tokens exactly in nano-USD', () => {
    // 1000 * 2000 nano + 100 * 8000 nano
    expect(costOfUsage(usage(), prices)).toBe(2_800_000n);
  });

  it('rule 5: cached input tokens are billed at the cached price', () => {
    // 600 * 2000 + 400 * 500 + 100 * 8000
    expect(costOfUsage(usage({ cachedTokens: 400 }), prices)).toBe(2_200_000n);
  });

  it('rule 5: reasoning tokens are billed as output (they are inside completion tokens)', () => {
    expect(costOfUsage(usage({ completionTokens: 150, reasoningTokens: 50 }), prices)).toBe(2_000_000n + 1_200_000n);
  });

  it('never bills more cached tokens than prompt tokens', () => {
    expect(costOfUsage(usage({ promptTokens: 10, cachedTokens: 99, completionTokens: 0 }), prices)).toBe(5_000n);
  });

  it('rounds a fraction of a nano up', () => {
    expect(costOfUsage(usage({ promptTokens: 1, completionTokens: 0 }), { ...prices, inputPerM: 1n })).toBe(1n);
  });

  it('rule 1: the worst case is input plus max_tokens, or 4,096 output tokens when unset', () => {
    expect(worstCaseCost(1000, 50, prices)).toBe(2_000_000n + 400_000n);
    expect(worstCaseCost(1000, null, prices)).toBe(2_000_000n + 4096n * 8000n);
  });
});
