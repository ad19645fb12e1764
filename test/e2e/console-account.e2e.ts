import type { Page } from 'playwright-core';
import { byokUnavailable } from '@svc/metering';
import {
  describeConsole,
  descriptionOf,
  goTo,
  openDialog,
  openSignedIn,
  phoneShot,
  screenshot,
  startConsole,
  stopConsole,
  tableFit,
  unexpectedErrors,
  type ConsoleHarness,
  type ConsoleTab,
} from '../support/console';
import { until } from '../support/until';

const today = () => new Date().toISOString().slice(0, 10);
const yesterday = () => new Date(Date.now() - 24 * 3600 * 1000).toISOString().slice(0, 10);

describeConsole('console: provider keys, organizations and audit log pages', () => {
  let h: ConsoleHarness;
  let tab: ConsoleTab;
  let page: Page;
  let management: string;
  let admin: { authorization: string };

  beforeAll(async () => {
    h = await startConsole();
    management = h.gw.keys.management_key;
    admin = { authorization: `Bearer ${h.gw.keys.admin_token}` };
    tab = h.tab;
    page = tab.page;
  }, 60_000);

  afterAll(() => stopConsole(h));

  it('saves, replaces and deletes a provider key, showing only its hint', async () => {
    const listed = await h.call('GET', '/provider-keys', { key: management });
    const provider = listed.json.providers[0] as string;
    expect(listed.json.data).toEqual([]);
    const first = 'sk-console-first-secret-wxyz';
    const second = 'sk-console-second-secret-abcd';
    const savedKeys = async () => (await h.call('GET', '/provider-keys', { key: management })).json.data as { provider: string; hint: string }[];

    await goTo(page, 'Provider keys');
    const row = page
      .getByRole('region', { name: 'Providers and their keys' })
      .getByRole('row')
      .filter({ has: page.getByRole('rowheader', { name: provider, exact: true }) });
    await row.getByText('none: the gateway’s key is used').waitFor();

    // A key the API refuses (a space inside): its message next to the key field.
    await row.getByRole('button', { name: `Add a key for ${provider}` }).click();
    expect(await page.getByLabel('Provider', { exact: true }).inputValue()).toBe(provider);
    await page.getByLabel('API key', { exact: true }).fill('sk with a space');
    await page.getByRole('button', { name: 'Save key' }).click();
    await page.getByRole('alert').waitFor();
    const refused = await h.call('PUT', `/provider-keys/${provider}`, { key: management, body: { api_key: 'sk with a space' } });
    expect(refused.json.error).toMatchObject({ param: 'api_key' });
    expect(await descriptionOf(page, 'API key')).toContain(refused.json.error.message);

    await page.getByLabel('API key', { exact: true }).fill(first);
    await page.getByRole('button', { name: 'Save key' }).click();
    await page.getByText(`Saved the ${provider} key (...wxyz).`).waitFor();
    await row.getByText('...wxyz').waitFor();
    expect(await page.getByLabel('API key', { exact: true }).inputValue()).toBe('');
    expect(await page.content()).not.toContain(first);
    expect(await savedKeys()).toEqual([expect.objectContaining({ provider, hint: '...wxyz' })]);

    await row.getByRole('button', { name: `Replace the ${provider} key` }).click();
    // The key field is ready to paste into.
    await page.getByLabel('API key', { exact: true }).and(page.locator(':focus')).waitFor();
    await page.getByLabel('API key', { exact: true }).fill(second);
    await page.getByRole('button', { name: 'Save key' }).click();
    await page.getByText(`Replaced the ${provider} key (...abcd).`).waitFor();
    await row.getByText('...abcd').waitFor();
    const html = await page.content();
    expect(html).not.toContain(first);
    expect(html).not.toContain(second);
    expect(await savedKeys()).toEqual([expect.objectContaining({ provider, hint: '...abcd' })]);

    await screenshot(page, 'provider-keys-desktop');
    await phoneShot(h, management, 'Provider keys', 'provider-keys-phone');

    await row.getByRole('button', { name: 'Delete' }).click();
    await openDialog(page, `Delete the ${provider} key?`).getByRole('button', { name: 'Delete key' }).click();
    await page.getByText(`Deleted the ${provider} key.`).waitFor();
    await row.getByText('none: the gateway’s key is used').waitFor();
    expect(await savedKeys()).toEqual([]);

    // A gateway without SVC_ENCRYPTION_KEY answers 503 byok_unavailable (the harness always has
    // one, so that answer is played back here): a notice in words, not a field error.
    const unavailable = byokUnavailable();
    await page.route('**/v1/provider-keys/*', (route) =>
      route.request().method() === 'PUT'
        ? route.fulfill({
            status: 503,
            contentType: 'application/json',
            body: JSON.stringify({ error: { message: unavailable.message, type: 'service_unavailable', code: 'byok_unavailable', param: null } }),
          })
        : route.fallback(),
    );
    await row.getByRole('button', { name: `Add a key for ${provider}` }).click();
    await page.getByLabel('API key', { exact: true }).fill(first);
    await page.getByRole('button', { name: 'Save key' }).click();
    const notice = page.getByRole('alert').filter({ hasText: 'Provider keys cannot be saved on this gateway.' });
    await notice.waitFor();
    expect(await notice.textContent()).toContain(unavailable.message);
    await page.unroute('**/v1/provider-keys/*');
    await page.getByLabel('API key', { exact: true }).fill('');

    // The browser's line for the played-back 503 was provoked on purpose; nothing else may be there.
    tab.errors.splice(0, tab.errors.length, ...tab.errors.filter((e) => !e.includes('status of 503 (Service Unavailable)')));
    expect(unexpectedErrors(tab)).toEqual([]);
  });

  it('creates an organization, adds, re-roles and removes a member, and deletes it', async () => {
    const other = (await h.root('POST', '/admin/accounts', { headers: admin, body: { initial_credits_usd: 1 } })).json.id as string;
    const otherKey = (await h.root('POST', `/admin/accounts/${other}/keys`, { headers: admin, body: { name: 'other console', scope: 'management' } })).json
      .key as string;
    const members = async (orgId: string) =>
      (await h.call('GET', `/organizations/${orgId}/members`, { key: management })).json.data as { account_id: string; role: string }[];

    await goTo(page, 'Organizations');
    await page.getByText('This account is in no organization yet.').waitFor();
    await page.getByLabel('Name', { exact: true }).fill('Console test org');
    await page.getByRole('button', { name: 'Create organization' }).click();
    await page.getByText('Created Console test org.').waitFor();
    const orgs = (await h.call('GET', '/organizations', { key: management })).json.data;
    expect(orgs).toEqual([expect.objectContaining({ name: 'Console test org', role: 'owner', owner_account_id: h.gw.keys.account_id })]);
    const orgId = orgs[0].id as string;
    const table = page.getByRole('region', { name: 'Members of Console test org' });
    await table.getByRole('row').filter({ hasText: h.gw.keys.account_id }).getByText('owner').waitFor();

    // An account that does not exist: the API's words next to the account id.
    await page.getByLabel('Account id', { exact: true }).fill('acc_nobody');
    await page.getByRole('button', { name: 'Add member' }).click();
    await page.getByRole('alert').waitFor();
    const refused = await h.call('POST', `/organizations/${orgId}/members`, { key: management, body: { account_id: 'acc_nobody', role: 'member' } });
    expect(refused.json.error).toMatchObject({ code: 'account_not_found', param: 'account_id' });
    expect(await descriptionOf(page, 'Account id')).toContain(refused.json.error.message);

    await page.getByLabel('Account id', { exact: true }).fill(other);
    await page.getByLabel('Role', { exact: true }).selectOption('admin');
    await page.getByRole('button', { name: 'Add member' }).click();
    await page.getByText(`Added ${other} as admin.`).waitFor();
    expect(await members(orgId)).toEqual([expect.objectContaining({ role: 'owner' }), expect.objectContaining({ account_id: other, role: 'admin' })]);

    // The admin, in their own console, sees the member controls...
    const theirs = await openSignedIn(h, 'desktop', otherKey);
    await goTo(theirs.page, 'Organizations');
    await theirs.page.getByRole('link', { name: 'Members of Console test org' }).click();
    await theirs.page.getByRole('heading', { level: 2, name: /Console test org\s+admin/ }).waitFor();
    expect(await theirs.page.getByRole('button', { name: 'Delete organization' }).count()).toBe(0);

    // ...and, once the owner makes them a member, the API's 403 in words when they still use them.
    await table.getByRole('button', { name: `Make ${other} a member` }).click();
    await page.getByText(`${other} is now a member.`).waitFor();
    expect(await members(orgId)).toEqual([expect.objectContaining({ role: 'owner' }), expect.objectContaining({ account_id: other, role: 'member' })]);
    await theirs.page.getByLabel('Account id', { exact: true }).fill(h.gw.keys.account_id);
    await theirs.page.getByRole('button', { name: 'Add member' }).click();
    await theirs.page.getByRole('alert').filter({ hasText: "Only the organization's owner and admins manage its members." }).waitFor();
    expect(unexpectedErrors(theirs)).toEqual([]);
    await theirs.context.close();

    await screenshot(page, 'organizations-desktop');
    await phoneShot(h, management, 'Organizations', 'organizations-phone', (phone) => phone.getByRole('link', { name: 'Members of Console test org' }).click());

    await table.getByRole('row').filter({ hasText: other }).getByRole('button', { name: 'Remove' }).click();
    await openDialog(page, `Remove ${other} from Console test org?`).getByRole('button', { name: 'Remove member' }).click();
    await page.getByText(`Removed ${other}.`).waitFor();
    expect(await members(orgId)).toEqual([expect.objectContaining({ account_id: h.gw.keys.account_id, role: 'owner' })]);

    await page.getByRole('button', { name: 'Delete organization' }).click();
    await openDialog(page, 'Delete Console test org?').getByRole('button', { name: 'Delete organization' }).click();
    await page.getByText('Deleted Console test org.').waitFor();
    await page.getByText('This account is in no organization yet.').waitFor();
    expect((await h.call('GET', '/organizations', { key: management })).json.data).toEqual([]);

    expect(unexpectedErrors(tab)).toEqual([]);
  });

  it('lists the changes just made, filters them by action and dates, and says what a filter got wrong', async () => {
    const log = (await h.call('GET', '/audit-log', { key: management })).json.data as { action: string }[];
    const made = [
      'provider_key.saved',
      'provider_key.deleted',
      'org.created',
      'org.member_added',
      'org.member_role_changed',
      'org.member_removed',
      'org.deleted',
    ];
    expect(log.map((e) => e.action)).toEqual(expect.arrayContaining(made));

    await goTo(page, 'Audit log');
    const entries = page.getByRole('region', { name: 'Audit log entries' });
    await entries.waitFor();
    for (const action of made) await entries.getByRole('cell', { name: action, exact: true }).first().waitFor();
    const addedRow = entries.getByRole('row').filter({ has: page.getByRole('cell', { name: 'org.member_added', exact: true }) });
    expect(await addedRow.textContent()).toMatch(/acc_\w+ as admin/);
    expect(await addedRow.textContent()).toContain('Key ');

    // Only the saves: the first save and the replacement.
    await page.getByLabel('Action', { exact: true }).fill('provider_key.saved');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await until('the two saves alone', async () => (await entries.getByRole('row').count()) === 3);
    const actions = await entries.getByRole('row').locator('td:nth-child(4)').allTextContents();
    expect(actions).toEqual(['provider_key.saved', 'provider_key.saved']);
    expect(await entries.textContent()).toContain('...abcd');

    // Today, inclusive of its end: the same two.
    await page.getByLabel('From (UTC)', { exact: true }).fill(today());
    await page.getByLabel('To (UTC, included)', { exact: true }).fill(today());
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('2 entries.').waitFor();

    // A range that ends before it starts: said next to the end date, nothing asked of the API.
    await page.getByLabel('To (UTC, included)', { exact: true }).fill(yesterday());
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('Fix the filter marked above to see entries.').waitFor();
    expect(await descriptionOf(page, 'To (UTC, included)')).toContain('is before the start date');

    // A start the API refuses (a five-digit year a date input allows): its words next to it.
    await page.getByLabel('To (UTC, included)', { exact: true }).fill('');
    await page.getByLabel('From (UTC)', { exact: true }).fill('20000-01-01');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    const since = await h.call('GET', '/audit-log?since=20000-01-01T00:00:00Z', { key: management });
    expect(since.json.error).toMatchObject({ param: 'since' });
    await page.getByText(since.json.error.message).waitFor();
    expect(await descriptionOf(page, 'From (UTC)')).toContain(since.json.error.message);

    // An action that is not one: the API's words next to the action.
    await page.getByLabel('From (UTC)', { exact: true }).fill('');
    await page.getByLabel('Action', { exact: true }).fill('Key Created');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    const action = await h.call('GET', '/audit-log?action=Key%20Created', { key: management });
    expect(action.json.error).toMatchObject({ param: 'action' });
    await page.getByText(action.json.error.message).waitFor();
    expect(await descriptionOf(page, 'Action')).toContain(action.json.error.message);

    await page.getByRole('button', { name: 'Clear filters' }).click();
    await entries.getByRole('cell', { name: 'org.deleted', exact: true }).waitFor();

    // The key that made a change by its name, as the Keys page lists it, its id under the name.
    const signedIn = ((await h.call('GET', '/keys', { key: management })).json.data as { id: string; name: string }[]).find(
      (k) => k.name === 'dev management key',
    )!;
    const actor = entries
      .getByRole('row')
      .filter({ has: page.getByRole('cell', { name: 'org.created', exact: true }) })
      .locator('td:nth-child(2)');
    await actor.getByText('Key “dev management key”').waitFor();
    expect(await actor.textContent()).toBe(`Key “dev management key”${signedIn.id}`);

    // At a laptop's size every column is in view, none behind a sideways scroll.
    const desktop = await tableFit(page, 'Audit log entries');
    expect(desktop.content).toBeLessThanOrEqual(desktop.visible);
    await screenshot(page, 'audit-log-desktop');
    await phoneShot(h, management, 'Audit log', 'audit-log-phone', async (phone) => {
      // A phone is narrower than the table: it scrolls inside its own box.
      const fit = await tableFit(phone, 'Audit log entries');
      expect(fit.content <= fit.visible || fit.scrolls).toBe(true);
    });
    expect(unexpectedErrors(tab)).toEqual([]);
  });
});
