'use strict';
// The hot account without HTTP: 256 requests in flight on one account, each a PlaceHold then a
// ChargeUsage through the aggregate store, on the bench's PostgreSQL event store. Tells the
// ledger's own ceiling apart from the per-request cost of the HTTP path.
// Usage: DATABASE_URL=... node hot-ledger.js <app root> [requests] [in flight]
// Prints one JSON line: billed requests/s and the aggregate store's counters.
const path = require('node:path');

const root = process.argv[2];
const requests = Number(process.argv[3] ?? 3072);
const inFlight = Number(process.argv[4] ?? 256);
const { PgSqlRunner } = require(path.join(root, 'dist/libs/platform/src/sql.js'));
const { SqlEventStore } = require(path.join(root, 'dist/libs/eventstore/src/sql-event-store.js'));
const { AggregateStore } = require(path.join(root, 'dist/libs/eventstore/src/aggregate-store.js'));
// No extension: account.js before the aggregate was split into account/, account/index.js since.
const { accountDecider, accountStream } = require(path.join(root, 'dist/libs/ledger/src/account'));
const { systemClock } = require(path.join(root, 'dist/libs/platform/src/clock.js'));

(async () => {
  const sql = await PgSqlRunner.connect({ connectionString: process.env.DATABASE_URL });
  try {
    const store = new SqlEventStore(sql);
    await store.init();
    const ledger = new AggregateStore(store, systemClock);
    const account = `hot-ledger-${Date.now()}`;
    const stream = accountStream(account);
    await ledger.handle(accountDecider, stream, { type: 'OpenAccount', accountId: account });
    await ledger.handle(accountDecider, stream, { type: 'AddCredits', amountNano: 10n ** 15n, reason: 'bench' });
    const stats = {
      model: 'sim/echo',
      provider: 'sim',
      endpoint: '/v1/chat/completions',
      prompt_tokens: 10,
      completion_tokens: 5,
      cached_tokens: 0,
      reasoning_tokens: 0,
      latency_ms: 1,
      ttft_ms: null,
    };
    const before = { ...ledger.stats };
    let next = 0;
    const t0 = process.hrtime.bigint();
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < requests) {
          const holdId = `${account}-h${next++}`;
          await ledger.handle(accountDecider, stream, {
            type: 'PlaceHold',
            holdId,
            keyId: 'k',
            amountNano: 100_000n,
            model: 'sim/echo',
            endpoint: '/v1/chat/completions',
            ttlMs: 600_000,
            keyLimit: null,
          });
          await ledger.handle(accountDecider, stream, { type: 'ChargeUsage', holdId, amountNano: 50_000n, stats });
        }
      }),
    );
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    const delta = Object.fromEntries(Object.entries(ledger.stats).map(([k, v]) => [k, v - before[k]]));
    console.log(JSON.stringify({ requests, in_flight: inFlight, ms, billed_rps: Math.round((requests / ms) * 1000), ...delta }));
  } finally {
    await sql.close();
  }
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
