import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { CHROMIUM, launchBrowser } from './browser';
import { api, startGateway, stopGateway, type Call, type StartedGateway } from './gateway';
import { until } from './until';

// Required by the suites that read mail: loading it takes most of a second.
const mailparser = () => require('mailparser') as typeof import('mailparser');

/** Where a run keeps the console's screenshots (not committed: test-output/ is ignored). */
export const SCREENSHOT_DIR = join(__dirname, '..', '..', 'test-output', 'console');

/** The console as `npm run build` makes it; SVC_CONSOLE_DIR points a run at another build. */
const CONSOLE_DIR = process.env.SVC_CONSOLE_DIR ?? join(__dirname, '..', '..', 'dist', 'console');

const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) {
  // One line, once per suite file that needs the browser; every other suite runs as usual.
  process.stdout.write(`Chromium is missing at ${CHROMIUM} (apt-get install chromium): the console's browser tests are skipped.\n`);
}

/** `describe` for the browser suites: skipped, with the one line above, when Chromium is missing. */
export const describeConsole: jest.Describe = hasChromium ? describe : describe.skip;

export const VIEWPORTS = {
  desktop: { width: 1280, height: 800 },
  phone: { width: 390, height: 844 },
} as const;

export interface ConsoleHarness {
  gw: StartedGateway;
  /** The console's address: `http://127.0.0.1:<port>/console/`. */
  consoleUrl: string;
  /** The gateway's root, for the operator API under /admin. */
  rootUrl: string;
  /** A JSON caller on /v1 (`call('GET', '/credits', { key })`). */
  call: Call;
  /** A JSON caller on the root (`root('POST', '/admin/accounts', ...)`). */
  root: Call;
  browser: Browser;
  /** A desktop tab signed in with the dev management key. */
  tab: ConsoleTab;
  /** The phone-size tab of `phoneShot`, signed in once and kept until `stopConsole`. */
  phone?: { key: string; tab: Promise<ConsoleTab> };
}

/**
 * A gateway on the embedded defaults serving the built console, Chromium, and a desktop tab signed
 * in with the dev management key. Chromium and the tab start while the gateway does: each takes
 * seconds, and neither needs the other until the tab loads the console.
 */
export async function startConsole(env: Record<string, string> = {}): Promise<ConsoleHarness> {
  const [gateway, chromium] = await Promise.allSettled([
    startGateway({ SVC_CONSOLE_DIR: CONSOLE_DIR, ...env }),
    launchBrowser().then(async (browser) => {
      try {
        return { browser, tab: await newTab(browser, 'desktop') };
      } catch (error) {
        await browser.close();
        throw error;
      }
    }),
  ]);
  if (gateway.status === 'rejected' || chromium.status === 'rejected') {
    // The one that started is stopped, or the suite's process would not end.
    if (chromium.status === 'fulfilled') await chromium.value.browser.close();
    if (gateway.status === 'fulfilled') await stopGateway(gateway.value);
    throw gateway.status === 'rejected' ? gateway.reason : (chromium as PromiseRejectedResult).reason;
  }
  const gw = gateway.value;
  const { browser, tab } = chromium.value;
  const rootUrl = gw.url.replace(/\/v1\/?$/, '');
  const harness: ConsoleHarness = { gw, consoleUrl: `${rootUrl}/console/`, rootUrl, call: api(gw.url), root: api(rootUrl), browser, tab };
  try {
    await load(harness, tab);
    await signIn(tab.page, gw.keys.management_key);
  } catch (error) {
    await stopConsole(harness);
    throw error;
  }
  return harness;
}

export async function stopConsole(harness: ConsoleHarness | undefined): Promise<void> {
  await harness?.phone?.tab.then(
    (phone) => phone.context.close(),
    () => undefined,
  );
  await harness?.browser.close();
  await stopGateway(harness?.gw);
}

export interface ConsoleTab {
  context: BrowserContext;
  page: Page;
  /** Every console error and uncaught page error seen so far: a test ends expecting none. */
  errors: string[];
}

/** A tab with its own context (its own session storage) at the given size, on no page yet. */
async function newTab(browser: Browser, viewport: keyof typeof VIEWPORTS): Promise<ConsoleTab> {
  const context = await browser.newContext({ viewport: VIEWPORTS[viewport] });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(String(error)));
  return { context, page, errors };
}

async function load(harness: ConsoleHarness, tab: ConsoleTab): Promise<void> {
  await tab.page.goto(harness.consoleUrl);
  // A step that never comes fails as itself, well before the test's own timeout.
  tab.context.setDefaultTimeout(10_000);
}

/** A fresh tab (its own session storage) on the console at the given size. */
export async function openConsole(harness: ConsoleHarness, viewport: keyof typeof VIEWPORTS = 'desktop'): Promise<ConsoleTab> {
  const tab = await newTab(harness.browser, viewport);
  await load(harness, tab);
  return tab;
}

/** Signs in with a management key through the form, as a person does, and waits for the shell. */
export async function signIn(page: Page, key: string): Promise<void> {
  await page.getByLabel('Management key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Console pages' }).waitFor();
}

/** A fresh tab signed in with `key`. */
export async function openSignedIn(harness: ConsoleHarness, viewport: keyof typeof VIEWPORTS, key: string): Promise<ConsoleTab> {
  const tab = await openConsole(harness, viewport);
  await signIn(tab.page, key);
  return tab;
}

/**
 * A page of the console at phone size (`open` goes further in, to a detail), screenshot as
 * `name`, expecting no console error. The suite's phone tab is signed in once: a new tab loads
 * the console and signs in again, seconds a shot.
 */
