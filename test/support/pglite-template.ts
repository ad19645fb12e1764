import { cpSync, existsSync } from 'node:fs';
import { embeddedDbDir } from '@svc/runtime';

/**
 * Gives a new data directory the PGlite cluster that global-setup.js initialised once for the
 * run, with the tables a gateway's first start makes, as a copy, so that the gateway opens it
 * instead of initialising its own: PGlite's initdb takes ~5 s under WASM, the tables 1-2 s more
 * on a loaded machine, and a copy to memory a tenth of a second. A directory that already has one
 * keeps it. The product's own first start, which initialises, is still run by the suites that
 * start the built server (server-process.ts).
 */
export function seedPglite(dataDir: string): void {
  const template = process.env.SVC_TEST_PGLITE_TEMPLATE;
  const target = embeddedDbDir(dataDir);
  if (!template || existsSync(target)) return;
  cpSync(template, target, { recursive: true });
}
