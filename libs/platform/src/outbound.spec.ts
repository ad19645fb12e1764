import type { LookupAddress } from 'node:dns';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as net from 'node:net';
import {
  checkOutboundUrl,
  isPublicAddress,
  OutboundClient,
  OutboundFailure,
  type OutboundLookup,
  type OutboundPolicy,
  OutboundRefused,
  resolveOutboundTarget,
} from './outbound';

/** A DNS stand-in answering `addresses` for every name, recording the names asked. */
function stubLookup(addresses: string[], asked: string[] = []): OutboundLookup {
  return (hostname, _options, callback) => {
    asked.push(hostname);
    const answer: LookupAddress[] = addresses.map((address) => ({ address, family: net.isIP(address) }));
    setImmediate(() => callback(null, answer));
  };
}

const strict: OutboundPolicy = { allowPrivate: false };
const lenient: OutboundPolicy = { allowPrivate: true };

function refusal(fn: () => unknown): OutboundRefused {
  try {
    fn();
  } catch (error) {
    if (error instanceof OutboundRefused) return error;
    throw error;
  }
  throw new Error('expected an OutboundRefused');
}

describe('isPublicAddress', () => {
  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '255.255.255.255',
    '224.0.0.1',
    '240.0.0.1',
    '192.0.2.1',
    '::1',
    '::',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    '::127.0.0.1',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    'ff02::1',
    '2002:7f00:1::1',
    '2001::1',
    '64:ff9b::7f00:1',
    '2001:db8::1',
  ])('refuses %s', (ip) => {
    expect(isPublicAddress(ip)).toBe(false);
  });

  it.each(['93.184.216.34', '8.8.8.8', '2606:4700::1111', '::ffff:93.184.216.34'])('accepts %s', (ip) => {
    expect(isPublicAddress(ip)).toBe(true);
  });

  it('refuses what is not an address in standard notation', () => {
    for (const text of ['', 'localhost', '2130706433', '0x7f.1', '1.2.3', 'example.com']) expect(isPublicAddress(text)).toBe(false);
  });
});

describe('checkOutboundUrl', () => {
  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '[::1]',
    '[::ffff:127.0.0.1]',
    '[fc00::1]',
    '[fe80::1]',
    '[::127.0.0.1]',
    '2130706433',
    '0x7f.1',
    '0177.0.0.1',
  ])('refuses the IP-literal host %s', (host) => {
    const error = refusal(() => checkOutboundUrl(`https://${host}/hook`, strict));
    expect(error.reason).toBe('private_address');
    expect(error.message).toMatch(/^the URL's host \S+ is a private address/);
  });

  it('names the address and never the rest of the URL', () => {
    const error = refusal(() => checkOutboundUrl('https://10.0.0.5/hook?token=s3cret', strict));
    expect(error.message).toBe("the URL's host 10.0.0.5 is a private address");
    expect(refusal(() => checkOutboundUrl('https://127.0.0.1/', strict)).message).toBe("the URL's host 127.0.0.1 is a private address (loopback)");
  });

  it('accepts public IP literals and host names, and returns the parsed URL', () => {
    expect(checkOutboundUrl('https://93.184.216.34/hook', strict).hostname).toBe('93.184.216.34');
    expect(checkOutboundUrl('https://[2606:4700::1111]:8443/hook', strict).port).toBe('8443');
    expect(checkOutboundUrl('https://hooks.example.com/a?b=c', strict).href).toBe('https://hooks.example.com/a?b=c');
  });

  it('refuses http unless private targets are allowed, and any other scheme always', () => {
    expect(refusal(() => checkOutboundUrl('http://hooks.example.com/', strict))).toMatchObject({
      reason: 'scheme',
      message: 'the URL must use https, not http',
    });
    expect(checkOutboundUrl('http://hooks.example.com/', lenient).protocol).toBe('http:');
    for (const url of ['ftp://hooks.example.com/', 'file:///etc/passwd', 'gopher://hooks.example.com/', 'data:text/plain,hi']) {
      expect(refusal(() => checkOutboundUrl(url, lenient)).reason).toBe('scheme');
    }
  });

  it('refuses what is not an absolute URL string', () => {
    for (const raw of ['not a url', '/relative/path', '', 'https://']) expect(refusal(() => checkOutboundUrl(raw, strict)).reason).toBe('invalid_url');
    for (const raw of [undefined, null, 42, { href: 'https://hooks.example.com/' }, new URL('https://hooks.example.com/')]) {
      expect(refusal(() => checkOutboundUrl(raw, strict))).toMatchObject({ reason: 'invalid_url', message: 'the URL must be a string' });
    }
  });

  it('refuses credentials in the URL without repeating them', () => {
    for (const raw of ['https://user:pa55@hooks.example.com/', 'https://user@hooks.example.com/', 'https://:pa55@hooks.example.com/']) {
      const error = refusal(() => checkOutboundUrl(raw, strict));
      expect(error.reason).toBe('credentials');
      expect(error.message).not.toMatch(/pa55|user@/);
    }
  });

  it('lets private IP literals through when private targets are allowed', () => {
    expect(checkOutboundUrl('http://127.0.0.1:8080/hook', lenient).host).toBe('127.0.0.1:8080');
    expect(checkOutboundUrl('https://[::1]/hook', lenient).hostname).toBe('[::1]');
  });
});

