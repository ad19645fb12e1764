import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { verifyWebhookSignature } from '@svc/webhooks';
import {
  describeConsole,
  descriptionOf,
  goTo,
  mailFiles,
  openDialog,
  phoneShot,
  refreshUntil,
  screenshot,
  startConsole,
  stopConsole,
  stepUpMail,
  tableFit,
  unexpectedErrors,
  type ConsoleHarness,
  type ConsoleTab,
} from '../support/console';
import { until } from '../support/until';

const PIXEL = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
const EMAIL = 'owner@example.com';

interface Delivery {
  headers: IncomingMessage['headers'];
  raw: string;
  id: string;
  type: string;
  answered: number;
}

/** A webhook receiver on 127.0.0.1 that records each delivery and answers `status` (500 until told otherwise). */
class Receiver {
  readonly received: Delivery[] = [];
  status = 500;
  url = '';
  private server!: Server;

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      let raw = '';
      req.on('data', (chunk) => (raw += chunk));
      req.on('end', () => {
        const body = JSON.parse(raw) as { id: string; type: string };
        this.received.push({ headers: req.headers, raw, id: body.id, type: body.type, answered: this.status });
        res.writeHead(this.status).end();
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

describeConsole('console: webhook, prompt logs and security pages', () => {
  const receiver = new Receiver();
  let h: ConsoleHarness;
  let tab: ConsoleTab;
  let page: Page;
  let management: string;

  beforeAll(async () => {
    await receiver.start();
    h = await startConsole({ SVC_WEBHOOK_ALLOW_PRIVATE: 'true' });
    management = h.gw.keys.management_key;
    tab = h.tab;
    page = tab.page;
  }, 60_000);

  afterAll(async () => {
    await stopConsole(h);
    await receiver.close();
  });

  it('saves the endpoint, shows the secret once, lists a failed delivery and redelivers it signed', async () => {
    await goTo(page, 'Webhook');
    await page.getByText('No events yet').waitFor();

    // A URL the API refuses: its message next to the URL field.
    await page.getByLabel('Endpoint URL').fill('ftp://x');
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    await page.getByRole('alert').waitFor();
    const refused = await h.call('PUT', '/settings/webhook', { key: management, body: { url: 'ftp://x' } });
    expect(refused.json.error).toMatchObject({ code: 'invalid_webhook_url', param: 'url' });
    expect(await descriptionOf(page, 'Endpoint URL')).toContain(refused.json.error.message);

    await page.getByLabel('Endpoint URL').fill(receiver.url);
    await expect(page.getByLabel('All events, including types added later').isChecked()).resolves.toBe(true);
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    const secret = await page.getByLabel('Signing secret', { exact: true }).inputValue();
    expect(secret).toMatch(/^whsec_/);
    await page.getByText('Svc-Signature: t=<unix seconds>,v1=<hex>').waitFor();
    const settings = await h.call('GET', '/settings', { key: management });
    expect(settings.json.data.webhook).toMatchObject({ url: receiver.url, events: null, paused: false });
    expect(JSON.stringify(settings.json)).not.toContain(secret);
    await page.getByRole('button', { name: 'I have stored the secret' }).click();
    expect(await page.getByLabel('Signing secret', { exact: true }).count()).toBe(0);

    // An event; the receiver answers its first delivery 500.
    const created = await h.call('POST', '/keys', { key: management, body: { name: 'x' } });
    expect(created.status).toBe(201);
    const first = await until('the first delivery', () => receiver.received.find((d) => d.type === 'key.created'));
    expect(first.answered).toBe(500);

    const events = page.getByRole('region', { name: 'Webhook events' });
    const row = events.getByRole('row').filter({ hasText: first.id });
    await refreshUntil(
      page,
      'the event listed with its failed attempt',
      '/webhook-events',
      async () => (await row.count()) === 1 && (await row.textContent())?.includes('500'),
    );
    expect(await row.textContent()).toContain('key.created');
    expect(await row.textContent()).toContain('Retrying');

    await row.getByRole('button', { name: `View attempts of ${first.id}` }).click();
    const attempts = page.getByRole('region', { name: 'Delivery attempts' });
    await attempts.getByRole('row').filter({ hasText: 'HTTP 500' }).waitFor();
    expect(await page.getByLabel('Event data').textContent()).toContain(created.json.data.id);

    receiver.status = 200;
    await page.getByRole('button', { name: 'Redeliver' }).click();
    const delivered = attempts.getByRole('row').filter({ hasText: 'HTTP 200' });
    await delivered.waitFor({ timeout: 15_000 });
    expect(await delivered.textContent()).toContain('Delivered');
    await row.filter({ hasText: 'Delivered' }).waitFor();

    const redelivery = receiver.received.find((d) => d.id === first.id && d.answered === 200);
    expect(redelivery).toBeDefined();
    const signature = redelivery!.headers['svc-signature'] as string;
    expect(verifyWebhookSignature(signature, secret, redelivery!.raw, Math.floor(Date.now() / 1000))).toBe(true);
    const detail = await h.call('GET', `/webhook-events/${first.id}`, { key: management });
    expect(detail.json.data.attempts.map((a: { status_code: number }) => a.status_code)).toEqual(expect.arrayContaining([500, 200]));

    // At a laptop's size every column is in view, none behind a sideways scroll.
    const desktop = await tableFit(page, 'Webhook events');
    expect(desktop.content).toBeLessThanOrEqual(desktop.visible);
    await screenshot(page, 'webhook-desktop');
    await phoneShot(h, management, 'Webhook', 'webhook-phone', async (phone) => {
      const fit = await tableFit(phone, 'Webhook events');
      expect(fit.content <= fit.visible || fit.scrolls).toBe(true);
      await phone.getByRole('button', { name: `View attempts of ${first.id}` }).click();
      await phone.getByRole('region', { name: 'Delivery attempts' }).getByRole('row').filter({ hasText: 'HTTP 200' }).waitFor();
    });
    expect(unexpectedErrors(tab)).toEqual([]);
  });

  it('turns prompt logging on, shows a log with its image as a chip, and purges it', async () => {
    await goTo(page, 'Prompt logs');
    await page.getByText('Logging is off, so nothing is kept.').waitFor();
    await page.getByLabel('Keep prompt logs').check();
    await page.getByLabel('Keep each log for (days)').fill('7');
    await page.getByRole('button', { name: 'Save logging setting' }).click();
    await page.getByText('Saved: requests from now on are kept for 7 days.').waitFor();
    expect((await h.call('GET', '/settings', { key: management })).json.data.prompt_logging).toEqual({ enabled: true, retention_days: 7 });

    const chat = await h.call('POST', '/chat/completions', {
      key: h.gw.keys.live_api_key,
      body: {
        model: 'sim/echo',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'the console shows platypus' },
              { type: 'image_url', image_url: { url: PIXEL } },
            ],
          },
        ],
      },
    });
    expect(chat.status).toBe(200);
    const id = chat.json.id as string;

    const view = page.getByRole('button', { name: `View log ${id}` });
    await refreshUntil(page, 'the log listed', '/prompt-logs', async () => (await view.count()) === 1);
    await view.click();
    const request = page.getByRole('region', { name: 'Request' });
    await request.getByText('the console shows platypus').waitFor();
    expect(await request.getByText('[image]', { exact: true }).isVisible()).toBe(true);
    expect(await request.textContent()).not.toContain('[image omitted]');
    expect(await page.getByRole('region', { name: 'Answer' }).textContent()).toContain(id);

    await screenshot(page, 'prompt-logs-desktop');
    await phoneShot(h, management, 'Prompt logs', 'prompt-logs-phone', async (phone) => {
      await phone.getByRole('button', { name: `View log ${id}` }).click();
      await phone.getByRole('region', { name: 'Request' }).getByText('the console shows platypus').waitFor();
    });

    await page.getByRole('button', { name: 'Purge this log' }).click();
    await openDialog(page, 'Purge this log?').getByRole('button', { name: 'Purge log' }).click();
    await page.getByText(`Purged the log of ${id}.`).waitFor();
    expect(await view.count()).toBe(0);
    await page.getByText('No logs yet.').waitFor();
    expect((await h.call('GET', `/prompt-logs/${id}`, { key: management })).status).toBe(404);
    expect(unexpectedErrors(tab)).toEqual([]);
  });

