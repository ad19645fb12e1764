import { lastDays } from '../format';
import type { KeyRecord } from '../records';
import { activityRow, keyRecord } from '../testing/records';
import { contrastOnWhite, dailySpendSeries, keyLimits, MODEL_COLOURS, modelColours, percent, spendLines, spendTotals, sumUsd } from './overview-data';

const row = (date: string, model: string, usage: number, endpoint = '/v1/chat/completions') => activityRow({ date, model, usage, endpoint });

const key = (over: Partial<KeyRecord>) => keyRecord({ name: 'one', hint: 'svc_live_…abcd', limit_reset: 'never', ...over });

const NOW = new Date('2026-03-15T10:00:00Z');
const DAYS = lastDays(NOW, 30);

describe('sumUsd', () => {
  it('adds in nano-dollars, so decimal amounts add up exactly', () => {
    expect(sumUsd([0.1, 0.2])).toBe(0.3);
    expect(sumUsd([0.000000001, 0.000000002, 0.000012345])).toBe(0.000012348);
    expect(sumUsd([])).toBe(0);
  });
});

describe('spendTotals', () => {
  it("adds today's UTC date and this UTC month, not the previous month", () => {
    const rows = [row('2026-03-15', 'a/x', 0.25), row('2026-03-15', 'b/y', 0.5, '/v1/embeddings'), row('2026-03-01', 'a/x', 1), row('2026-02-28', 'a/x', 7)];
    expect(spendTotals(rows, NOW, DAYS)).toEqual({ today: 0.75, month: 1.75, monthFrom: null });
  });

  it('uses the UTC date, not the local one, near midnight', () => {
    const lateUtc = new Date('2026-03-15T23:59:59Z');
    expect(spendTotals([row('2026-03-15', 'a/x', 1), row('2026-03-16', 'a/x', 2)], lateUtc, lastDays(lateUtc, 30)).today).toBe(1);
  });

  it('says from which day the month is counted when the 30 days no longer reach the 1st', () => {
    const the31st = new Date('2026-03-31T08:00:00Z');
    expect(spendTotals([], the31st, lastDays(the31st, 30)).monthFrom).toBe('2026-03-02');
  });
});

describe('dailySpendSeries', () => {
  it('gives every one of the 30 days a bar, 0 for models without spend that day', () => {
    const series = dailySpendSeries([row('2026-03-15', 'a/x', 0.5), row('2026-03-10', 'b/y', 0.25)], DAYS);
    expect(series.bars).toHaveLength(30);
    expect(series.bars[0].day).toBe('2026-02-14');
    expect(series.bars[29]).toEqual({ day: '2026-03-15', spend: { 'a/x': 0.5, 'b/y': 0 } });
  });

  it("adds a model's endpoints of one day into one stack segment", () => {
    const series = dailySpendSeries([row('2026-03-15', 'a/x', 0.1, '/v1/chat/completions'), row('2026-03-15', 'a/x', 0.2, '/v1/responses')], DAYS);
    expect(series.bars[29].spend['a/x']).toBe(0.3);
  });

  it('orders models by total spend, largest first, and leaves out models that cost nothing', () => {
    const rows = [row('2026-03-14', 'small/m', 0.01), row('2026-03-14', 'big/m', 2), row('2026-03-13', 'free/m', 0), row('2026-03-13', 'small/m', 0.02)];
    expect(dailySpendSeries(rows, DAYS).models).toEqual(['big/m', 'small/m']);
  });

  it('ignores days outside the period', () => {
    expect(dailySpendSeries([row('2026-01-01', 'a/x', 3)], DAYS).models).toEqual([]);
  });
});

