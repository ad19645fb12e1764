/**
 * The guard on every URL the service fetches on a caller's behalf. Webhook endpoints (spec
 * section 6.1) are the first such URLs; the same guard serves every other caller-supplied URL, so
 * that none can make the service reach its own network (loopback, private ranges, the cloud
 * metadata address 169.254.169.254) for the caller.
 *
 * Three layers, because each alone has a hole:
 * - checkOutboundUrl: the form of the URL, synchronously, where it is accepted (scheme, no
 *   credentials, IP literals);
 * - resolveOutboundTarget: where its host name resolves when it is saved, so a caller hears at
 *   once that the URL cannot be used;
 * - OutboundClient: the addresses a connection is about to use, checked again inside the
 *   connection's own DNS lookup, because a name may resolve elsewhere by the time it is fetched
 *   (DNS rebinding).
 */
import * as dns from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { Agent } from 'undici';

// Required by the first outbound client: a megabyte of code that a process making none (the CLI) never needs.
const undici = () => require('undici') as typeof import('undici');

/**
 * Resolves a host name to all its addresses, in the shape of `dns.lookup(hostname, {all: true},
 * callback)`; `dns.lookup` itself is one. The guard only ever calls it with `all: true`.
 */
export type OutboundLookup = (
  hostname: string,
  options: dns.LookupAllOptions,
  callback: (error: NodeJS.ErrnoException | null, addresses: dns.LookupAddress[]) => void,
) => void;

export interface OutboundPolicy {
  /**
   * Development only (SVC_WEBHOOK_ALLOW_PRIVATE): `http` URLs and loopback and private addresses
   * are let through.
   */
  allowPrivate: boolean;
  /** Stands in for DNS in tests; `dns.lookup` by default. */
  lookup?: OutboundLookup;
}

export type OutboundRefusal = 'invalid_url' | 'scheme' | 'credentials' | 'private_address' | 'unresolvable';

/**
 * A URL the guard will not fetch. Its message is meant for the caller who supplied the URL (a 400
 * message): it names the host and the address at fault, never the rest of the URL, which may
 * carry a token.
 */
export class OutboundRefused extends Error {
  override readonly name = 'OutboundRefused';
  constructor(
    readonly reason: OutboundRefusal,
    message: string,
  ) {
    super(message);
  }
}

/**
 * An accepted URL that could not be fetched. `timeout`: no complete answer (connect, headers and
 * body) within the client's timeout. `connection`: anything else on the way (refused or reset
 * connection, TLS failure, malformed answer). A body longer than the client's limit is not a
 * failure: it is truncated (see OutboundResponse.truncated).
 */
