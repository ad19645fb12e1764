import type { Page } from 'playwright-core';
import {
  describeConsole,
  descriptionOf,
  goTo,
  mailFiles,
  openSignedIn,
  screenshot,
  startConsole,
  stopConsole,
  stepUpMail,
  unexpectedErrors,
  type ConsoleHarness,
  type ConsoleTab,
} from '../support/console';
import { until } from '../support/until';

const KEY_NAME = 'console-e2e';
const SLUG = 'console-e2e';

/**
 * The console's Keys and Presets pages driven as a person would, each effect checked through the
 * API: a key made in the console really calls a model, really rotates and is really revoked; a
 * preset's versions are really rolled back.
 */
describeConsole('console: keys and presets', () => {
  let h: ConsoleHarness;
  let tab: ConsoleTab;
  let page: Page;
  let management: string;
  /** The secret of the key the suite creates, as the console showed it. */
  let secret: string;

  beforeAll(async () => {
    h = await startConsole();
    management = h.gw.keys.management_key;
    tab = h.tab;
    page = tab.page;
  }, 60_000);
  afterAll(async () => {
    await stopConsole(h);
  });

  const chat = (key: string) =>
    h.call('POST', '/chat/completions', { key, body: { model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 } });
  const keysNamed = async (name: string) =>
    ((await h.call('GET', '/keys', { key: management })).json.data as { id: string; name: string }[]).filter((k) => k.name === name);
  const keyRow = (name: string) => page.getByRole('row').filter({ has: page.getByRole('rowheader', { name: new RegExp(`^${name}\\b`) }) });
  const description = (label: string) => descriptionOf(page, label);
  const readSecret = async (title: string) => {
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('heading', { name: title }).waitFor();
    expect(await dialog.textContent()).toContain('will not be shown again');
    expect(await dialog.getByRole('button', { name: 'Copy secret' }).isVisible()).toBe(true);
    return dialog.getByLabel('Secret').inputValue();
  };
  const closeSecret = async (shown: string) => {
    await page.getByRole('dialog').getByRole('button', { name: 'Done' }).click();
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    // Shown once: nothing on the page holds it any more.
    expect(await page.content()).not.toContain(shown);
  };

  it('creates a key with a $1 monthly limit and shows its secret once, with a copy button', async () => {
    await goTo(page, 'Keys');
    await page.getByRole('button', { name: 'New key' }).click();
    await page.getByLabel('Name', { exact: true }).fill(KEY_NAME);
    await page.getByLabel('Spend limit (USD)').fill('1');
    await page.getByRole('button', { name: 'Create key' }).click();
    secret = await readSecret('Key created');
    expect(secret).toMatch(/^svc_live_[A-Za-z0-9]{40}$/);
    await screenshot(page, 'keys-secret-desktop');
    await closeSecret(secret);

    const [created] = await keysNamed(KEY_NAME);
    expect((await h.call('GET', `/keys/${created.id}`, { key: management })).json.data).toMatchObject({
      limit: 1,
      limit_reset: 'monthly',
      scope: 'full',
      environment: 'live',
    });
    expect(unexpectedErrors(tab)).toEqual([]);
  });

  it('the secret makes a real chat completion, and the table shows its monthly usage', async () => {
    const r = await chat(secret);
    expect(r.status).toBe(200);
    const cost = r.json.usage.cost as number;
    expect(cost).toBeGreaterThan(0);

    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Keys' }).waitFor();
    const row = keyRow(KEY_NAME);
    await row.waitFor();
    const cells = await row.getByRole('cell').allTextContents();
    const used = cells.find((c) => /^\$/.test(c));
    expect(Number(used?.slice(1))).toBeCloseTo(cost, 9);
    expect(cells.join(' ')).toContain('$1.00 monthly');
    await screenshot(page, 'keys-desktop');
    expect(unexpectedErrors(tab)).toEqual([]);
  });

  it('edits the limit, and the API has it', async () => {
    await page.getByRole('button', { name: `Edit ${KEY_NAME}` }).click();
    await page.getByLabel('Spend limit (USD)').fill('2.50');
    await page.getByLabel('Limit resets').selectOption('weekly');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: `Saved ${KEY_NAME}.` })
      .waitFor();
    const [key] = await keysNamed(KEY_NAME);
    expect((await h.call('GET', `/keys/${key.id}`, { key: management })).json.data).toMatchObject({ limit: 2.5, limit_reset: 'weekly' });
    expect(await keyRow(KEY_NAME).textContent()).toContain('$2.50 weekly');
    expect(unexpectedErrors(tab)).toEqual([]);
  });

  it('rotates the key without a grace period: the old secret is refused, the new one works', async () => {
    await page.getByRole('button', { name: `Rotate ${KEY_NAME}` }).click();
    const dialog = page.getByRole('dialog');
    expect(await dialog.getByLabel('None: the old secret stops working now').isChecked()).toBe(true);
    await dialog.getByRole('button', { name: 'Rotate key' }).click();
    const rotated = await readSecret('Key rotated');
    expect(rotated).not.toBe(secret);
    await closeSecret(rotated);

    expect((await chat(secret)).status).toBe(401);
    expect((await chat(rotated)).status).toBe(200);
    secret = rotated;
    expect(unexpectedErrors(tab)).toEqual([]);
  });

  it('revokes the key through the confirmation: its secret gets 401', async () => {
    await keyRow(KEY_NAME).getByRole('button', { name: 'Revoke' }).click();
    const dialog = page.getByRole('dialog');
    expect(await dialog.textContent()).toContain('cannot be restored');
    await dialog.getByRole('button', { name: 'Revoke key' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: `Revoked ${KEY_NAME}` })
      .waitFor();

    const r = await chat(secret);
    expect(r.status).toBe(401);
    expect(r.json.error.code).toBe('invalid_api_key');
    // The notice comes first; the list is read again after it.
    await until('the row marked revoked', async () => ((await keyRow(KEY_NAME).textContent()) ?? '').includes('revoked'));
    expect(await keyRow(KEY_NAME).getByRole('button').count()).toBe(0);
    expect(unexpectedErrors(tab)).toEqual([]);
  });

  it('shows the API’s refusal next to the field it names, and creates nothing', async () => {
    const before = (await h.call('GET', '/keys', { key: management })).json.data.length;
    await page.getByRole('button', { name: 'New key' }).click();
    await page.getByLabel('Name', { exact: true }).fill('bad-ip');
    await page.getByLabel('Allowed IPs').fill('10.0.0.1, not-an-ip');
    await page.getByRole('button', { name: 'Create key' }).click();
    await until('the allowed_ips error', async () => (await page.getByLabel('Allowed IPs').getAttribute('aria-invalid')) === 'true');
    expect(await description('Allowed IPs')).toMatch(/IP address or CIDR range/);
    // Not said at form level as well: once, where the mistake is.
    expect(await page.getByRole('alert').count()).toBe(1);
    await screenshot(page, 'keys-field-error-desktop');
    expect((await h.call('GET', '/keys', { key: management })).json.data.length).toBe(before);

    // A value the form itself can tell is wrong is said in the same place, and nothing is sent.
    await page.getByLabel('Allowed IPs').fill('');
    await page.getByLabel('Spend limit (USD)').fill('lots');
    await page.getByRole('button', { name: 'Create key' }).click();
    await until('the limit error', async () => (await page.getByLabel('Spend limit (USD)').getAttribute('aria-invalid')) === 'true');
    expect(await description('Spend limit (USD)')).toContain('amount in USD');
    await page.getByRole('button', { name: 'Cancel' }).click();
    expect((await h.call('GET', '/keys', { key: management })).json.data.length).toBe(before);
    expect(unexpectedErrors(tab)).toEqual([]);
  });

  it('creates a preset: a JSON syntax error inline with its line and column, the API’s error next to the editor', async () => {
    await goTo(page, 'Presets');
    await page.getByRole('button', { name: 'New preset' }).click();
    await page.getByLabel('Slug').fill(SLUG);
    const editor = page.getByLabel('Config (JSON)');
    await editor.fill('{\n  "model": "sim/echo",\n}');
    await page.getByRole('button', { name: 'Create preset' }).click();
    await until('the syntax error', async () => (await editor.getAttribute('aria-invalid')) === 'true');
    expect(await description('Config (JSON)')).toMatch(/Line 3, column 1: .*one too many/);
    expect((await h.call('GET', `/presets/${SLUG}`, { key: management })).status).toBe(404);

    await editor.fill('{"model": "sim/nope"}');
    // The error follows the typing: the text is JSON again, so the syntax error is gone.
    expect(await editor.getAttribute('aria-invalid')).toBeNull();
    await page.getByRole('button', { name: 'Create preset' }).click();
    await until('the API error', async () => /no model 'sim\/nope'/.test(await description('Config (JSON)')));
    expect((await h.call('GET', `/presets/${SLUG}`, { key: management })).status).toBe(404);

    await editor.fill('{"model": "sim/echo"}');
    await page.getByRole('button', { name: 'Create preset' }).click();
    await page.getByRole('heading', { level: 1, name: `Preset ${SLUG}` }).waitFor();
    expect((await h.call('GET', `/presets/${SLUG}`, { key: management })).json.data).toMatchObject({ version: 1, config: { model: 'sim/echo' } });
    expect(unexpectedErrors(tab)).toEqual([]);
  });

  it('edits the config into version 2 and shows the diff with signs', async () => {
    await page.getByLabel('Config (JSON)').fill('{"model": "sim/small-8k"}');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved as version 2.' }).waitFor();

    const diff = page.getByLabel('Changes, Version 1 → version 2');
    await diff.waitFor();
    expect(await diff.getByRole('deletion').allTextContents()).toEqual(['-  "model": "sim/echo"\n']);
    expect(await diff.getByRole('insertion').allTextContents()).toEqual(['+  "model": "sim/small-8k"\n']);
    // Who saved each version: the console's key by its name, as the Keys page lists it.
    const [own] = await keysNamed('dev management key');
    const by = page
      .getByRole('region', { name: 'Versions' })
      .getByRole('row', { name: /^Version 2\b/ })
      .locator('td')
      .nth(1);
    await by.getByText('dev management key', { exact: true }).waitFor();
    expect(await by.textContent()).toBe(`dev management key${own.id}`);
    await screenshot(page, 'presets-desktop');
    expect(unexpectedErrors(tab)).toEqual([]);
  });

  it('rolls back to version 1 behind a confirmation: the latest version has version 1’s config again', async () => {
    await page
      .getByRole('row', { name: /^Version 1\b/ })
      .getByRole('button', { name: 'Roll back' })
      .click();
    await page.getByRole('dialog').getByRole('button', { name: 'Roll back to version 1' }).click();
    await page.getByRole('status').filter({ hasText: 'version 3 has version 1’s config' }).waitFor();

    const { data } = (await h.call('GET', `/presets/${SLUG}`, { key: management })).json;
    expect(data.version).toBe(3);
    expect(data.versions.at(-1)).toMatchObject({ version: 3, rolled_back_to: 1, config: { model: 'sim/echo' } });
    expect(data.config).toEqual(data.versions[0].config);
    expect(await page.getByLabel('Config (JSON)').inputValue()).toContain('"sim/echo"');
    expect(unexpectedErrors(tab)).toEqual([]);
  });

  it('looks right on a phone: keys with the secret dialog, a preset with its diff', async () => {
    const phone = await openSignedIn(h, 'phone', management);
    try {
      await goTo(phone.page, 'Keys');
      await phone.page.getByRole('table').waitFor();
      // Every key's actions are on the screen, not off to its right.
      const actions = phone.page.getByRole('button', { name: /^(Edit .+|Rotate .+|Revoke)$/ });
      expect(await actions.count()).toBeGreaterThanOrEqual(6);
      for (const button of await actions.all()) {
        const box = (await button.boundingBox())!;
        expect(box.x).toBeGreaterThanOrEqual(0);
        expect(box.x + box.width).toBeLessThanOrEqual(390);
      }
      await screenshot(phone.page, 'keys-phone');
      await phone.page.getByRole('button', { name: 'New key' }).click();
      await phone.page.getByLabel('Name', { exact: true }).fill('phone-key');
      await phone.page.getByRole('button', { name: 'Create key' }).click();
      await phone.page.getByRole('dialog').getByLabel('Secret').waitFor();
      await screenshot(phone.page, 'keys-secret-phone');
      await phone.page.getByRole('button', { name: 'Done' }).click();

      await goTo(phone.page, 'Presets');
      await phone.page.getByRole('link', { name: SLUG }).click();
      await phone.page.getByLabel('Changes, Version 2 → version 3').waitFor();
      await screenshot(phone.page, 'presets-phone');
      // The page itself never scrolls sideways: wide tables scroll inside their own box.
      // (A string, as the suites are typed without the DOM.)
      expect(await phone.page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
      expect(unexpectedErrors(phone)).toEqual([]);
    } finally {
      await phone.context.close();
    }
  });

  it('with email step-up on, creating a key asks for the emailed code, and the code creates it', async () => {
    expect((await h.call('PATCH', '/settings', { key: management, body: { step_up: { enabled: true, email: 'ops@example.com' } } })).status).toBe(200);
    const before = mailFiles(h.gw.dataDir);

    await goTo(page, 'Keys');
    await page.getByRole('button', { name: 'New key' }).click();
    await page.getByLabel('Name', { exact: true }).fill('stepped-up');
    await page.getByRole('button', { name: 'Create key' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Confirmation code').waitFor();
    expect(await dialog.textContent()).toContain('o***@example.com');

    const mail = await until('the step-up mail', () => stepUpMail(h.gw.dataDir, before));
    expect(mail.text).toContain('creating an API key');
    const code = mail.code;
    expect(code).toBeDefined();

    await dialog.getByLabel('Confirmation code').fill(code);
    await dialog.getByRole('button', { name: 'Confirm' }).click();
    const stepped = await readSecret('Key created');
    await closeSecret(stepped);
    expect(await keysNamed('stepped-up')).toHaveLength(1);
    expect((await chat(stepped)).status).toBe(200);
    expect(unexpectedErrors(tab)).toEqual([]);
  });
});
