import { ipAllowed, isDomainPattern, isIpOrCidr, referrerAllowed } from './restrictions';

describe('IP allowlist (spec 5.4)', () => {
  it.each([
    ['203.0.113.7', ['203.0.113.7'], true],
    ['203.0.113.8', ['203.0.113.7'], false],
    ['203.0.113.200', ['203.0.113.0/24'], true],
    ['203.0.114.1', ['203.0.113.0/24'], false],
    ['::ffff:203.0.113.9', ['203.0.113.0/24'], true],
    ['2001:db8::1', ['2001:db8::/32'], true],
    ['2001:db9::1', ['2001:db8::/32'], false],
    ['2001:db8::1', ['203.0.113.0/24'], false],
    ['203.0.113.9', ['::ffff:203.0.113.0/120'], true],
    ['::1', ['::1', '127.0.0.1'], true],
    ['not-an-ip', ['0.0.0.0/0'], false],
  ])('%s in %p -> %p', (ip, allowed, expected) => {
    expect(ipAllowed(ip, allowed)).toBe(expected);
  });

  it('validates entries', () => {
    expect(['10.0.0.1', '10.0.0.0/8', '2001:db8::/32', '::1'].every(isIpOrCidr)).toBe(true);
    expect(['10.0.0.0/33', 'example.com', '10.0.0', ''].some(isIpOrCidr)).toBe(false);
  });
});

describe('referrer allowlist (spec 5.4)', () => {
  it.each([
    ['https://app.example.com', undefined, ['app.example.com'], true],
    [undefined, 'https://app.example.com/page?x=1', ['app.example.com'], true],
    ['https://evil.com', 'https://app.example.com/', ['app.example.com'], false],
    ['https://a.example.com', undefined, ['*.example.com'], true],
    ['https://example.com', undefined, ['*.example.com'], false],
    ['https://notexample.com', undefined, ['*.example.com'], false],
    ['https://APP.Example.com', undefined, ['app.example.com'], true],
    ['null', undefined, ['app.example.com'], false],
    [undefined, undefined, ['app.example.com'], false],
  ])('origin %p referer %p in %p -> %p', (origin, referer, allowed, expected) => {
    expect(referrerAllowed(origin, referer, allowed)).toBe(expected);
  });

  it('validates entries', () => {
    expect(['example.com', '*.example.com', 'localhost', 'a-b.c.d'].every(isDomainPattern)).toBe(true);
    expect(['https://example.com', 'exa mple.com', '*example.com', ''].some(isDomainPattern)).toBe(false);
  });
});