  it('turns step-up on without a code, and off only with the mailed one', async () => {
    await goTo(page, 'Security');
    await page.getByLabel('Ask for an emailed code before sensitive actions').check();
    await page.getByLabel('Email for confirmation codes').fill(EMAIL);
    await page.getByRole('button', { name: 'Save step-up setting' }).click();
    await page.getByText(`Saved: step-up is on; codes go to ${EMAIL}.`).waitFor();
    expect((await h.call('GET', '/settings', { key: management })).json.data.step_up).toEqual({ enabled: true, email: EMAIL });
    // Every guarded action is one this console does, provider keys and organizations included.
    const guarded = page.locator('.card', { has: page.getByRole('heading', { name: 'What step-up protects' }) });
    expect(await guarded.getByRole('listitem').filter({ hasText: 'Saving a provider key' }).textContent()).toContain('(Provider keys)');
    expect(await guarded.getByRole('listitem').filter({ hasText: 'Deleting an organization' }).textContent()).toContain('(Organizations)');
    expect(await guarded.textContent()).not.toMatch(/operator/i);
    await screenshot(page, 'security-desktop');
    await phoneShot(h, management, 'Security', 'security-phone');

    const before = mailFiles(h.gw.dataDir);
    await page.getByLabel('Ask for an emailed code before sensitive actions').uncheck();
    await page.getByRole('button', { name: 'Save step-up setting' }).click();
    const dialog = openDialog(page, 'Confirm with the emailed code');
    await dialog.waitFor();
    const code = await until('the mailed code', async () => (await stepUpMail(h.gw.dataDir, before))?.code);
    await dialog.getByLabel('Confirmation code').fill(code);
    await dialog.getByRole('button', { name: 'Confirm' }).click();
    await page.getByText('Saved: step-up is off; no action asks for a code.').waitFor();
    expect((await h.call('GET', '/settings', { key: management })).json.data.step_up.enabled).toBe(false);
    expect(unexpectedErrors(tab)).toEqual([]);
  });
});
