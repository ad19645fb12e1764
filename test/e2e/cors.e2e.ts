import { createServer, type Server } from 'node:http';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser } from '../support/browser';
import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';

const ADMIN_TOKEN = 'admin-token-for-cors-tests';

/**
 * Issue 15.1, spec 5 rule 4 ("for browser use"): a page on another origin calls the gateway
 * from real Chromium with the headers the SDKs send. The browser does the preflight and decides
 * what the page may read; the test only looks at what the page got.
 */
describe('browser calls across origins (CORS)', () => {
  let gw: StartedGateway;
  let call: Call;
  let browser: Browser;
  let page: Page;
  let site: Server;
  let origin: string;
  /** The gateway's root as the page calls it: another origin than the page's (localhost vs 127.0.0.1). */
  let gateway: string;

  beforeAll(async () => {
    gw = await startGateway({ SVC_ADMIN_TOKEN: ADMIN_TOKEN });
    call = api(gw.url.replace(/\/v1$/, ''));
    gateway = gw.url.replace(/\/v1$/, '').replace('127.0.0.1', 'localhost');
    site = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>app</title><p>app</p>'));
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as { port: number }).port}`;
    browser = await launchBrowser();
    page = await browser.newPage();
    await page.goto(`${origin}/`);
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => site?.close(resolve));
    await stopGateway(gw);
  });

  /** A fetch made by the page; what the page could read of the answer, or the browser's refusal. */
  const fromPage = (url: string, init: { method: string; headers: Record<string, string>; body?: string }, read: string[] = []) =>
    page.evaluate(
      async ({ url, init, read }) => {
        try {
          const r = await fetch(url, init);
          return { status: r.status, body: await r.json(), headers: Object.fromEntries(read.map((h) => [h, r.headers.get(h)])) };
        } catch (err) {
          return { refused: String(err) };
        }
      },
      { url, init, read },
    );

  it('lets a page call a model with its key, and read the answer and the service headers', async () => {
    const r = await fromPage(
      `${gateway}/v1/chat/completions`,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${gw.keys.api_key}`, 'content-type': 'application/json', 'x-stainless-lang': 'js', 'idempotency-key': 'browser-1' },
        body: JSON.stringify({ model: 'sim/echo', max_tokens: 8, messages: [{ role: 'user', content: 'from a page' }] }),
      },
      ['x-svc-generation-id', 'x-ratelimit-remaining-requests'],
    );
    expect(r).toMatchObject({ status: 200, body: { object: 'chat.completion' } });
    expect((r as any).headers['x-svc-generation-id']).toBe((r as any).body.id);
    expect(Number((r as any).headers['x-ratelimit-remaining-requests'])).toBeGreaterThan(0);
  });

  it('lets an Anthropic client page call /v1/messages with x-api-key', async () => {
    const r = await fromPage(`${gateway}/v1/messages`, {
      method: 'POST',
      headers: {
        'x-api-key': gw.keys.api_key,
        'anthropic-version': '2023-06-01',
        'anthropic-dangerous-direct-browser-access': 'true',
        'content-type': 'application/json',
      },
      body: JSON.stringify({ model: 'sim/echo', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(r).toMatchObject({ status: 200, body: { type: 'message' } });
  });

  it('still applies the key restrictions: a key for another site is refused, readably', async () => {
    const created = await call('POST', `/admin/accounts/${gw.keys.account_id}/keys`, {
      body: { allowed_referrers: ['app.example.com'] },
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    const r = await fromPage(`${gateway}/v1/credits`, { method: 'GET', headers: { authorization: `Bearer ${created.json.key}` } });
    expect(r).toMatchObject({ status: 403, body: { error: { code: 'referrer_not_allowed' } } });
  });

  it('answers a call without Origin (an SDK on a server) with no CORS headers but Vary: Origin, and one with it with them', async () => {
    const body = { model: 'sim/echo', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] };
    const plain = await call('POST', '/v1/chat/completions', { key: gw.keys.api_key, body });
    expect(plain.status).toBe(200);
    expect([...plain.headers.keys()].filter((h) => h.startsWith('access-control-'))).toEqual([]);
    expect(plain.headers.get('vary')).toMatch(/\borigin\b/i);
    const cross = await call('POST', '/v1/chat/completions', { key: gw.keys.api_key, body, headers: { origin } });
    expect(cross.status).toBe(200);
    expect(cross.headers.get('access-control-allow-origin')).toBe(origin);
    expect(cross.headers.get('access-control-expose-headers')?.split(', ')).toEqual(
      expect.arrayContaining(['x-svc-generation-id', 'x-ratelimit-remaining-requests']),
    );
    expect(cross.headers.get('vary')).toMatch(/\borigin\b/i);
  });

  it('gives the operator API no CORS: the browser refuses the page the answer', async () => {
    const r = await fromPage(`${gateway}/admin/accounts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(r).toEqual({ refused: expect.stringContaining('Failed to fetch') });
  });
});
