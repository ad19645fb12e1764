import { existsSync } from 'node:fs';
import { join } from 'node:path';

// The recorded times order a fresh machine's first run (test/support/slowest-first.js); a key
// that is not a suite's path relative to the root is silently never used, and the long suites
// then start last.
describe('the suites’ recorded times', () => {
  const root = join(__dirname, '..', '..');
  const recorded = require('./suite-seconds.json') as Record<string, number>;

  it('name suites of this checkout, by their path from its root', () => {
    const missing = Object.keys(recorded).filter((suite) => !existsSync(join(root, suite)));
    expect(missing).toEqual([]);
  });

  it('include the slow end-to-end suites', () => {
    const slow = Object.entries(recorded).filter(([suite, seconds]) => suite.startsWith('test/e2e/') && seconds >= 20);
    expect(slow.length).toBeGreaterThan(10);
  });
});
