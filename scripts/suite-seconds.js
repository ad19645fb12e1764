// Writes test/support/suite-seconds.json, the suites' run times the test sequencer starts from
// on a machine whose jest cache is empty, from a run's report:
//   node node_modules/jest/bin/jest.js --json --outputFile=/tmp/report.json ...
//   node scripts/suite-seconds.js /tmp/report.json
const { existsSync, readFileSync, writeFileSync } = require('node:fs');
const { dirname, join, relative } = require('node:path');

const root = join(__dirname, '..');
const report = JSON.parse(readFileSync(process.argv[2], 'utf8'));
// The report may come from another clone (a CI run's): its paths are made relative to that
// clone's root, the nearest directory above the suite with a package.json.
const cloneRoot = (file) => {
  let dir = dirname(file);
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
};
const seconds = Object.fromEntries(
  report.testResults.map((r) => [relative(cloneRoot(r.name), r.name), Math.round((r.endTime - r.startTime) / 100) / 10]).sort(([a], [b]) => (a < b ? -1 : 1)),
);
const unknown = Object.keys(seconds).filter((suite) => !existsSync(join(root, suite)));
if (unknown.length > 0) throw new Error(`suites this checkout does not have: ${unknown.slice(0, 3).join(', ')}`);
writeFileSync(join(root, 'test', 'support', 'suite-seconds.json'), `${JSON.stringify(seconds, null, 2)}\n`);
console.log(
  `${Object.keys(seconds).length} suites, ${Object.values(seconds)
    .reduce((a, b) => a + b, 0)
    .toFixed(0)} s in all`,
);
