import type { CatalogModel, CatalogRoute, ModelPrices } from '@svc/catalog';
import { decimalOf, explainCharge, meterLines, providerCostOf, sumOfLines, type CostLine } from './cost-lines';
import { costOfMeters, METERS, type MeterUsage } from './meters';
import { costOf, type Target } from './targets';

const none = {
  perQuery: null,
  perSecond: null,
  perImage: null,
  perMillionCharacters: null,
  perSearchUnit: null,
  audioInputPerM: null,
  cachedAudioInputPerM: null,
  audioOutputPerM: null,
};
// sim/echo's: $2 / M input, $8 / M output, $0.50 / M cached input.
const echo: ModelPrices = { inputPerM: 2_000_000_000n, outputPerM: 8_000_000_000n, cachedInputPerM: 500_000_000n, ...none };
// 70% of them: what the provider charges the operator.
const echoCost: ModelPrices = { inputPerM: 1_400_000_000n, outputPerM: 5_600_000_000n, cachedInputPerM: 350_000_000n, ...none };

const target = (prices: ModelPrices, over: Partial<Target> & { cost?: ModelPrices | null } = {}): Target => {
  const { cost = null, ...rest } = over;
  const route = { provider: { name: 'p' }, upstreamModel: 'm', prices, cost } as unknown as CatalogRoute;
  return { model: { id: 'm', prices } as unknown as CatalogModel, route, provider: {} as Target['provider'], byok: false, fields: {}, ...rest };
};
const brief = (lines: CostLine[]) => lines.map((l) => [l.meter, l.quantity, l.unit_price_usd, l.amount_nano]);

/** quantity x unit price exactly, in nano-USD, as [numerator, denominator]. */
function exactNano(l: CostLine): [bigint, bigint] {
  const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(l.unit_price_usd)!;
  const fraction = m[3] ?? '';
  const units = BigInt(`${m[1]}${m[2]}${fraction}`);
  return [BigInt(l.quantity) * units * 1_000_000_000n, 10n ** BigInt(fraction.length)];
}