export class OutboundFailure extends Error {
  override readonly name = 'OutboundFailure';
  constructor(
    readonly kind: 'timeout' | 'connection',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The IANA global unicast block: no other IPv6 address is reachable on the internet. */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/**
 * Whether `ip` is an address on the public internet. Only ipaddr.js's `unicast` range counts,
 * after unwrapping IPv4-mapped IPv6 (::ffff:127.0.0.1 is 127.0.0.1): loopback, private,
 * link-local (with 169.254.169.254), carrier-grade NAT, unspecified, multicast, broadcast,
 * reserved, unique-local, 6to4, Teredo, NAT64 and the like are all refused. IPv6 must also lie in
 * 2000::/3, which refuses the deprecated IPv4-compatible form ::127.0.0.1 that ipaddr.js calls
 * unicast. Anything that is not an IP address in standard notation is not public.
 */
export function isPublicAddress(ip: string): boolean {
  if (isIP(ip) === 0) return false;
  const address = ipaddr.process(ip);
  if (address.range() !== 'unicast') return false;
  return address.kind() === 'ipv4' || address.match(GLOBAL_UNICAST_V6);
}

/** "a private address (loopback)", for a refusal's message. */
function describeAddress(ip: string): string {
  const range = isIP(ip) === 0 ? 'invalid' : ipaddr.process(ip).range();
  return range === 'private' || range === 'unicast' ? 'a private address' : `a private address (${range})`;
}

/** The address of an IP-literal host (brackets of IPv6 removed), or null for a name. */
function literalAddress(hostname: string): string | null {
  const bare = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  return isIP(bare) === 0 ? null : bare;
}

/**
 * Checks the form of a caller-supplied URL and returns it parsed: an absolute `https` URL (also
 * `http` when private targets are allowed), without a user name or password, whose host, when it
 * is an IP address, is public. WHATWG URL parsing has already turned 2130706433, 0x7f.1 and the
 * like into 127.0.0.1 by then. A host name is not resolved here: see resolveOutboundTarget.
 */
export function checkOutboundUrl(raw: unknown, policy: OutboundPolicy): URL {
  if (typeof raw !== 'string') throw new OutboundRefused('invalid_url', 'the URL must be a string');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new OutboundRefused('invalid_url', 'the URL is not a valid absolute URL');
  }
  const schemes = policy.allowPrivate ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(url.protocol)) {
    const expected = policy.allowPrivate ? 'https or http' : 'https';
    throw new OutboundRefused('scheme', `the URL must use ${expected}, not ${url.protocol.slice(0, -1)}`);
  }
  if (url.username !== '' || url.password !== '') {
    throw new OutboundRefused('credentials', 'the URL must not contain a user name or password');
  }
  if (url.hostname === '') throw new OutboundRefused('invalid_url', 'the URL has no host');
  const literal = literalAddress(url.hostname);
  if (literal !== null && !policy.allowPrivate && !isPublicAddress(literal)) {
    throw new OutboundRefused('private_address', `the URL's host ${literal} is ${describeAddress(literal)}`);
  }
  return url;
}

/** Every address of `hostname` by `lookup`, or OutboundRefused('unresolvable'). */
function resolveAll(lookup: OutboundLookup, hostname: string, options: dns.LookupOptions): Promise<dns.LookupAddress[]> {
  return new Promise((resolve, reject) => {
    lookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error || addresses.length === 0) {
        const detail = error?.code ? ` (${error.code})` : '';
        reject(new OutboundRefused('unresolvable', `the URL's host ${hostname} could not be resolved${detail}`));
      } else {
        resolve(addresses);
      }
    });
  });
}

/** OutboundRefused('private_address') for the first address of `hostname` that is not public. */
function refusePrivate(hostname: string, addresses: readonly dns.LookupAddress[]): void {
  const bad = addresses.find((a) => !isPublicAddress(a.address));
  if (bad) {
    throw new OutboundRefused('private_address', `the URL's host ${hostname} resolves to ${bad.address}, ${describeAddress(bad.address)}`);
  }
}

/**
 * The check to run when a URL is saved: the form check again, then every address its host name
 * resolves to now must be public (one private answer is enough to refuse, since a connection may
 * use any of them). Refusals: those of checkOutboundUrl, and 'unresolvable' when DNS gives no
 * answer, even with private targets allowed. An IP-literal host is judged without DNS. This does
 * not make a later fetch safe by itself: OutboundClient checks again at connect time.
 */
export async function resolveOutboundTarget(url: URL, policy: OutboundPolicy): Promise<void> {
  checkOutboundUrl(url.href, policy);
  if (literalAddress(url.hostname) !== null) return;
  const addresses = await resolveAll(policy.lookup ?? dns.lookup, url.hostname, {});
  if (!policy.allowPrivate) refusePrivate(url.hostname, addresses);
}

/**
 * The `lookup` of the client's sockets (net/tls `connect`): it resolves through the policy, refuses
 * the connection before it is opened when any address is not public, and answers in the shape
 * asked for: an array for `{all: true}` (what Node asks when it may try several addresses), else
 * one address and its family.
 */
