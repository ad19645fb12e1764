import { methodLabel, modelLabel } from './request-metrics';

describe('request metric labels', () => {
  const catalog = { get: (id: string) => (id === 'sim/echo' ? ({ id } as never) : undefined) };
  it('model: a catalog id, else empty', () => {
    expect(modelLabel({ body: { model: 'sim/echo' } }, catalog)).toBe('sim/echo');
    expect(modelLabel({ body: { model: 'user supplied junk' } }, catalog)).toBe('');
    expect(modelLabel({ body: { model: 42 } }, catalog)).toBe('');
    expect(modelLabel({ body: undefined }, catalog)).toBe('');
    expect(modelLabel({ body: null }, catalog)).toBe('');
  });
  it('method: the usual ones, else OTHER', () => {
    expect(methodLabel('POST')).toBe('POST');
    expect(methodLabel('BREW')).toBe('OTHER');
  });
});
