import { nanoToUsd, nanoToUsd9, nanoToUsdString, usdToNano } from './money';

describe('money', () => {
  it.each([
    ['10', 10_000_000_000n],
    ['10.00', 10_000_000_000n],
    ['0.15', 150_000_000n],
    ['0.000000001', 1n],
    [0.1, 100_000_000n],
    [1e-7, 100n],
    [2.5e-9, null],
    ['1.0000000001', null],
    ['-1', null],
    ['abc', null],
    ['', null],
  ])('usdToNano(%p)', (input, expected) => {
    if (expected === null) expect(() => usdToNano(input)).toThrow(RangeError);
    else expect(usdToNano(input)).toBe(expected);
  });

  it('formats nano as exact decimal USD', () => {
    expect(nanoToUsdString(1_500_000_000n)).toBe('1.5');
    expect(nanoToUsdString(1n)).toBe('0.000000001');
    expect(nanoToUsdString(-25n)).toBe('-0.000000025');
    expect(nanoToUsd(9_999_999_999_999n)).toBe(9999.999999999);
  });

  it('writes documents in USD with exactly 9 decimals', () => {
    expect([0n, 1n, -1n, 1_500_000_000n, 123_456_789_012n].map(nanoToUsd9)).toEqual([
      '0.000000000',
      '0.000000001',
      '-0.000000001',
      '1.500000000',
      '123.456789012',
    ]);
  });

  it('round-trips every amount through the decimal string', () => {
    for (const n of [0n, 1n, 999n, 123_456_789_012n, 10_000_000_000n]) expect(usdToNano(nanoToUsdString(n))).toBe(n);
  });
});