describe('resolveOutboundTarget', () => {
  it('refuses localhost, which resolves to loopback', async () => {
    await expect(resolveOutboundTarget(new URL('https://localhost/hook'), strict)).rejects.toMatchObject({
      reason: 'private_address',
      message: expect.stringMatching(/^the URL's host localhost resolves to (127\.0\.0\.1|::1), a private address \(loopback\)$/),
    });
  });

  it('refuses a name when any one of its addresses is private', async () => {
    const lookup = stubLookup(['93.184.216.34', '10.0.0.5']);
    const error = await resolveOutboundTarget(new URL('https://mixed.test/hook'), { allowPrivate: false, lookup }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboundRefused);
    expect(error).toMatchObject({ reason: 'private_address', message: "the URL's host mixed.test resolves to 10.0.0.5, a private address" });
  });

  it('accepts a name whose addresses are all public', async () => {
    const asked: string[] = [];
    const lookup = stubLookup(['93.184.216.34', '2606:4700::1111'], asked);
    await expect(resolveOutboundTarget(new URL('https://public.test/hook'), { allowPrivate: false, lookup })).resolves.toBeUndefined();
    expect(asked).toEqual(['public.test']);
  });

  it('accepts a private answer when private targets are allowed', async () => {
    await expect(resolveOutboundTarget(new URL('http://localhost:8080/hook'), lenient)).resolves.toBeUndefined();
  });

  it('judges IP literals without DNS', async () => {
    const asked: string[] = [];
    const lookup = stubLookup(['93.184.216.34'], asked);
    await expect(resolveOutboundTarget(new URL('https://[::ffff:127.0.0.1]/'), { allowPrivate: false, lookup })).rejects.toMatchObject({
      reason: 'private_address',
    });
    await expect(resolveOutboundTarget(new URL('https://93.184.216.34/'), { allowPrivate: false, lookup })).resolves.toBeUndefined();
    expect(asked).toEqual([]);
  });

  it('refuses a name that does not resolve, even when private targets are allowed', async () => {
    for (const policy of [strict, lenient]) {
      await expect(resolveOutboundTarget(new URL('https://nothing-here.invalid/'), policy)).rejects.toMatchObject({
        reason: 'unresolvable',
        message: expect.stringMatching(/^the URL's host nothing-here\.invalid could not be resolved/),
      });
    }
    await expect(resolveOutboundTarget(new URL('https://empty.test/'), { allowPrivate: false, lookup: stubLookup([]) })).rejects.toMatchObject({
      reason: 'unresolvable',
    });
  });
});

/** A receiver on 127.0.0.1 that records every connection and request and answers by `handler`. */
interface Receiver {
  server: Server;
  port: number;
  connections: number;
  requests: { method: string; url: string; headers: IncomingHttpHeaders; body: string }[];
}

async function startReceiver(handler: (url: string, res: ServerResponse) => void): Promise<Receiver> {
  const receiver: Receiver = { server: createServer(), port: 0, connections: 0, requests: [] };
  receiver.server.on('connection', () => receiver.connections++);
  receiver.server.on('request', (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      receiver.requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      handler(req.url ?? '', res);
    });
  });
  await new Promise<void>((resolve) => receiver.server.listen(0, '127.0.0.1', resolve));
  receiver.port = (receiver.server.address() as AddressInfo).port;
  return receiver;
}

