import { projectionLag } from './lag';

describe('projectionLag', () => {
  const now = new Date('2026-11-02T10:00:00.000Z');
  const before = (ms: number) => ({ at: new Date(now.getTime() - ms).toISOString() });

  it('is 0 and ready when no event is pending', () => {
    expect(projectionLag(null, now, 30)).toEqual({ ok: true, lagSeconds: 0 });
  });

  it('is the age of the oldest pending event, ready up to the bound and not past it', () => {
    expect(projectionLag(before(1_250), now, 30)).toEqual({ ok: true, lagSeconds: 1.3 });
    expect(projectionLag(before(30_000), now, 30)).toEqual({ ok: true, lagSeconds: 30 });
    expect(projectionLag(before(30_001), now, 30)).toEqual({ ok: false, lagSeconds: 30 });
    expect(projectionLag(before(31_000), now, 30)).toEqual({ ok: false, lagSeconds: 31 });
    expect(projectionLag(before(31_000), now, 60)).toEqual({ ok: true, lagSeconds: 31 });
  });

  it('counts an event decided by a clock ahead of this one as no lag rather than negative', () => {
    expect(projectionLag(before(-5_000), now, 30)).toEqual({ ok: true, lagSeconds: 0 });
  });

  it('does not fail readiness over a pending event without a decision time', () => {
    expect(projectionLag({}, now, 30)).toEqual({ ok: true, lagSeconds: null });
    expect(projectionLag({ at: 'yesterday' }, now, 30)).toEqual({ ok: true, lagSeconds: null });
  });
});
