// Writes test/support/suite-seconds.json, the suites' run times the test sequencer starts from
// on a machine whose jest cache is empty, from a run's report:
//   node node_modules/jest/bin/jest.js --json --outputFile=/tmp/report.json ...
//   node scripts/suite-seconds.js /tmp/report.json
const { readFileSync, writeFileSync } = require('node:fs');
const { join, relative } = require('node:path');

const root = join(__dirname, '..');
const report = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const seconds = Object.fromEntries(
  report.testResults.map((r) => [relative(root, r.name), Math.round((r.endTime - r.startTime) / 100) / 10]).sort(([a], [b]) => (a < b ? -1 : 1)),
);
writeFileSync(join(root, 'test', 'support', 'suite-seconds.json'), `${JSON.stringify(seconds, null, 2)}\n`);
console.log(
  `${Object.keys(seconds).length} suites, ${Object.values(seconds)
    .reduce((a, b) => a + b, 0)
    .toFixed(0)} s in all`,
);