async function stopReceiver(receiver: Receiver): Promise<void> {
  receiver.server.closeAllConnections();
  await new Promise<void>((resolve) => receiver.server.close(() => resolve()));
}

describe('OutboundClient', () => {
  let receiver: Receiver;
  const clients: OutboundClient[] = [];
  const client = (policy: OutboundPolicy, options?: ConstructorParameters<typeof OutboundClient>[1]) => {
    const made = new OutboundClient(policy, options);
    clients.push(made);
    return made;
  };
  const endless = new Set<NodeJS.Timeout>();

  beforeEach(async () => {
    receiver = await startReceiver((url, res) => {
      if (url === '/hook') {
        res.writeHead(202, { 'content-type': 'application/json' }).end('{"ok":true}');
      } else if (url === '/moved') {
        res.writeHead(302, { location: `http://127.0.0.1:${receiver.port}/elsewhere` }).end();
      } else if (url === '/silent') {
        // Never answers.
      } else if (url === '/huge') {
        res.writeHead(200, { 'content-type': 'text/plain' }).end('x'.repeat(1024 * 1024));
      } else if (url === '/endless') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        const timer = setInterval(() => res.write('y'.repeat(512)), 5);
        endless.add(timer);
        res.on('close', () => clearInterval(timer));
      } else {
        res.writeHead(404).end('not here');
      }
    });
  });

  afterEach(async () => {
    for (const timer of endless) clearInterval(timer);
    endless.clear();
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await stopReceiver(receiver);
  });

  const payload = { headers: { 'content-type': 'application/json', 'svc-signature': 't=1,v1=abc' }, body: '{"id":"evt_1","type":"key.created"}' };

  it('delivers to a local receiver when private targets are allowed', async () => {
    const answer = await client(lenient).post(`http://127.0.0.1:${receiver.port}/hook`, payload);
    expect(answer).toMatchObject({ status: 202, body: '{"ok":true}', truncated: false });
    expect(answer.latencyMs).toBeGreaterThanOrEqual(0);
    expect(receiver.requests).toHaveLength(1);
    const [seen] = receiver.requests;
    expect(seen).toMatchObject({ method: 'POST', url: '/hook', body: payload.body });
    expect(seen.headers).toMatchObject({ 'content-type': 'application/json', 'svc-signature': 't=1,v1=abc', 'user-agent': 'svc-gateway/0.1' });
  });

  it("keeps the caller's own user-agent", async () => {
    await client(lenient).post(`http://127.0.0.1:${receiver.port}/hook`, { headers: { 'User-Agent': 'custom/1' }, body: '' });
    expect(receiver.requests[0].headers['user-agent']).toBe('custom/1');
  });

  it('resolves host names through the guarded lookup, in both answer shapes', async () => {
    const asked: string[] = [];
    const lookup = stubLookup(['127.0.0.1'], asked);
    const answer = await client({ allowPrivate: true, lookup }).post(`http://hooks.test:${receiver.port}/hook`, payload);
    expect(answer.status).toBe(202);
    // Without family auto-selection, Node asks lookup for one address instead of an array.
    const autoSelect = net.getDefaultAutoSelectFamily();
    net.setDefaultAutoSelectFamily(false);
    try {
      const single = await client({ allowPrivate: true, lookup }).post(`http://other.test:${receiver.port}/hook`, payload);
      expect(single.status).toBe(202);
    } finally {
      net.setDefaultAutoSelectFamily(autoSelect);
    }
    expect(asked).toEqual(['hooks.test', 'other.test']);
    expect(receiver.requests).toHaveLength(2);
  });

  it('refuses a private IP literal before connecting', async () => {
    const error = await client(strict)
      .post(`http://127.0.0.1:${receiver.port}/hook`, payload)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboundRefused);
    expect(error).toMatchObject({ reason: 'scheme' });
    const literal = await client(strict)
      .post(`https://127.0.0.1:${receiver.port}/hook`, payload)
      .catch((e: unknown) => e);
    expect(literal).toMatchObject({ reason: 'private_address' });
    expect(receiver.connections).toBe(0);
    expect(receiver.requests).toEqual([]);
  });

  it('refuses at connect time a name that now resolves to a private address (DNS rebinding)', async () => {
    let now = '93.184.216.34';
    const lookup: OutboundLookup = (hostname, options, callback) => stubLookup([now])(hostname, options, callback);
    const policy: OutboundPolicy = { allowPrivate: false, lookup };
    const url = `https://rebind.test:${receiver.port}/hook`;
    // Public when saved...
    await expect(resolveOutboundTarget(new URL(url), policy)).resolves.toBeUndefined();
    // ...loopback when fetched: the port is the receiver's, so only the guard stands in between.
    now = '127.0.0.1';
    const error = await client(policy)
      .post(url, payload)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboundRefused);
    expect(error).toMatchObject({ reason: 'private_address', message: "the URL's host rebind.test resolves to 127.0.0.1, a private address (loopback)" });
    expect(receiver.connections).toBe(0);
    expect(receiver.requests).toEqual([]);
  });

  it('returns a redirect as it is and does not follow it', async () => {
    const answer = await client(lenient).post(`http://127.0.0.1:${receiver.port}/moved`, payload);
    expect(answer.status).toBe(302);
    // Give a follow-up request, if one were made, time to arrive.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(receiver.requests.map((r) => r.url)).toEqual(['/moved']);
  });

  it('gives up on a receiver that never answers', async () => {
    const error = await client(lenient, { timeoutMs: 300 })
      .post(`http://127.0.0.1:${receiver.port}/silent`, payload)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboundFailure);
    expect(error).toMatchObject({ kind: 'timeout', message: 'no complete answer within 300 ms' });
  }, 10_000);

  it('counts the timeout over the whole exchange, not per body chunk', async () => {
    // The endless body keeps arriving, so no per-read timeout would ever fire.
    const slow = client(lenient, { timeoutMs: 300, maxResponseBytes: 100 * 1024 * 1024 });
    const error = await slow.post(`http://127.0.0.1:${receiver.port}/endless`, payload).catch((e: unknown) => e);
    expect(error).toMatchObject({ kind: 'timeout' });
  }, 10_000);

  it('refuses at connect time a name that does not resolve', async () => {
    const error = await client(strict)
      .post('https://nothing-here.invalid/hook', payload)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboundRefused);
    expect(error).toMatchObject({ reason: 'unresolvable' });
  });

  it('fails with kind connection when nothing listens', async () => {
    const closed = await startReceiver(() => undefined);
    await stopReceiver(closed);
    const error = await client(lenient)
      .post(`http://127.0.0.1:${closed.port}/hook`, payload)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboundFailure);
    expect(error).toMatchObject({ kind: 'connection', message: expect.stringMatching(/ECONNREFUSED/) });
  });

  it('keeps at most maxResponseBytes of a huge body', async () => {
    const answer = await client(lenient, { maxResponseBytes: 1024 }).post(`http://127.0.0.1:${receiver.port}/huge`, payload);
    expect(answer).toMatchObject({ status: 200, truncated: true });
    expect(answer.body).toBe('x'.repeat(1024));
  }, 10_000);

  it('stops reading an endless body', async () => {
    const answer = await client(lenient, { maxResponseBytes: 1024, timeoutMs: 5_000 }).post(`http://127.0.0.1:${receiver.port}/endless`, payload);
    expect(answer).toMatchObject({ status: 200, truncated: true });
    expect(answer.body).toBe('y'.repeat(1024));
  }, 10_000);

  it('does not mark a body of exactly maxResponseBytes as truncated', async () => {
    const answer = await client(lenient, { maxResponseBytes: 11 }).post(`http://127.0.0.1:${receiver.port}/hook`, payload);
    expect(answer).toMatchObject({ status: 202, body: '{"ok":true}', truncated: false });
  });
});
