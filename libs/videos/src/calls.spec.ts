import type { CatalogModel, CatalogRoute, ModelPrices } from '@svc/catalog';
import { explainCharge, sumOfLines, type PricedTarget } from '@svc/metering';
import { videoCharge } from './calls';

const none: ModelPrices = {
  inputPerM: null,
  outputPerM: null,
  cachedInputPerM: null,
  perQuery: null,
  perSecond: null,
  perImage: null,
  perMillionCharacters: null,
  perSearchUnit: null,
  audioInputPerM: null,
  cachedAudioInputPerM: null,
  audioOutputPerM: null,
} as unknown as ModelPrices;
// sim/video-router's list price: $0.30 a second; the router reports its own figure.
const prices = { ...none, perSecond: 300_000_000n } as ModelPrices;
const route = { provider: { name: 'sim-router' }, upstreamModel: 'v', prices, cost: null } as unknown as CatalogRoute;
const target: PricedTarget = {
  model: { id: 'sim/video-router', prices } as unknown as CatalogModel,
  route,
  byok: false,
  fields: {},
};
const explain = (usage: Parameters<typeof explainCharge>[1]) => explainCharge(target, usage, 5);

describe('a video charge is explained, its lines adding up to its amount (issue 41 item 15)', () => {
  it('given a clip priced at its seconds, when charged, then the lines are the seconds at the list price', () => {
    const charge = videoCharge({ seconds: 4, providerCostNano: null }, 1_200_000_000n, explain);
    expect(charge.usage).toEqual({ seconds: 4 });
    expect(charge.lines!.map((l) => [l.meter, l.quantity, l.amount_nano])).toEqual([['seconds', 4, '1200000000']]);
  });

  it("given a clip priced at the router's reported cost, when charged, then its meter and line are that cost", () => {
    const charge = videoCharge({ seconds: 4, providerCostNano: 200_000_000n }, 200_000_000n, explain);
    expect(charge.usage).toEqual({ provider_cost: 200_000_000 });
    expect(charge.lines!.map((l) => [l.meter, l.quantity, l.unit_price_usd, l.amount_nano])).toEqual([
      ['provider_cost', 200_000_000, '0.000000001', '200000000'],
    ]);
    expect(charge.providerCostNano).toBe(200_000_000n);
  });

  it('given a reported cost above the hold, when charged the hold, then a hold_cap line takes off the difference', () => {
    const charge = videoCharge({ seconds: 4, providerCostNano: 1_500_000_000n }, 1_200_000_000n, explain);
    expect(charge.lines!.map((l) => [l.meter, l.amount_nano])).toEqual([
      ['provider_cost', '1500000000'],
      ['hold_cap', '-300000000'],
    ]);
    expect(sumOfLines(charge.lines!)).toBe(1_200_000_000n);
  });

  it('given a completion recorded before the reported cost was kept, whose seconds do not make its amount, then it is explained as provider_cost of its amount', () => {
    const charge = videoCharge({ seconds: 4 }, 200_000_000n, explain);
    expect(charge.usage).toEqual({ provider_cost: 200_000_000 });
    expect(sumOfLines(charge.lines!)).toBe(200_000_000n);
  });
});
