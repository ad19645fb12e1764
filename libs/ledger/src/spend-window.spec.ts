import { addToWindow, chargedInWindow, windowResetsAt, windowStart, type LimitReset } from './spend-window';

const at = (iso: string) => new Date(iso);
const window = (reset: LimitReset, instant: string) => [
  windowStart(reset, at(instant))?.toISOString() ?? null,
  windowResetsAt(reset, at(instant))?.toISOString() ?? null,
];

describe('spend windows (spec 3.3, 8: UTC; weekly resets Monday)', () => {
  it('daily: 00:00 UTC to the next 00:00 UTC', () => {
    expect(window('daily', '2026-11-02T10:00:00Z')).toEqual(['2026-11-02T00:00:00.000Z', '2026-11-03T00:00:00.000Z']);
    expect(window('daily', '2026-11-02T23:59:59.999Z')).toEqual(['2026-11-02T00:00:00.000Z', '2026-11-03T00:00:00.000Z']);
    expect(window('daily', '2026-11-03T00:00:00.000Z')).toEqual(['2026-11-03T00:00:00.000Z', '2026-11-04T00:00:00.000Z']);
  });

  it('weekly: Sunday 23:59:59.999 is still the week that began on Monday; Monday 00:00 starts the next', () => {
    expect(window('weekly', '2026-11-08T23:59:59.999Z')).toEqual(['2026-11-02T00:00:00.000Z', '2026-11-09T00:00:00.000Z']);
    expect(window('weekly', '2026-11-09T00:00:00.000Z')).toEqual(['2026-11-09T00:00:00.000Z', '2026-11-16T00:00:00.000Z']);
    expect(window('weekly', '2026-11-04T12:00:00.000Z')).toEqual(['2026-11-02T00:00:00.000Z', '2026-11-09T00:00:00.000Z']);
  });

  it('weekly: a week that spans a month and a year', () => {
    expect(window('weekly', '2027-01-01T08:00:00Z')).toEqual(['2026-12-28T00:00:00.000Z', '2027-01-04T00:00:00.000Z']);
  });

  it('monthly: the 1st 00:00 UTC, across month lengths, leap years and the year end', () => {
    expect(window('monthly', '2026-11-30T23:59:59.999Z')).toEqual(['2026-11-01T00:00:00.000Z', '2026-12-01T00:00:00.000Z']);
    expect(window('monthly', '2026-12-31T12:00:00Z')).toEqual(['2026-12-01T00:00:00.000Z', '2027-01-01T00:00:00.000Z']);
    expect(window('monthly', '2028-02-29T12:00:00Z')).toEqual(['2028-02-01T00:00:00.000Z', '2028-03-01T00:00:00.000Z']);
  });

  it('never: a lifetime budget has no window and no reset', () => {
    expect(window('never', '2026-11-02T10:00:00Z')).toEqual([null, null]);
  });

  it('keeps the current window: a later one replaces it, an earlier (closed) one leaves it as it is', () => {
    const current = { startMs: 1000, chargedNano: 5n };
    expect(addToWindow(current, 1000, 2n)).toEqual({ startMs: 1000, chargedNano: 7n });
    expect(addToWindow(current, 2000, 2n)).toEqual({ startMs: 2000, chargedNano: 2n });
    expect(addToWindow(current, 500, 2n)).toBe(current);
    expect(chargedInWindow(current, 1000)).toBe(5n);
    expect(chargedInWindow(current, 2000)).toBe(0n);
  });
});
