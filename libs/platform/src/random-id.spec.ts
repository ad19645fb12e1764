import { randomHex } from './random-id';

describe('randomHex', () => {
  it('gives ids of the length asked, each different, across refills of its pool', () => {
    const seen = new Set<string>();
    // 1,000 ids of 12 bytes span three refills of the 4 KiB pool.
    for (let i = 0; i < 1_000; i++) {
      const id = randomHex(12);
      expect(id).toMatch(/^[0-9a-f]{24}$/);
      seen.add(id);
    }
    expect(seen.size).toBe(1_000);
  });

  it('uses every bit: each hex digit position takes many values', () => {
    const digits = Array.from({ length: 24 }, () => new Set<string>());
    for (let i = 0; i < 500; i++) [...randomHex(12)].forEach((d, p) => digits[p].add(d));
    for (const values of digits) expect(values.size).toBeGreaterThan(12);
  });

  it('refuses more bytes than its pool holds', () => {
    expect(() => randomHex(4097)).toThrow(RangeError);
  });
});
