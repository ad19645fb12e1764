import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { CallSignal } from './call-signal';

describe('CallSignal: what undici watches to abort one call', () => {
  let server: Server;
  let url: string;
  let received = 0;

  beforeAll(async () => {
    // Takes every request and never answers it: only an abort ends a call.
    server = createServer(() => received++);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    server.close();
  });

  it('ends a call in flight when aborted, with the reason given', async () => {
    const signal = new CallSignal();
    const call = request(url, { method: 'POST', body: 'x', signal });
    const before = received;
    while (received === before) await new Promise((r) => setTimeout(r, 5));
    const reason = new Error('the client left');
    signal.abort(reason);
    await expect(call).rejects.toBe(reason);
  });

  it('refuses a call whose signal was aborted before it left, and sends nothing', async () => {
    const signal = new CallSignal();
    signal.abort();
    const before = received;
    await expect(request(url, { method: 'POST', body: 'x', signal })).rejects.toMatchObject({ name: 'AbortError' });
    await new Promise((r) => setTimeout(r, 50));
    expect(received).toBe(before);
  });

  it('aborts once: a second abort neither changes the reason nor tells the listeners again', () => {
    const signal = new CallSignal();
    const heard: unknown[] = [];
    signal.on('abort', () => heard.push(signal.reason));
    signal.abort('first');
    signal.abort('second');
    expect([signal.aborted, signal.reason, heard]).toEqual([true, 'first', ['first']]);
  });
});