export async function phoneShot(harness: ConsoleHarness, key: string, navLabel: string, name: string, open?: (page: Page) => Promise<unknown>): Promise<void> {
  if (harness.phone && harness.phone.key !== key) throw new Error(`the phone tab is signed in with another key than ${key}`);
  harness.phone ??= { key, tab: openSignedIn(harness, 'phone', key) };
  const phone = await harness.phone.tab;
  await freshVisit(phone.page, navLabel);
  await open?.(phone.page);
  await screenshot(phone.page, name);
  expect(unexpectedErrors(phone)).toEqual([]);
}

/**
 * Goes to a page as a new tab would see it: scrolled to the start (the page, and the navigation,
 * which scrolls sideways on a phone), and mounted anew (its data read again, nothing left open
 * from the last visit), by way of another page when the tab is on it already.
 */
async function freshVisit(page: Page, label: string): Promise<void> {
  const nav = page.getByRole('navigation', { name: 'Console pages' });
  const current = await nav.locator('a[aria-current="page"]').textContent();
  // (A string, as the suites are typed without the DOM.)
  await page.evaluate('window.scrollTo(0, 0); document.querySelector(\'nav[aria-label="Console pages"]\').scrollTo(0, 0)');
  if (current === label) await goTo(page, label === 'Security' ? 'Keys' : 'Security');
  await goTo(page, label);
}

/**
 * Clicks the page's Refresh every 100 ms until `listed` is true of the list it shows, looking each
 * time once the list's new answer (a GET of `listPath` on /v1) is on the page: a list refreshed
 * on a fixed beat waits out the rest of the beat after the answer has come.
 */
export async function refreshUntil(page: Page, what: string, listPath: string, listed: () => Promise<boolean | undefined>, timeoutMs = 15_000): Promise<void> {
  await until(
    what,
    async () => {
      const answered = page.waitForResponse((r) => r.request().method() === 'GET' && new URL(r.url()).pathname === `/v1${listPath}`);
      await page.getByRole('button', { name: 'Refresh', exact: true }).click();
      await answered;
      // Enabled again once the answer is rendered: the list no longer loads.
      await page.getByRole('button', { name: 'Refresh', exact: true, disabled: false }).waitFor();
      return listed();
    },
    timeoutMs,
    100,
  );
}

/** Goes to a page of the console by its navigation link and waits for its heading. */
export async function goTo(page: Page, label: string, heading = label): Promise<void> {
  await page.getByRole('navigation', { name: 'Console pages' }).getByRole('link', { name: label, exact: true }).click();
  await page.getByRole('heading', { level: 1, name: heading }).waitFor();
}

/**
 * Saves a screenshot of the whole page under test-output/console/<name>.png. Some API errors are
 * expected in a test (a refused request logs a failed resource load); a test filters those itself.
 */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const path = join(SCREENSHOT_DIR, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/**
 * Console errors other than the browser's own line for a request the API refused
 * ("Failed to load resource: ... 4xx"), which a test that provokes an error expects.
 */
export function unexpectedErrors(tab: ConsoleTab): string[] {
  return tab.errors.filter((e) => !/^Failed to load resource: the server responded with a status of (4\d\d)/.test(e));
}

/** The text that describes a control (its hint, its error), as a screen reader reads it. */
export async function descriptionOf(page: Page, label: string): Promise<string> {
  const ids = ((await page.getByLabel(label, { exact: true }).getAttribute('aria-describedby')) ?? '').split(' ').filter(Boolean);
  const texts = await Promise.all(ids.map((id) => page.locator(`[id="${id}"]`).textContent()));
  return texts.join(' ');
}

/** The open dialog with this title. */
export const openDialog = (page: Page, title: string): Locator =>
  page.getByRole('dialog').filter({ has: page.getByRole('heading', { name: title, exact: true }) });

/** The files of the development mailbox (<dataDir>/mail/), none before its first mail. */
export function mailFiles(dataDir: string): string[] {
  try {
    return readdirSync(join(dataDir, 'mail'));
  } catch {
    return [];
  }
}

/**
 * The newest step-up mail that is not one of `before` (the mailbox's files before the action),
 * with its code; undefined until it has come, for `until`. .eml names start with their ISO time,
 * so the last name is the newest.
 */
export async function stepUpMail(dataDir: string, before: string[]): Promise<{ text: string; code: string } | undefined> {
  const newest = mailFiles(dataDir)
    .filter((f) => f.endsWith('.eml') && !before.includes(f))
    .sort()
    .at(-1);
  if (!newest) return undefined;
  const text = (await mailparser().simpleParser(readFileSync(join(dataDir, 'mail', newest)))).text ?? '';
  const code = /code for .*? is (\d{6})\./s.exec(text)?.[1];
  return code ? { text, code } : undefined;
}

/**
 * A table's region as laid out: its visible width, the width of the table inside it, and whether
 * the region scrolls sideways (the only way to reach columns wider than it).
 */
export async function tableFit(page: Page, label: string): Promise<{ visible: number; content: number; scrolls: boolean }> {
  const region = page.getByRole('region', { name: label, exact: true });
  await region.getByRole('row').first().waitFor();
  // A string, as the suites are typed without the DOM.
  return page.evaluate<{ visible: number; content: number; scrolls: boolean }>(`(() => {
    const box = document.querySelector('[role="region"][aria-label=${JSON.stringify(label)}]');
    return { visible: box.clientWidth, content: box.scrollWidth, scrolls: ['auto', 'scroll'].includes(getComputedStyle(box).overflowX) };
  })()`);
}