describe('the lines of a charge (issue 23)', () => {
  it('writes prices as exact decimals, however fine', () => {
    expect(decimalOf(2_000n, 9)).toBe('0.000002');
    expect(decimalOf(2_000_000_000n, 15)).toBe('0.000002');
    expect(decimalOf(625_000_000n, 15)).toBe('0.000000625');
    expect(decimalOf(1n, 15)).toBe('0.000000000000001');
    expect(decimalOf(-123_456_789_012n, 11)).toBe('-1.23456789012');
    expect(decimalOf(0n, 11)).toBe('0');
    expect(decimalOf(5_000_000_000n, 9)).toBe('5');
  });

  it('a chat: input and output at their unit prices, adding up to the charge with nothing to round', () => {
    const e = explainCharge(target(echo, { cost: echoCost }), { input: 1000, output: 100 }, 5);
    expect(brief(e.lines)).toEqual([
      ['input', 1000, '0.000002', '2000000'],
      ['output', 100, '0.000008', '800000'],
    ]);
    expect(e.amountNano).toBe(2_800_000n);
    // 1000 x $1.40 / M + 100 x $5.60 / M.
    expect(e.providerCostNano).toBe(1_960_000n);
  });

  it('cached input: billed apart from the rest of the input, at its own price', () => {
    const e = explainCharge(target(echo), { input: 1000, cached_input: 400, output: 100 }, 5);
    expect(brief(e.lines)).toEqual([
      ['input', 600, '0.000002', '1200000'],
      ['cached_input', 400, '0.0000005', '200000'],
      ['output', 100, '0.000008', '800000'],
    ]);
    expect(sumOfLines(e.lines)).toBe(costOf(target(echo), { input: 1000, cached_input: 400, output: 100 }, 5));
  });

  it('fractions of a nano: each line truncated, the round-up of the whole in one rounding line, so the charge is unchanged', () => {
    // Prices below $0.001 / M make fractions of a nano: 7 input at 2.5 nano are 17.5; 3 cached at 0.625 nano 1.875; 1 output 10.
    const fine: ModelPrices = { ...echo, inputPerM: 2_500_000n, outputPerM: 10_000_000n, cachedInputPerM: 625_000n };
    const usage = { input: 10, cached_input: 3, output: 1 };
    const e = explainCharge(target(fine), usage, 5);
    expect(brief(e.lines)).toEqual([
      ['input', 7, '0.0000000025', '17'],
      ['cached_input', 3, '0.000000000625', '1'],
      ['output', 1, '0.00000001', '10'],
      // ceil(17.5 + 1.875 + 10) = 30, the lines truncated make 28.
      ['rounding', 2, '0.000000001', '2'],
    ]);
    expect(e.amountNano).toBe(30n);
    expect(costOf(target(fine), usage, 5)).toBe(30n);
  });

  it('a batch line: the list price, then the discount (truncated: the charge rounds up)', () => {
    const usage = { input: 1001, output: 3 };
    const t = target(echo, { discountPercent: 50 });
    const e = explainCharge(t, usage, 5);
    // 1001 x 2000 + 3 x 8000 = 2,026,000; half of it off.
    expect(brief(e.lines)).toEqual([
      ['input', 1001, '0.000002', '2002000'],
      ['output', 3, '0.000008', '24000'],
      ['batch_discount', 50, '-0.00002026', '-1013000'],
    ]);
    expect(e.amountNano).toBe(1_013_000n);
    // An odd amount: 7 nano at 50% off is charged 4 (3.5 rounded up), the discount 3.
    const odd = explainCharge(target({ ...echo, inputPerM: 7_000n }, { discountPercent: 50 }), { input: 1_000 }, 5);
    expect(odd.lines.at(-1)).toEqual({ meter: 'batch_discount', quantity: 50, unit_price_usd: '-0.00000000007', amount_nano: '-3' });
    expect(odd.amountNano).toBe(4n);
  });

  it('BYOK: the list price, credited back whole, then the fee on it with its round-up; the operator paid the provider nothing', () => {
    const usage = { input: 1000, output: 101 };
    const t = target(echo, { byok: true, cost: echoCost });
    const e = explainCharge(t, usage, 5);
    // 2,000,000 + 808,000 = 2,808,000; 5% of it is 140,400.
    expect(brief(e.lines)).toEqual([
      ['input', 1000, '0.000002', '2000000'],
      ['output', 101, '0.000008', '808000'],
      ['byok_credit', 1, '-0.002808', '-2808000'],
      ['byok_fee', 5, '0.00002808', '140400'],
    ]);
    expect(e.amountNano).toBe(140_400n);
    expect(e.providerCostNano).toBe(0n);
    // 5% of 7 nano is 0.35: charged 1.
    const tiny = explainCharge(target({ ...echo, inputPerM: 7_000n }, { byok: true }), { input: 1_000 }, 5);
    expect(brief(tiny.lines).slice(-3)).toEqual([
      ['byok_credit', 1, '-0.000000007', '-7'],
      ['byok_fee', 5, '0.00000000007', '0'],
      ['rounding', 1, '0.000000001', '1'],
    ]);
    expect(tiny.amountNano).toBe(1n);
  });

  it('a web search: the queries at the engine price after the model, never discounted or credited; their cost counts in the provider cost', () => {
    const usage = { input: 1000, output: 100, queries: 1 };
    const tools = { perQuery: 2_000_000n, costPerQuery: 1_400_000n };
    const plain = explainCharge(target(echo, { toolPrices: tools, cost: echoCost }), usage, 5);
    expect(brief(plain.lines)).toEqual([
      ['input', 1000, '0.000002', '2000000'],
      ['output', 100, '0.000008', '800000'],
      ['queries', 1, '0.002', '2000000'],
    ]);
    expect(plain.providerCostNano).toBe(1_960_000n + 1_400_000n);
    const byok = explainCharge(target(echo, { toolPrices: tools, byok: true }), usage, 5);
    expect(brief(byok.lines).slice(-3)).toEqual([
      ['byok_credit', 1, '-0.0028', '-2800000'],
      ['byok_fee', 5, '0.000028', '140000'],
      ['queries', 1, '0.002', '2000000'],
    ]);
    expect(byok.amountNano).toBe(140_000n + 2_000_000n);
    // The operator's engine ran the search, on a BYOK call too.
    expect(byok.providerCostNano).toBe(1_400_000n);
    // The engine's cost unknown: the whole is unknown, never the model's part passed off as it.
    expect(explainCharge(target(echo, { toolPrices: { perQuery: 2_000_000n }, cost: echoCost }), usage, 5).providerCostNano).toBeNull();
    // No query ran: the engine's cost does not matter.
    expect(explainCharge(target(echo, { toolPrices: { perQuery: 2_000_000n }, cost: echoCost }), { input: 1000 }, 5).providerCostNano).toBe(1_400_000n);
  });

  it('per-unit and per-character meters; the provider-reported cost as nanos at a nano each, which is then the provider cost', () => {
    const units: ModelPrices = { ...echo, perImage: 40_000_000n, perMillionCharacters: 15_000_000_000n, perQuery: 5_000_000n };
    expect(brief(explainCharge(target(units), { images: 2 }, 5).lines)).toEqual([['images', 2, '0.04', '80000000']]);
    expect(brief(explainCharge(target(units), { characters: 1001 }, 5).lines)).toEqual([['characters', 1001, '0.000015', '15015000']]);
    // 1 character at $0.000001 / M is a thousandth of a nano, rounded up.
    expect(brief(explainCharge(target({ ...units, perMillionCharacters: 1_000n }), { characters: 1 }, 5).lines)).toEqual([
      ['characters', 1, '0.000000000001', '0'],
      ['rounding', 1, '0.000000001', '1'],
    ]);
    const reported = explainCharge(target(units), { provider_cost: 123_456_789 }, 5);
    expect(brief(reported.lines)).toEqual([['provider_cost', 123456789, '0.000000001', '123456789']]);
    expect(reported.providerCostNano).toBe(123_456_789n);
  });

  it('a meter the catalog does not price shows at 0; meters not used do not show', () => {
    expect(brief(explainCharge(target(echo), { input: 10, images: 2, output: 0 }, 5).lines)).toEqual([
      ['input', 10, '0.000002', '20000'],
      ['images', 2, '0', '0'],
    ]);
  });

  it('provider cost: the route catalog cost applied to the billed usage (rounded up as prices are), else unknown', () => {
    expect(providerCostOf(target(echo, { cost: echoCost }), { input: 1, output: 1 })).toBe(7_000n);
    expect(providerCostOf(target(echo, { cost: { ...echoCost, inputPerM: 1n } }), { input: 3 })).toBe(1n);
    expect(providerCostOf(target(echo), { input: 1000 })).toBeNull();
    // A batch line costs the operator the regular price: the discount is ours.
    expect(providerCostOf(target(echo, { cost: echoCost, discountPercent: 50 }), { input: 1000 })).toBe(1_400_000n);
    // Reported by the provider along with other meters it has no catalog cost for: not the whole.
    expect(providerCostOf(target(echo), { provider_cost: 5, images: 1 })).toBeNull();
  });
});

