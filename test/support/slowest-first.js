// Jest starts the slowest suites first only once its own cache (in the temp directory) has
// timed them. A fresh machine has no cache, and jest then sorts by file size: long e2e suites
// with short files start last, and one worker runs them alone while the other idles. The
// times recorded in suite-seconds.json stand in until the cache has its own.
// Refresh them from a run's JSON report: node scripts/suite-seconds.js <report.json>
const { relative } = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;
const recorded = require('./suite-seconds.json');

module.exports = class SlowestFirst extends Sequencer {
  time(test) {
    const cached = super.time(test);
    if (cached != null) return cached;
    const seconds = recorded[relative(test.context.config.rootDir, test.path)];
    return seconds == null ? undefined : seconds * 1000;
  }
};
