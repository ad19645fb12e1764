import { chromium, type Browser } from 'playwright-core';

/** Debian's Chromium, installed by .ci/run (`apt-get install chromium`). */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Headless Chromium as this machine needs it (Playwright gives it a fresh profile): no sandbox
 * (tests run as root), and none of the background connections a closed network refuses by the
 * dozen.
 */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