/** A small deterministic generator: the same cases on every run, so a failure can be replayed. */
function random(seed: number) {
  let s = seed >>> 0;
  const next = () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
  const int = (max: number) => Math.floor(next() * (max + 1));
  return { next, int, maybe: <T>(value: () => T): T | null => (next() < 0.5 ? value() : null) };
}

describe('the lines always add up to the charge, exactly (property)', () => {
  const r = random(23);
  /** Prices from sub-nano-per-token to dollars per unit, with their fractions. */
  const price = () => BigInt(r.int(3) === 0 ? r.int(10) : r.int(20_000_000_000));
  const prices = (): ModelPrices => {
    const inputPerM = price();
    const audioInputPerM = r.maybe(price);
    return {
      inputPerM,
      outputPerM: price(),
      cachedInputPerM: inputPerM / BigInt(1 + r.int(10)),
      perQuery: r.maybe(price),
      perSecond: r.maybe(price),
      perImage: r.maybe(price),
      perMillionCharacters: r.maybe(price),
      perSearchUnit: r.maybe(price),
      audioInputPerM,
      cachedAudioInputPerM: audioInputPerM === null ? null : audioInputPerM / BigInt(1 + r.int(4)),
      audioOutputPerM: r.maybe(price),
    };
  };
  const usage = (): MeterUsage => {
    const u: MeterUsage = {};
    for (const meter of METERS) if (r.next() < 0.5) u[meter] = r.int([10, 1_000, 2_000_000][r.int(2)]);
    return u;
  };

  // Its timeout is for a hung run, not a speed goal: 18 s on a slow host beside another suite.
  it('for 5,000 random usages, prices, batch discounts, BYOK fees and web searches', () => {
    for (let i = 0; i < 5_000; i++) {
      const p = prices();
      const t = target(p, {
        byok: r.next() < 0.3,
        ...(r.next() < 0.3 ? { discountPercent: r.int(100) } : {}),
        ...(r.next() < 0.3 ? { toolPrices: { perQuery: price() } } : {}),
      });
      const u = usage();
      const fee = r.int(100);
      const e = explainCharge(t, u, fee);
      const charged = costOf(t, u, fee);
      const context = JSON.stringify({ i, u, fee, byok: t.byok, discount: t.discountPercent }, (_, v) => (typeof v === 'bigint' ? v.toString() : v));
      expect([context, sumOfLines(e.lines)]).toEqual([context, charged]);
      expect(e.amountNano).toBe(charged);
      for (const l of e.lines) {
        // Each line is its quantity at its unit price, truncated toward zero to the nano; rounding only adds.
        const [n, d] = exactNano(l);
        expect([context, l.meter, BigInt(l.amount_nano)]).toEqual([context, l.meter, n / d]);
        if (l.meter === 'rounding') expect(BigInt(l.amount_nano)).toBeGreaterThan(0n);
        expect(Number.isSafeInteger(l.quantity)).toBe(true);
      }
    }
  }, 90_000);

  it('the meter lines alone are costOfMeters, their rounding under a nano per rounded group', () => {
    for (let i = 0; i < 2_000; i++) {
      const p = prices();
      const u = usage();
      const { lines, total } = meterLines(u, p);
      expect(total).toBe(costOfMeters(u, p));
      expect(sumOfLines(lines)).toBe(total);
      const up = lines.filter((l) => l.meter === 'rounding').map((l) => BigInt(l.amount_nano));
      expect(up.length).toBeLessThanOrEqual(1);
      // Tokens, characters and audio each round up once, by less than a nano per line in the group.
      expect(up[0] ?? 0n).toBeLessThanOrEqual(3n + 1n + 3n);
    }
  });
});
