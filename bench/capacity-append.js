'use strict';
/**
 * The event store's append path alone, driven by bench/capacity.js: billed requests (a PlaceHold
 * then a ChargeUsage, as the gateway sends them) through the account decider and the aggregate
 * store on `SqlEventStore` (group commit, from dist/), with no HTTP and no upstream.
 *
 *   DATABASE_URL=... node bench/capacity-append.js <app root>
 *
 * Reads one JSON command a line on stdin, answers one JSON line on stdout:
 *   {"setup": "many", "accounts": 1000}  opens and funds that many accounts (scenario a)
 *   {"setup": "hot"}                     opens and funds one account (scenario b); answers its id
 *   {"use_hot": "<id>"}                  scenario b on another process's hot account (one stream, several writers)
 *   {"catch_up": "many"|"hot"}           reads the scenario's streams to their end (before a timed run)
 *   {"run": {"scenario": "many"|"hot", "concurrency": 16, "seconds": 5}}
 *       N appenders, each looping over billed requests for `seconds`; answers the counts: billed
 *       requests, commands, appends and conflicts (aggregate store), append groups and
 *       statements (counted on the client), and this process's CPU time.
 *   {"quit": true}
 */
const path = require('node:path');
const readline = require('node:readline');

const root = process.argv[2];
const counters = require('./count-queries').install(root);
const { PgSqlRunner } = require(path.join(root, 'dist/libs/platform/src/sql.js'));
const { SqlEventStore } = require(path.join(root, 'dist/libs/eventstore/src/sql-event-store.js'));
const { AggregateStore } = require(path.join(root, 'dist/libs/eventstore/src/aggregate-store.js'));
const { accountDecider, accountStream } = require(path.join(root, 'dist/libs/ledger/src/account'));
const { systemClock } = require(path.join(root, 'dist/libs/platform/src/clock.js'));

const STATS = {
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

const tag = `cap-${Date.now().toString(36)}-${process.pid}`;
const accounts = { many: [], hot: [] };
let ledger;
let holdSeq = 0;

async function openAccount(id, nano) {
  const stream = accountStream(id);
  await ledger.handle(accountDecider, stream, { type: 'OpenAccount', accountId: id });
  await ledger.handle(accountDecider, stream, { type: 'AddCredits', amountNano: nano, reason: 'bench' });
  return { id, stream };
}

/** One billed request on an account: its hold, then its charge, as the gateway sends them. */
async function billed(account) {
  const holdId = `${account.id}-${tag}-h${holdSeq++}`;
  await ledger.handle(accountDecider, account.stream, {
    type: 'PlaceHold',
    holdId,
    keyId: 'k',
    amountNano: 100_000n,
    model: 'sim/echo',
    endpoint: '/v1/chat/completions',
    ttlMs: 600_000,
    keyLimit: null,
  });
  await ledger.handle(accountDecider, account.stream, { type: 'ChargeUsage', holdId, amountNano: 50_000n, stats: STATS });
}

async function setup(kind, n) {
  const ids = Array.from({ length: kind === 'hot' ? 1 : n }, (_, i) => `${tag}-${kind}-${i}`);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(64, ids.length) }, async () => {
      while (next < ids.length) accounts[kind].push(await openAccount(ids[next++], 10n ** 15n));
    }),
  );
  return { setup: kind, accounts: accounts[kind].length, first: ids[0] };
}

async function run({ scenario, concurrency, seconds }) {
  const list = accounts[scenario];
  if (!list.length) throw new Error(`no accounts for ${scenario}: set it up first`);
  const before = { ...ledger.stats, ...counters };
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const end = Date.now() + seconds * 1000;
  let next = 0;
  let done = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < end) {
        await billed(list[next++ % list.length]);
        done++;
      }
    }),
  );
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const cpu = process.cpuUsage(cpu0);
  const after = { ...ledger.stats, ...counters };
  const d = (k) => after[k] - before[k];
  return {
    scenario,
    concurrency,
    ms,
    billed: done,
    commands: d('commands'),
    appends: d('appends'),
    conflicts: d('conflicts'),
    append_groups: d('append_groups'),
    statements: d('statements'),
    cpu_s: (cpu.user + cpu.system) / 1e6,
  };
}

for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));

(async () => {
  const sql = await PgSqlRunner.connect({ connectionString: process.env.DATABASE_URL });
  const store = new SqlEventStore(sql);
  await store.init();
  ledger = new AggregateStore(store, systemClock);
  console.log(JSON.stringify({ ready: true, pid: process.pid }));
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (!line.trim()) continue;
    const cmd = JSON.parse(line);
    if (cmd.quit) break;
    try {
      let out;
      if (cmd.setup) out = await setup(cmd.setup, cmd.accounts ?? 1);
      else if (cmd.catch_up) {
        // The scenario's streams read to their end now, so that a run measures writing them, not
        // replaying what other processes wrote since this one last looked (issue 45).
        const started = performance.now();
        for (const a of accounts[cmd.catch_up]) await ledger.load(accountDecider, a.stream);
        out = { caught_up_ms: Math.round(performance.now() - started) };
      } else if (cmd.use_hot) {
        // Another process's hot account: this one writes to the same stream (loaded on first use).
        accounts.hot = [{ id: cmd.use_hot, stream: accountStream(cmd.use_hot) }];
        out = { use_hot: cmd.use_hot };
      } else out = await run(cmd.run);
      console.log(JSON.stringify(out));
    } catch (err) {
      console.log(JSON.stringify({ error: String(err && err.stack ? err.stack : err) }));
    }
  }
  await store.close();
  await sql.close();
  process.exit(0);
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
