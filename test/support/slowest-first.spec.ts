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

  // Relative, not in seconds: a faster machine records every suite shorter.
  it("are a run's: most of the twenty slowest are end-to-end suites, and they take more than half the time", () => {
    const bySeconds = Object.entries(recorded).sort(([, a], [, b]) => b - a);
    const slowest = bySeconds.slice(0, 20);
    expect(slowest.filter(([suite]) => suite.startsWith('test/e2e/')).length).toBeGreaterThan(10);
    const total = bySeconds.reduce((sum, [, seconds]) => sum + seconds, 0);
    const endToEnd = bySeconds.filter(([suite]) => suite.startsWith('test/e2e/')).reduce((sum, [, seconds]) => sum + seconds, 0);
    expect(endToEnd / total).toBeGreaterThan(0.5);
  });
});