function guardedLookup(policy: OutboundPolicy) {
  const lookup = policy.lookup ?? dns.lookup;
  return (
    hostname: string,
    options: dns.LookupOptions,
    callback: (error: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void,
  ): void => {
    void (async () => {
      let addresses: dns.LookupAddress[];
      try {
        addresses = await resolveAll(lookup, hostname, options);
        if (!policy.allowPrivate) refusePrivate(hostname, addresses);
      } catch (error) {
        callback(error as NodeJS.ErrnoException, '');
        return;
      }
      if (options.all) callback(null, addresses);
      else callback(null, addresses[0].address, addresses[0].family);
    })();
  };
}

export interface OutboundClientOptions {
  /** The whole exchange (connect, headers, body) must be over within this (ms); 10 s by default. */
  timeoutMs?: number;
  /** Bytes of response body kept; past them the body is truncated and the connection dropped. 64 KiB by default. */
  maxResponseBytes?: number;
}

export interface OutboundResponse {
  /** The receiver's status as it answered; a 3xx is returned, never followed. */
  status: number;
  /** At most maxResponseBytes of the body, decoded as UTF-8. */
  body: string;
  /** True when the body was longer than maxResponseBytes and the rest was not read. */
  truncated: boolean;
  /** From the call to the end of the (kept) body, in ms. */
  latencyMs: number;
}

/** Sent when the caller sets none: some receivers' firewalls refuse requests without one. */
const USER_AGENT = 'svc-gateway/0.1';

/**
 * POSTs to caller-supplied URLs. Every URL passes checkOutboundUrl first (undici does not call
 * `lookup` for IP literals), and every connection's addresses are checked by `guardedLookup` as it
 * opens, so a host name that resolves somewhere private by now is refused before a byte is sent.
 * Redirects are never followed: undici's request() does not, and a Location could point anywhere,
 * past the guard. Rejects with OutboundRefused or OutboundFailure.
 */
export class OutboundClient {
  private readonly agent: Agent;
  private readonly timeoutMs: number;
  private readonly maxResponseBytes: number;
  private closing: Promise<void> | null = null;

  constructor(
    private readonly policy: OutboundPolicy,
    options: OutboundClientOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.maxResponseBytes = options.maxResponseBytes ?? 64 * 1024;
    // undici's own timeouts as well as the deadline's signal: each phase stops at the deadline at the latest.
    this.agent = new (undici().Agent)({
      connect: { lookup: guardedLookup(policy), timeout: this.timeoutMs },
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
    });
  }

  async post(url: string, init: { headers: Record<string, string>; body: string }): Promise<OutboundResponse> {
    const target = checkOutboundUrl(url, this.policy);
    const started = performance.now();
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), this.timeoutMs);
    try {
      const hasAgent = Object.keys(init.headers).some((name) => name.toLowerCase() === 'user-agent');
      const answer = await undici().request(target, {
        method: 'POST',
        headers: hasAgent ? init.headers : { 'user-agent': USER_AGENT, ...init.headers },
        body: init.body,
        signal: deadline.signal,
        dispatcher: this.agent,
      });
      const kept: Buffer[] = [];
      let size = 0;
      let truncated = false;
      for await (const chunk of answer.body as AsyncIterable<Buffer>) {
        const room = this.maxResponseBytes - size;
        kept.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
        size += Math.min(chunk.length, room);
        if (chunk.length > room) {
          truncated = true;
          // Drops the connection: the rest of a huge or endless body is never read.
          answer.body.destroy();
          break;
        }
      }
      return { status: answer.statusCode, body: Buffer.concat(kept).toString('utf8'), truncated, latencyMs: performance.now() - started };
    } catch (error) {
      throw this.failure(error, deadline.signal.aborted);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Waits for requests under way, then closes every connection; closing twice is closing once. */
  close(): Promise<void> {
    this.closing ??= this.agent.close();
    return this.closing;
  }

  private failure(error: unknown, timedOut: boolean): Error {
    // A refusal by guardedLookup reaches here as the socket's error, unwrapped.
    if (error instanceof OutboundRefused) return error;
    const code = (error as { code?: unknown } | null)?.code;
    if (timedOut || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
      return new OutboundFailure('timeout', `no complete answer within ${this.timeoutMs} ms`, { cause: error });
    }
    const detail = error instanceof Error ? error.message : String(error);
    return new OutboundFailure('connection', `the request failed: ${detail}`, { cause: error });
  }
}
