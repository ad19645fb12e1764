import { windowResetsAt, windowStart } from './utc-windows';

describe('UTC spend windows (spec 3.3)', () => {
  it.each([
    ['daily', '2026-11-22T23:59:59.999Z', '2026-11-22T00:00:00.000Z', '2026-11-23T00:00:00.000Z'],
    // 2026-11-22 is a Sunday: its week began Monday 16th and ends Monday 23rd.
    ['weekly', '2026-11-22T23:59:59.999Z', '2026-11-16T00:00:00.000Z', '2026-11-23T00:00:00.000Z'],
    ['weekly', '2026-11-23T00:00:00.000Z', '2026-11-23T00:00:00.000Z', '2026-11-30T00:00:00.000Z'],
    ['weekly', '2026-12-31T12:00:00.000Z', '2026-12-28T00:00:00.000Z', '2027-01-04T00:00:00.000Z'],
    ['monthly', '2026-12-31T23:00:00.000Z', '2026-12-01T00:00:00.000Z', '2027-01-01T00:00:00.000Z'],
    ['monthly', '2028-02-29T10:00:00.000Z', '2028-02-01T00:00:00.000Z', '2028-03-01T00:00:00.000Z'],
  ] as const)('%s window of %s is [%s, %s)', (reset, at, start, end) => {
    expect(windowStart(reset, new Date(at))?.toISOString()).toBe(start);
    expect(windowResetsAt(reset, new Date(at))?.toISOString()).toBe(end);
  });

  it('has no boundaries for never', () => {
    expect(windowStart('never', new Date())).toBeNull();
    expect(windowResetsAt('never', new Date())).toBeNull();
  });
});
