import { readFileSync } from 'node:fs';
import { PgliteSqlRunner } from '../sql';

/**
 * An in-memory PGlite runner started from the empty cluster test/support/global-setup.js wrote
 * once for the run (SVC_TEST_PGLITE_IMAGE), instead of running initdb of its own: under WASM that
 * is ~5 s a runner, paid again by every suite, and loading the image under one.
 */
export function memoryPglite(): Promise<PgliteSqlRunner> {
  const image = process.env.SVC_TEST_PGLITE_IMAGE;
  return PgliteSqlRunner.open(undefined, image ? new Blob([readFileSync(image)]) : undefined);
}
