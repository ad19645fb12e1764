'use strict';
// Times a rebuild of every projection from the PostgreSQL event store, through the built
// library (no CLI start-up in the timing): all together in one replay, then each alone.
// Usage: DATABASE_URL=... node rebuild.js <app root>
// Prints one JSON line: the total, then per projection {name, events, ms}.
const path = require('node:path');

const root = process.argv[2];
require(path.join(root, 'node_modules/reflect-metadata'));
const { loadConfig } = require(path.join(root, 'dist/libs/platform/src/config.js'));
const { createRuntime } = require(path.join(root, 'dist/libs/runtime/src/runtime.js'));

(async () => {
  const runtime = await createRuntime(loadConfig(process.env), { withProviders: false });
  try {
    const { rows } = await runtime.sql.query('SELECT count(*)::int AS n FROM events');
    const storeEvents = rows[0].n;
    // The headline: what `projections rebuild` does, every projection in one replay of the log.
    const t0 = process.hrtime.bigint();
    await runtime.projections.rebuild();
    const totalMs = Number(process.hrtime.bigint() - t0) / 1e6;
    // Each alone afterwards (reading the log on its own), to show where the time goes.
    const projections = [];
    for (const p of runtime.projections.projections) {
      const s = process.hrtime.bigint();
      const events = await runtime.projections.rebuild(p.name);
      projections.push({ name: p.name, events, ms: Number(process.hrtime.bigint() - s) / 1e6 });
    }
    console.log(JSON.stringify({ store_events: storeEvents, total_ms: totalMs, projections }));
  } finally {
    await runtime.close();
  }
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
