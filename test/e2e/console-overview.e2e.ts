import type { Page } from 'playwright-core';
import { usd, utcDay } from '../../apps/console/src/format';
import {
  describeConsole,
  descriptionOf,
  goTo,
  openConsole,
  screenshot,
  signIn,
  startConsole,
  stopConsole,
  tableFit,
  unexpectedErrors,
  type ConsoleHarness,
  type ConsoleTab,
} from '../support/console';

const HELLO = { messages: [{ role: 'user', content: 'Hello' }], max_tokens: 16 };

describeConsole('console: overview and activity pages, sign-in', () => {
  let h: ConsoleHarness;
  let tab: ConsoleTab;
  let page: Page;
  let management: string;
  /** The chat completion made with the dev live key: its generation id and what it cost. */
  let echo: { id: string; cost: number };
  /** A second call, on a key with a monthly limit, with another model. */
  let capped: { cost: number; limit: number };

  beforeAll(async () => {
    h = await startConsole();
    management = h.gw.keys.management_key;
    tab = h.tab;
    page = tab.page;
  }, 60_000);
  afterAll(() => stopConsole(h));

  it("shows the balance, today's spend per model with the cost the API charged, and the keys' limits", async () => {
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    await page.getByText('No spend in the last 30 days.').waitFor();

    const chat = await h.call('POST', '/chat/completions', { key: h.gw.keys.live_api_key, body: { model: 'sim/echo', ...HELLO } });
    expect(chat.status).toBe(200);
    echo = { id: chat.json.id, cost: chat.json.usage.cost };
    expect(echo.cost).toBeGreaterThan(0);

    const made = await h.call('POST', '/keys', { key: management, body: { name: 'capped', limit: 0.001, limit_reset: 'monthly' } });
    expect(made.status).toBe(201);
    const second = await h.call('POST', '/chat/completions', { key: made.json.key, body: { model: 'sim/small-8k', safety_identifier: 'user-7', ...HELLO } });
    expect(second.status).toBe(200);
    capped = { cost: second.json.usage.cost, limit: 0.001 };

    // The page's own Refresh reads the three lists again, without loading the console anew.
    await page.getByRole('button', { name: 'Refresh', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();

    const credits = await h.call('GET', '/credits', { key: management });
    await page.getByRole('group', { name: 'Balance' }).getByText(usd(credits.json.data.balance), { exact: true }).waitFor();
    await page.getByRole('group', { name: 'Available' }).getByText(usd(credits.json.data.available), { exact: true }).waitFor();
    const today = utcDay(new Date());
    await page
      .getByRole('group', { name: 'Spend today' })
      .getByText(usd(echo.cost + capped.cost), { exact: true })
      .waitFor();

    const chart = page.getByRole('figure', { name: 'Daily spend per model' });
    await chart.locator('svg.recharts-surface').first().waitFor();
    await chart.getByText('Show as a table').click();
    const lines = chart.getByRole('region', { name: 'Daily spend per model' }).getByRole('row');
    const echoLine = lines.filter({ hasText: today }).filter({ hasText: 'sim/echo' });
    expect(await echoLine.getByRole('cell').allTextContents()).toEqual([today, 'sim/echo', usd(echo.cost)]);
    expect(await lines.filter({ hasText: 'sim/small-8k' }).getByRole('cell').allTextContents()).toEqual([today, 'sim/small-8k', usd(capped.cost)]);

    // The limited key's gauge: its month's spend against its limit; the dev keys have none.
    const gauge = page.getByRole('meter', { name: 'capped: share of its monthly limit used' });
    expect(Number(await gauge.getAttribute('value'))).toBeCloseTo(capped.cost / capped.limit, 6);
    await page
      .getByRole('listitem')
      .filter({ hasText: 'capped' })
      .getByText(`${usd(capped.cost)} of ${usd(capped.limit)} monthly limit used`)
      .waitFor();
    await page.getByRole('listitem').filter({ hasText: 'dev live key' }).getByText('no limit').waitFor();

    await screenshot(page, 'overview-desktop');
    expect(unexpectedErrors(tab)).toEqual([]);
  });

  it('filters activity by key, says the API error next to the date, and looks a generation up', async () => {
    await goTo(page, 'Activity');
    const table = page.getByRole('region', { name: 'Activity by day, model and endpoint' });
    await table.waitFor();
    expect(await table.getByRole('row').filter({ hasText: 'sim/small-8k' }).count()).toBe(1);

    // The end user of the capped key's call: only its line.
    await page.getByLabel('User', { exact: true }).fill('user-7');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await table.getByRole('row').filter({ hasText: 'sim/echo' }).waitFor({ state: 'detached' });
    // The old rows leave as soon as the new request starts; the new ones come with its answer.
    await table.getByRole('row').filter({ hasText: 'sim/small-8k' }).waitFor();
    expect(await table.getByRole('row').filter({ hasText: 'sim/small-8k' }).count()).toBe(1);
    await page.getByLabel('User', { exact: true }).fill('');

    const keys = await h.call('GET', '/keys', { key: management });
    const live = keys.json.data.find((k: { name: string }) => k.name === 'dev live key');
    await page.getByLabel('Key', { exact: true }).selectOption({ label: `dev live key (${live.hint})` });
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await table.getByRole('row').filter({ hasText: 'sim/small-8k' }).waitFor({ state: 'detached' });
    const row = table.getByRole('row').filter({ hasText: 'sim/echo' });
    await row.waitFor();
    // Date, model with its endpoint, requests billed and not, cost, then the tokens.
    expect((await row.getByRole('cell').allTextContents()).slice(0, 5)).toEqual([utcDay(new Date()), 'sim/echo/v1/chat/completions', '1', '0', usd(echo.cost)]);
    // The API agrees: that key's activity is this one call.
    const api = await h.call('GET', `/activity?key_id=${live.id}`, { key: management });
    expect(api.json.data.map((r: { model: string; requests: number }) => [r.model, r.requests])).toEqual([['sim/echo', 1]]);
    // At a laptop's size every column is in view, none behind a sideways scroll.
    const desktop = await tableFit(page, 'Activity by day, model and endpoint');
    expect(desktop.content).toBeLessThanOrEqual(desktop.visible);
    await screenshot(page, 'activity-desktop');

    // A day outside the 30 the API keeps: its own words, next to the date field.
    const refused = await h.call('GET', '/activity?date=2020-01-01', { key: management });
    expect(refused.status).toBe(400);
    await page.getByLabel('Date (UTC)').fill('2020-01-01');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.locator('#date-error').waitFor();
    expect(await descriptionOf(page, 'Date (UTC)')).toContain(refused.json.error.message);
    expect(await page.getByLabel('Date (UTC)').getAttribute('aria-invalid')).toBe('true');
    await page.getByRole('button', { name: 'Clear' }).click();
    await table.waitFor();

    await page.getByLabel('Generation id').fill(echo.id);
    await page.getByRole('button', { name: 'Look up' }).click();
    const found = page.getByRole('region', { name: echo.id });
    await found.waitFor();
    const costOf = found.locator('dt', { hasText: /^Cost$/ }).locator('xpath=following-sibling::dd[1]');
    expect(await costOf.textContent()).toBe(usd(echo.cost));
    expect(
      await found
        .locator('dt', { hasText: /^Model$/ })
        .locator('xpath=following-sibling::dd[1]')
        .textContent(),
    ).toBe('sim/echo');

    await page.getByLabel('Generation id').fill('gen-000000000000000000000000');
    await page.getByRole('button', { name: 'Look up' }).click();
    await page.locator('#id-error').waitFor();
    expect(await descriptionOf(page, 'Generation id')).toContain('No generation with that id in this workspace.');
    expect(unexpectedErrors(tab)).toEqual([]);
  });

  it('refuses a wrong key and a key without the management scope, and ends an idle session', async () => {
    const signin = await openConsole(h, 'desktop');
    const p = signin.page;
    await p.getByLabel('Management key').waitFor();
    await screenshot(p, 'signin-desktop');

    await p.getByLabel('Management key').fill(`svc_live_${'x'.repeat(40)}`);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.locator('#signin-error').waitFor();
    expect(await descriptionOf(p, 'Management key')).toMatch(/^This key was not accepted: /);

    const readOnly = await h.call('POST', '/keys', { key: management, body: { name: 'reader', scope: 'read_only' } });
    expect(readOnly.status).toBe(201);
    for (const [key, scope] of [
      [h.gw.keys.live_api_key, 'full'],
      [readOnly.json.key, 'read_only'],
    ]) {
      await p.getByLabel('Management key').fill(key);
      await p.getByRole('button', { name: 'Sign in' }).click();
      await p.getByText(`This is a ${scope} key. The console needs a key with the management scope.`).waitFor();
    }
    expect(await p.getByRole('navigation', { name: 'Console pages' }).count()).toBe(0);

    // 31 minutes without a call: the next page's call ends the session instead of sending the key.
    await signIn(p, management);
    // (Strings: the suites compile without the DOM's types.)
    await p.evaluate(`(() => {
      const stored = JSON.parse(sessionStorage.getItem('svc-console.session'));
      sessionStorage.setItem('svc-console.session', JSON.stringify({ ...stored, lastActive: Date.now() - 31 * 60 * 1000 }));
    })()`);
    await p.getByRole('navigation', { name: 'Console pages' }).getByRole('link', { name: 'Activity', exact: true }).click();
    await p.getByRole('status').filter({ hasText: 'Your session expired after 30 minutes without activity. Sign in again.' }).waitFor();
    await p.getByLabel('Management key').waitFor();
    expect(await p.evaluate<string | null>("sessionStorage.getItem('svc-console.session')")).toBeNull();
    await screenshot(p, 'signin-expired-desktop');
    expect(unexpectedErrors(signin)).toEqual([]);
    await signin.context.close();
  });

  it('fits a phone: overview, activity and sign-in', async () => {
    const phone = await openConsole(h, 'phone');
    const p = phone.page;
    await p.getByLabel('Management key').waitFor();
    await screenshot(p, 'signin-phone');
    await signIn(p, management);
    await p.getByRole('figure', { name: 'Daily spend per model' }).locator('svg.recharts-surface').first().waitFor();
    // Nothing overflows the page sideways: wide tables scroll inside their own region.
    expect(await p.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await screenshot(p, 'overview-phone');
    await goTo(p, 'Activity');
    await p.getByRole('region', { name: 'Activity by day, model and endpoint' }).waitFor();
    expect(await p.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await screenshot(p, 'activity-phone');
    expect(unexpectedErrors(phone)).toEqual([]);
    await phone.context.close();
  });

  it('works from the keyboard alone: sign-in, the skip link, and every page from the navigation', async () => {
    const keys = await openConsole(h, 'desktop');
    const p = keys.page;
    // The key field has the focus on arrival (React renders after the page's load event, so wait
    // for it); Enter submits the form.
    await p.getByLabel('Management key').and(p.locator(':focus')).waitFor();
    await p.keyboard.type(management);
    await p.keyboard.press('Enter');
    await p.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    const focused = () => p.evaluate<string>("document.activeElement?.id || (document.activeElement?.textContent ?? '').trim()");

    await p.keyboard.press('Tab');
    expect(await focused()).toBe('Skip to content');
    await p.keyboard.press('Enter');
    expect(await focused()).toBe('main');

    // Every page of the navigation is reached with Tab and opened with Enter.
    await p.evaluate("document.querySelector('.skip').focus()");
    const reached: string[] = [];
    for (let i = 0; i < 16 && reached.length < 11; i++) {
      await p.keyboard.press('Tab');
      const inNav = await p.evaluate<boolean>("!!document.activeElement?.closest('nav')");
      if (inNav) reached.push(await focused());
    }
    expect(reached).toEqual([
      'Overview',
      'Keys',
      'Presets',
      'Guardrails',
      'Webhook',
      'Provider keys',
      'Prompt logs',
      'Activity',
      'Audit log',
      'Organizations',
      'Security',
    ]);
    await p.evaluate('document.querySelector(\'nav a[href="#/keys"]\').focus()');
    await p.keyboard.press('Enter');
    await p.getByRole('heading', { level: 1, name: 'Keys' }).waitFor();
    expect(unexpectedErrors(keys)).toEqual([]);
    await keys.context.close();
  });
});
