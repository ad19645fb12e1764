import type { CatalogModel, CatalogRoute, ModelPrices } from '@svc/catalog';
import { costOfMeters, recordedMeters, tokenMeters, tokenWorstCase } from './meters';
import { costOf, type Target } from './targets';

// $2 / M input, $8 / M output, $0.50 / M cached input; no per-unit prices.
const prices: ModelPrices = {
  inputPerM: 2_000_000_000n,
  outputPerM: 8_000_000_000n,
  cachedInputPerM: 500_000_000n,
  perQuery: null,
  perSecond: null,
  perImage: null,
  perMillionCharacters: null,
  perSearchUnit: null,
  audioInputPerM: null,
  cachedAudioInputPerM: null,
  audioOutputPerM: null,
};
const tokens = (over = {}) => tokenMeters({ promptTokens: 1000, completionTokens: 100, cachedTokens: 0, reasoningTokens: 0, ...over });

describe('pricing by meter (spec 1)', () => {
  it('prices input and output tokens exactly in nano-USD', () => {
    // 1000 * 2000 nano + 100 * 8000 nano
    expect(costOfMeters(tokens(), prices)).toBe(2_800_000n);
  });

  it('rule 5: cached input tokens are billed at the cached price', () => {
    // 600 * 2000 + 400 * 500 + 100 * 8000
    expect(costOfMeters(tokens({ cachedTokens: 400 }), prices)).toBe(2_200_000n);
  });

  it('rule 5: reasoning tokens are billed as output (they are inside completion tokens)', () => {
    expect(costOfMeters(tokens({ completionTokens: 150, reasoningTokens: 50 }), prices)).toBe(2_000_000n + 1_200_000n);
  });

  it('never bills more cached tokens than prompt tokens', () => {
    expect(costOfMeters(tokens({ promptTokens: 10, cachedTokens: 99, completionTokens: 0 }), prices)).toBe(5_000n);
  });

  it('rounds a fraction of a nano up', () => {
    expect(costOfMeters(tokens({ promptTokens: 1, completionTokens: 0 }), { ...prices, inputPerM: 1n })).toBe(1n);
  });

  it('rule 1: the worst case is input plus max_tokens, or 4,096 output tokens when unset', () => {
    expect(costOfMeters(tokenWorstCase(1000, 50), prices)).toBe(2_000_000n + 400_000n);
    expect(costOfMeters(tokenWorstCase(1000, null), prices)).toBe(2_000_000n + 4096n * 8000n);
  });

  it('spec 4.16: audio tokens at the audio prices, cached audio at its own, text tokens unchanged beside them; no audio price, no audio charge', () => {
    // $32 / M audio in, $0.40 / M cached audio in, $64 / M audio out.
    const realtime: ModelPrices = { ...prices, audioInputPerM: 32_000_000_000n, cachedAudioInputPerM: 400_000_000n, audioOutputPerM: 64_000_000_000n };
    // 1000 text in (2,000,000) + 100 text out (800,000) + (500 - 200) * 32,000 + 200 * 400 + 250 * 64,000
    expect(costOfMeters({ ...tokens(), audio_input: 500, cached_audio_input: 200, audio_output: 250 }, realtime)).toBe(
      2_800_000n + 9_600_000n + 80_000n + 16_000_000n,
    );
    // Never more cached audio than audio.
    expect(costOfMeters({ audio_input: 10, cached_audio_input: 99 }, realtime)).toBe(4_000n);
    // One audio token at $1 / M is a fraction of a nano: rounded up once, with the other audio.
    expect(costOfMeters({ audio_input: 1 }, { ...realtime, audioInputPerM: 1_000_000n })).toBe(1n);
    expect(costOfMeters({ audio_input: 500, audio_output: 250 }, prices)).toBe(0n);
    expect(recordedMeters({ input: 0, audio_input: 5, cached_audio_input: 0, audio_output: 7 })).toEqual({ audio_input: 5, audio_output: 7 });
  });

  it('prices every other meter per unit, characters per million, and adds the provider-reported cost as it is', () => {
    const perUnit: ModelPrices = {
      ...prices,
      perQuery: 5_000_000n,
      perSecond: 100_000_000n,
      perImage: 40_000_000n,
      perMillionCharacters: 15_000_000_000n,
      perSearchUnit: 2_000_000n,
    };
    expect(costOfMeters({ queries: 3 }, perUnit)).toBe(15_000_000n);
    expect(costOfMeters({ seconds: 8 }, perUnit)).toBe(800_000_000n);
    expect(costOfMeters({ images: 2 }, perUnit)).toBe(80_000_000n);
    expect(costOfMeters({ search_units: 11 }, perUnit)).toBe(22_000_000n);
    // 1,001 characters at $15 / M: 15,015 nano exactly; one more character rounds up from 15,015.000015.
    expect(costOfMeters({ characters: 1001 }, perUnit)).toBe(15_015_000n);
    expect(costOfMeters({ characters: 1 }, { ...perUnit, perMillionCharacters: 1n })).toBe(1n);
    expect(costOfMeters({ provider_cost: 123_456_789 }, perUnit)).toBe(123_456_789n);
    // Meters add up: tokens, units and the provider's cost in one charge.
    expect(costOfMeters({ input: 1000, output: 100, images: 1, provider_cost: 7 }, perUnit)).toBe(2_800_000n + 40_000_000n + 7n);
  });

  it('bills nothing for a meter the model has no price for', () => {
    expect(costOfMeters({ images: 4, seconds: 10, characters: 500, search_units: 3, queries: 2 }, prices)).toBe(0n);
  });

  it('records only the meters that were used, in a stable order', () => {
    expect(recordedMeters({ output: 5, input: 0, images: 1, cached_input: 0 })).toEqual({ output: 5, images: 1 });
    expect(Object.keys(recordedMeters({ images: 1, input: 3, output: 2 }))).toEqual(['input', 'output', 'images']);
  });
});

describe('the tools a model call runs, priced on the same generation (spec 4.2 rule 7)', () => {
  const route = { provider: { name: 'p' }, upstreamModel: 'm', prices } as unknown as CatalogRoute;
  const target = (over: Partial<Target> = {}): Target => ({
    model: { id: 'm', prices } as unknown as CatalogModel,
    route,
    provider: {} as Target['provider'],
    byok: false,
    fields: {},
    ...over,
  });

  it('adds each web search at its engine price to the tokens', () => {
    expect(costOf(target({ toolPrices: { perQuery: 2_000_000n } }), { ...tokens(), queries: 1 }, 5)).toBe(2_800_000n + 2_000_000n);
  });

  it('charges BYOK its fee on the tokens only: the search ran on the operator engine, at full price', () => {
    // 5% of 2.8 m nano = 140,000, plus the search.
    expect(costOf(target({ byok: true, toolPrices: { perQuery: 2_000_000n } }), { ...tokens(), queries: 1 }, 5)).toBe(140_000n + 2_000_000n);
  });

  it('bills no search when none returned results, and none without tool prices', () => {
    expect(costOf(target({ toolPrices: { perQuery: 2_000_000n } }), tokens(), 5)).toBe(2_800_000n);
    expect(costOf(target(), { ...tokens(), queries: 1 }, 5)).toBe(2_800_000n);
  });
});