describe('spendLines', () => {
  it('lists the days with spend, newest first, one line per model', () => {
    const series = dailySpendSeries([row('2026-03-10', 'a/x', 0.5), row('2026-03-15', 'a/x', 0.25), row('2026-03-15', 'b/y', 1)], DAYS);
    expect(spendLines(series)).toEqual([
      { day: '2026-03-15', model: 'b/y', cost: 1 },
      { day: '2026-03-15', model: 'a/x', cost: 0.25 },
      { day: '2026-03-10', model: 'a/x', cost: 0.5 },
    ]);
  });
});

describe('keyLimits', () => {
  it("reads the used amount of the limit's own window and its share", () => {
    const [limit] = keyLimits([
      key({
        limit: 10,
        limit_reset: 'weekly',
        limit_remaining: 7.5,
        usage_weekly: 2.5,
        usage_daily: 1,
        usage: 40,
        limit_resets_at: '2026-03-16T00:00:00.000Z',
      }),
    ]);
    expect(limit).toMatchObject({ used: 2.5, lifetime: 40, remaining: 7.5, share: 0.25, level: 'ok', period: 'weekly', resetsAt: '2026-03-16T00:00:00.000Z' });
  });

  it('warns from 80% and is bad when the limit is reached (or is 0)', () => {
    const levels = keyLimits([
      key({ id: 'a', name: 'a', limit: 10, limit_remaining: 2.01 }),
      key({ id: 'b', name: 'b', limit: 10, limit_remaining: 2 }),
      key({ id: 'c', name: 'c', limit: 10, limit_remaining: 0 }),
      key({ id: 'd', name: 'd', limit: 0, limit_remaining: 0 }),
    ]).map((k) => [k.id, k.level]);
    expect(Object.fromEntries(levels)).toEqual({ a: 'ok', b: 'warn', c: 'bad', d: 'bad' });
  });

  it('puts the fullest limits first, keys without a limit last, and leaves revoked keys out', () => {
    const order = keyLimits([
      key({ id: 'free', name: 'free' }),
      key({ id: 'half', name: 'half', limit: 2, limit_remaining: 1 }),
      key({ id: 'gone', name: 'gone', revoked: true, limit: 2, limit_remaining: 0 }),
      key({ id: 'full', name: 'full', limit: 2, limit_remaining: 0 }),
      key({ id: 'unused', name: 'unused', limit: 2, limit_remaining: 2 }),
    ]).map((k) => k.id);
    expect(order).toEqual(['full', 'half', 'unused', 'free']);
  });

  it('names an unnamed key by its id', () => {
    expect(keyLimits([key({ id: 'key_9', name: null })])[0].name).toBe('key_9');
  });
});

describe('percent', () => {
  it('says <1% for a little spent and 99% until the limit is really reached', () => {
    expect([0, 0.002, 0.37, 0.996, 1].map(percent)).toEqual(['0%', '<1%', '37%', '99%', '100%']);
  });
});

describe('model colours', () => {
  const models = Array.from({ length: 40 }, (_, i) => `sim/model-${i}`);

  it('gives each model of the chart its own colour, past the ten of the palette too', () => {
    const colours = modelColours(models);
    expect(colours).toHaveLength(40);
    expect(new Set(colours).size).toBe(40);
    expect(colours.slice(0, 10)).toEqual(MODEL_COLOURS);
  });

  it('keeps every colour at 3:1 or more against white', () => {
    for (const colour of modelColours(models)) {
      expect(colour).toMatch(/^#[0-9a-f]{6}$/);
      expect(contrastOnWhite(colour)).toBeGreaterThanOrEqual(3);
    }
    // The measure itself: black is 21:1, white 1:1, the palette's blue about 6.7:1.
    expect(contrastOnWhite('#000000')).toBeCloseTo(21, 5);
    expect(contrastOnWhite('#ffffff')).toBeCloseTo(1, 5);
    expect(contrastOnWhite('#1d4ed8')).toBeCloseTo(6.7, 1);
  });

  it('colours the same models the same way on every render', () => {
    expect(modelColours(models.slice(0, 12))).toEqual(modelColours(models).slice(0, 12));
  });
});
