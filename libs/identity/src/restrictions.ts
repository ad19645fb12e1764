import ipaddr from 'ipaddr.js';

/**
 * Spec 5.4: a key may be limited to IPs or CIDR ranges (IPv4 and IPv6). An IPv4 client seen
 * through an IPv6 socket (::ffff:a.b.c.d) matches IPv4 entries.
 */
export function ipAllowed(clientIp: string, allowed: readonly string[]): boolean {
  let address: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    address = normalise(ipaddr.parse(clientIp));
  } catch {
    return false;
  }
  return allowed.some((entry) => {
    const [range, bits] = parseEntry(entry);
    return range.kind() === address.kind() && address.match(range, bits);
  });
}

/** Validates an allowlist entry (for key creation): an address or a CIDR range. */
export function isIpOrCidr(entry: string): boolean {
  try {
    parseEntry(entry);
    return true;
  } catch {
    return false;
  }
}

function parseEntry(entry: string): [ipaddr.IPv4 | ipaddr.IPv6, number] {
  const [text, bitsText] = entry.split('/');
  // ipaddr.parse also takes legacy forms ("10.0.0" = 10.0.0.0): an allowlist wants exactly what was meant.
  if (!ipaddr.IPv4.isValidFourPartDecimal(text) && !ipaddr.IPv6.isValid(text)) throw new Error(`not an IP address: ${entry}`);
  if (bitsText !== undefined) {
    const [range, bits] = ipaddr.parseCIDR(entry);
    return [normalise(range), range.kind() === 'ipv6' && (range as ipaddr.IPv6).isIPv4MappedAddress() ? bits - 96 : bits];
  }
  const address = normalise(ipaddr.parse(text));
  return [address, address.kind() === 'ipv4' ? 32 : 128];
}

function normalise(address: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  return address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress() ? (address as ipaddr.IPv6).toIPv4Address() : address;
}

/**
 * Spec 5.4: allowed domains are checked against Origin, else Referer. An entry `example.com`
 * allows that host only; `*.example.com` allows its subdomains (not the apex). A request
 * with neither header is refused: a browser always sends one, and a key stolen for server
 * use must not slip through.
 */
export function referrerAllowed(origin: string | undefined, referer: string | undefined, allowed: readonly string[]): boolean {
  const host = hostOf(origin) ?? hostOf(referer);
  if (host === null) return false;
  return allowed.some((entry) => {
    const domain = entry.toLowerCase().replace(/\.$/, '');
    return domain.startsWith('*.') ? host.endsWith(domain.slice(1)) : host === domain;
  });
}

/** A domain entry: a host name, optionally prefixed by `*.`. */
export function isDomainPattern(entry: string): boolean {
  return /^(\*\.)?([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i.test(entry);
}

function hostOf(value: string | undefined): string | null {
  if (!value || value === 'null') return null;
  try {
    return new URL(value).hostname.toLowerCase().replace(/\.$/, '');
  } catch {
    return null;
  }
}
