import { connect, type Socket } from 'node:net';
import { CONNECTIONS_CHECK_MS } from '../../apps/gateway/src/app';
import { startGateway, stopGateway, type StartedGateway } from '../support/gateway';

/** Headers and keep-alive at the least the configuration allows; the request's leaves room for the slow upload below. */
const HEADERS_MS = 1_000;
const REQUEST_MS = 3_000;
const KEEP_ALIVE_MS = 1_000;

/**
 * Issue 41 S3: the HTTP server's timeouts against slowloris, with raw TCP clients. Short values
 * here: headers within 1 s, the whole request within 3 s, an idle keep-alive connection closed
 * after 1 s. Receiving only: a response that takes longer than all of them is not cut. Each test
 * mostly waits on the server's clocks, each on its own connection: they wait side by side.
 */
describe('HTTP server timeouts (issue 41 S3)', () => {
  let gw: StartedGateway;
  let port: number;
  let key: string;

  beforeAll(async () => {
    gw = await startGateway({
      SVC_HEADERS_TIMEOUT_MS: String(HEADERS_MS),
      SVC_REQUEST_TIMEOUT_MS: String(REQUEST_MS),
      SVC_KEEP_ALIVE_TIMEOUT_MS: String(KEEP_ALIVE_MS),
    });
    port = Number(new URL(gw.url).port);
    key = gw.keys.api_key;
  }, 60_000);
  afterAll(async () => {
    await stopGateway(gw);
  });

  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  /** A raw connection: what it received, and when the server closed it (ms after it opened). */
  async function raw(): Promise<{ socket: Socket; received: () => string; closedAfter: Promise<number> }> {
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const opened = Date.now();
    let data = '';
    socket.on('data', (chunk) => (data += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    const closedAfter = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now() - opened)));
    return { socket, received: () => data, closedAfter };
  }

  const chatBody = (content: string, stream = false) => JSON.stringify({ model: 'sim/echo', stream, messages: [{ role: 'user', content }] });
  const head = (body: string) =>
    `POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`;

  it.concurrent('disconnects a client that sends part of a header line and stalls, after the header timeout, with a 408 error object', async () => {
    const c = await raw();
    c.socket.write('GET /v1/models HTTP/1.1\r\nHost: localhost\r\nX-Slow: a');
    const after = await Promise.race([c.closedAfter, sleep(10_000).then(() => -1)]);
    expect(after).toBeGreaterThanOrEqual(HEADERS_MS - 100);
    // The timeout plus Node's check interval (1 s), with room for a loaded machine.
    expect(after).toBeLessThan(HEADERS_MS + CONNECTIONS_CHECK_MS + 3_000);
    const [status, body] = c.received().split('\r\n\r\n');
    expect(status).toMatch(/^HTTP\/1\.1 408 /);
    expect(JSON.parse(body)).toEqual({ error: { type: 'invalid_request_error', code: 'request_timeout', message: expect.any(String), param: null } });
  });

  it.concurrent('answers a slow but valid upload: its body trickles in past the header timeout, within the request timeout', async () => {
    const body = chatBody('a slow upload '.repeat(20));
    const c = await raw();
    c.socket.write(head(body));
    // The last piece after the header timeout and Node's next check of it, well before the request timeout.
    const pieces = 6;
    const size = Math.ceil(body.length / pieces);
    for (let i = 0; i < pieces; i++) {
      await sleep((HEADERS_MS + CONNECTIONS_CHECK_MS + 100) / pieces);
      c.socket.write(body.slice(i * size, (i + 1) * size));
    }
    await c.closedAfter;
    expect(c.received()).toMatch(/^HTTP\/1\.1 200 /);
    expect(c.received()).toContain('chat.completion');
  });

  it.concurrent('refuses an upload still arriving after the request timeout with 408', async () => {
    const body = chatBody('too slow '.repeat(20));
    const c = await raw();
    c.socket.write(head(body));
    let stopped = false;
    void c.closedAfter.then(() => (stopped = true));
    for (let i = 0; i < 12 && !stopped; i++) {
      await sleep(500);
      if (!stopped) c.socket.write(body.slice(i, i + 1));
    }
    const after = await c.closedAfter;
    expect(after).toBeGreaterThanOrEqual(REQUEST_MS - 100);
    expect(after).toBeLessThan(REQUEST_MS + CONNECTIONS_CHECK_MS + 2_000);
    expect(c.received()).toMatch(/^HTTP\/1\.1 408 /);
  });

  it.concurrent(
    'does not cut a streamed response that lasts longer than every timeout',
    async () => {
      const started = Date.now();
      const res = await fetch(`${gw.url}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        // Sixteen frames 300 ms apart (4.5 s): past the request timeout and Node's next check of it.
        body: chatBody('#sim {"chunk_delay_ms": 300}\none two three four five six seven eight nine ten eleven twelve', true),
      });
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(Date.now() - started).toBeGreaterThan(REQUEST_MS + CONNECTIONS_CHECK_MS);
      expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    },
    30_000,
  );

  it.concurrent('closes a keep-alive connection idle past the keep-alive timeout', async () => {
    const c = await raw();
    c.socket.write('GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n');
    const after = await Promise.race([c.closedAfter, sleep(8_000).then(() => -1)]);
    expect(c.received()).toMatch(/^HTTP\/1\.1 /);
    expect(after).toBeGreaterThanOrEqual(KEEP_ALIVE_MS - 100);
    expect(after).toBeLessThan(KEEP_ALIVE_MS + 3_500);
  });
});
