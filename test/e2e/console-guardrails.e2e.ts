import { randomUUID } from 'node:crypto';
import type { Page } from 'playwright-core';
import { accountDecider, accountStream, type AccountCommand } from '@svc/ledger';
import { placeHold, stats } from '@svc/ledger/testing/account-fixtures';
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

/** The first instant of next month, UTC: when a monthly budget's window ends. */
const nextMonth = () => {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString();
};

/**
 * Issue 44: the console's Guardrails page, as the workspace's owner uses it (create with a field
 * error first, the list with its rules, a key assigned and its budget after a charge, the whole
 * workspace, an edit, delete) and as an organization member meets it (the API's 403 in words).
 */
describeConsole('console: guardrails page', () => {
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

  const guardrails = async () => (await h.call('GET', '/guardrails', { key: management })).json.data as { id: string; name: string }[];

  it('creates a guardrail, assigns a key, shows its budget after a charge, edits and deletes it', async () => {
    const key = (await h.call('GET', '/key', { key: h.gw.keys.api_key })).json.data as { id: string; name: string };
    await goTo(page, 'Guardrails');
    await page.getByText('No guardrails yet.').waitFor();

    // A limit finer than a nano-dollar: the API's words next to the limit, nothing created.
    await page.getByRole('button', { name: 'New guardrail' }).click();
    await page.getByLabel('Name', { exact: true }).fill('Support team');
    await page.getByLabel('Budget limit (USD)', { exact: true }).fill('0.0000000001');
    await page.getByRole('button', { name: 'Create guardrail' }).click();
    await page.getByRole('alert').waitFor();
    const refused = await h.call('POST', '/guardrails', { key: management, body: { name: 'Support team', limit_usd: 0.0000000001 } });
    expect(refused.json.error).toMatchObject({ param: 'limit_usd' });
    expect(await descriptionOf(page, 'Budget limit (USD)')).toContain(refused.json.error.message);
    await screenshot(page, 'guardrails-field-error-desktop');
    expect(await guardrails()).toEqual([]);

    await page.getByLabel('Budget limit (USD)', { exact: true }).fill('12.50');
    await page.getByLabel('Description', { exact: true }).fill('For the support team');
    await page.getByLabel('Allowed models', { exact: true }).fill('sim/echo, sim/echo-2');
    await page.getByLabel('Ignored providers', { exact: true }).fill('sim-slow');
    await page.getByLabel('Zero data retention only').check();
    await page.getByLabel('Email addresses', { exact: true }).selectOption('redact');
    await page.getByRole('button', { name: 'Add pattern' }).click();
    await page.getByLabel('Pattern 1', { exact: true }).fill('(?i)project falcon');
    await page.getByLabel('Action of pattern 1').selectOption('block');
    await page.getByLabel('Label of pattern 1').fill('FALCON');
    await page.getByRole('button', { name: 'Create guardrail' }).click();
    await page.getByText('Created Support team.').waitFor();
    const [created] = (await h.call('GET', '/guardrails', { key: management })).json.data;
    expect(created).toMatchObject({
      name: 'Support team',
      description: 'For the support team',
      limit_usd: 12.5,
      reset_interval: 'monthly',
      allowed_models: ['sim/echo', 'sim/echo-2'],
      ignored_models: [],
      allowed_providers: null,
      ignored_providers: ['sim-slow'],
      enforce_zdr: true,
      content_filter_builtins: [{ slug: 'email', action: 'redact' }],
      content_filters: [{ pattern: '(?i)project falcon', action: 'block', label: 'FALCON' }],
    });
    const id = created.id as string;

    const card = page.getByRole('region', { name: /^Support team/ });
    const facts = card.locator('dl');
    await facts.getByText('$12.50 monthly').waitFor();
    expect(await facts.textContent()).toContain('models: only sim/echo, sim/echo-2; providers: not sim-slow; zero data retention only');
    expect(await facts.textContent()).toContain('2 (email: redact, 1 pattern)');
    expect(await facts.textContent()).toContain('nothing yet');

    // A key from the workspace's keys.
    await card.getByRole('button', { name: 'Assignments of Support team' }).click();
    await card.getByLabel('Key to assign').selectOption(key.id);
    await card.getByRole('button', { name: 'Assign key' }).click();
    await page.getByText(`Assigned key ${key.name} to Support team.`).waitFor();
    const assigned = (await h.call('GET', `/guardrails/${id}/assignments/keys`, { key: management })).json.data;
    expect(assigned.map((a: { key_id: string }) => a.key_id)).toEqual([key.id]);
    await facts.getByText(`keys: ${key.name}`).waitFor();

    // $2 charged and $0.50 held on the key under the guardrail's budget, as a request admitted under it makes them.
    const budgets = [{ guardrailId: id, name: 'Support team', scope: 'key' as const, subject: key.id, limitNano: 12_500_000_000n, reset: 'monthly' as const }];
    const ledger = (command: AccountCommand) => h.gw.runtime.aggregates.handle(accountDecider, accountStream(h.gw.keys.account_id), command);
    const chargedHold = `gen-${randomUUID()}`;
    await ledger(placeHold(chargedHold, 3_000_000_000n, { keyId: key.id, budgets }));
    await ledger({ type: 'ChargeUsage', holdId: chargedHold, amountNano: 2_000_000_000n, stats: stats() });
    const open = await ledger(placeHold(`gen-${randomUUID()}`, 500_000_000n, { keyId: key.id, budgets }));
    await h.gw.runtime.projections.waitFor(open.appended!.position);
    const detail = (await h.call('GET', `/guardrails/${id}`, { key: management })).json.data;
    expect(detail.budgets).toEqual([
      { scope: 'key', subject: key.id, spent_usd: 2, held_usd: 0.5, remaining_usd: 10, window_start: expect.any(String), resets_at: nextMonth() },
    ]);

    await page.getByRole('button', { name: 'Refresh' }).click();
    const budgetTable = page.getByRole('region', { name: 'Budgets of Support team' });
    const row = budgetTable.getByRole('row').filter({ hasText: key.name });
    await row.getByText('$10.00 of $12.50').waitFor();
    expect(await row.getByRole('cell').allTextContents()).toEqual(['$2.00', '$0.50', '$10.00 of $12.50', `${nextMonth().slice(0, 10)} 00:00 UTC`]);

    // The whole workspace: a second budget of its own, nothing spent in it.
    await card.getByRole('button', { name: 'Apply to every key' }).click();
    await page.getByText('Support team now applies to every key of the workspace.').waitFor();
    await card.getByText('workspace-wide', { exact: true }).waitFor();
    await budgetTable.getByRole('row').filter({ hasText: 'Whole workspace' }).getByText('$12.50 of $12.50').waitFor();
    const over = (await h.call('GET', '/key', { key: h.gw.keys.api_key })).json.data.guardrails as { id: string; scope: string }[];
    expect(over.map((g) => [g.id, g.scope])).toEqual([
      [id, 'organization'],
      [id, 'key'],
    ]);
    // The assignments of the personal workspace: no members to pick.
    expect(await card.getByText('it has no members to assign').count()).toBe(1);

    const desktop = await tableFit(page, 'Budgets of Support team');
    expect(desktop.content).toBeLessThanOrEqual(desktop.visible);
    await screenshot(page, 'guardrails-desktop');
    await phoneShot(h, management, 'Guardrails', 'guardrails-phone', async (phone) => {
      await phone.getByRole('button', { name: 'Assignments of Support team' }).click();
      await phone.getByRole('region', { name: 'Budgets of Support team' }).getByText('$10.00 of $12.50').waitFor();
      // Nothing wider than the phone: the page never scrolls sideways.
      expect(await phone.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    });

    await phoneShot(h, management, 'Guardrails', 'guardrails-edit-phone', async (phone) => {
      await phone.getByRole('button', { name: 'Edit Support team' }).click();
      await phone.getByRole('heading', { name: 'Edit Support team' }).waitFor();
      expect(await phone.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    });

    // An edit sends what changed; the rest stays.
    await card.getByRole('button', { name: 'Edit Support team' }).click();
    expect(await page.getByLabel('Allowed models', { exact: true }).inputValue()).toBe('sim/echo, sim/echo-2');
    await page.getByLabel('Budget limit (USD)', { exact: true }).fill('20');
    await page.getByLabel('Allowed models', { exact: true }).fill('');
    await screenshot(page, 'guardrails-edit-desktop');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByText('Saved Support team.').waitFor();
    expect((await h.call('GET', `/guardrails/${id}`, { key: management })).json.data).toMatchObject({
      limit_usd: 20,
      allowed_models: null,
      ignored_providers: ['sim-slow'],
      content_filters: [{ pattern: '(?i)project falcon', action: 'block', label: 'FALCON' }],
    });
    await row.getByText('$17.50 of $20.00').waitFor();

    await card.getByRole('button', { name: `Unassign ${key.name}` }).click();
    await page.getByText(`Unassigned key ${key.name} from Support team.`).waitFor();
    expect((await h.call('GET', `/guardrails/${id}/assignments/keys`, { key: management })).json.data).toEqual([]);

    await card.getByRole('button', { name: 'Delete', exact: true }).click();
    await openDialog(page, 'Delete Support team?').getByRole('button', { name: 'Delete guardrail' }).click();
    await page.getByText('Deleted Support team.').waitFor();
    await page.getByText('No guardrails yet.').waitFor();
    expect(await guardrails()).toEqual([]);
    expect(unexpectedErrors(tab)).toEqual([]);
  });

  it("in an organization, the owner assigns a member; a member sees the API's refusal in words, and no controls", async () => {
    const account = async () => (await h.root('POST', '/admin/accounts', { headers: admin, body: { initial_credits_usd: 1 } })).json.id as string;
    const [owner, member] = await Promise.all([account(), account()]);
    const org = (await h.root('POST', '/admin/orgs', { headers: admin, body: { owner_account_id: owner, name: 'Acme' } })).json.id as string;
    expect((await h.root('POST', `/admin/orgs/${org}/members`, { headers: admin, body: { account_id: member, role: 'member' } })).status).toBe(201);
    const managementKey = async (accountId: string) =>
      (await h.root('POST', `/admin/accounts/${accountId}/keys`, { headers: admin, body: { scope: 'management', org_id: org } })).json.key as string;
    const [ownerKey, memberKey] = await Promise.all([managementKey(owner), managementKey(member)]);

    // The owner picks the member from the organization's people.
    const created = await h.call('POST', '/guardrails', { key: ownerKey, body: { name: 'Interns', allowed_models: ['sim/echo'] } });
    expect(created.status).toBe(201);
    // Each tab takes seconds to load the console and sign in, and neither needs the other.
    const [ownerTab, theirs] = await Promise.all([openSignedIn(h, 'desktop', ownerKey), openSignedIn(h, 'desktop', memberKey)]);
    try {
      await goTo(ownerTab.page, 'Guardrails');
      const card = ownerTab.page.getByRole('region', { name: 'Interns' });
      await card.getByRole('button', { name: 'Assignments of Interns' }).click();
      await card.getByLabel('Member to assign').selectOption(member);
      await card.getByRole('button', { name: 'Assign member' }).click();
      await ownerTab.page.getByText(`Assigned member ${member} to Interns.`).waitFor();
      await card.locator('dl').getByText(`members: ${member}`).waitFor();
      const members = (await h.call('GET', `/guardrails/${created.json.data.id}/assignments/members`, { key: ownerKey })).json.data;
      expect(members.map((m: { member_id: string }) => m.member_id)).toEqual([member]);
      await screenshot(ownerTab.page, 'guardrails-org-desktop');
      expect(unexpectedErrors(ownerTab)).toEqual([]);
    } finally {
      await ownerTab.context.close();
    }

    const refused = await h.call('GET', '/guardrails', { key: memberKey });
    expect([refused.status, refused.json.error.code]).toEqual([403, 'org_role_required']);

    try {
      await goTo(theirs.page, 'Guardrails');
      await theirs.page.getByRole('heading', { name: 'Managed by the owner and admins' }).waitFor();
      await theirs.page.getByRole('alert').filter({ hasText: refused.json.error.message }).waitFor();
      expect(await theirs.page.getByRole('button', { name: 'New guardrail' }).count()).toBe(0);
      await screenshot(theirs.page, 'guardrails-member-desktop');
      expect(unexpectedErrors(theirs)).toEqual([]);
    } finally {
      await theirs.context.close();
    }
  });
});
