'use strict';
// The ledger export on 1,000,000 money events (issue 23): appends them through the real
// PostgreSQL event store into a fresh database, then times the built CLI's
// `ledger export --format csv|jsonl|parquet --out <file>` (a process each, as an operator runs it),
// checks each file's row count, and times `ledger reconcile` over the same log.
//
// Usage (after `npm run build`, from the repository root):
//   node bench/export.js [money events, default 1000000]
// BENCH_PG_URL: an admin connection (default postgres://postgres@127.0.0.1:5432/postgres); the
// database svc_bench_export_<pid> is created and dropped (kept with BENCH_KEEP_DB=1).
// Prints progress on stderr and one JSON line of results on stdout.
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const crypto = require('node:crypto');
const { spawn } = require('node:child_process');

const ROOT = path.join(__dirname, '..');
const { Client } = require(path.join(ROOT, 'node_modules/pg'));
const { PgSqlRunner } = require(path.join(ROOT, 'dist/libs/platform/src/index.js'));
const { SqlEventStore } = require(path.join(ROOT, 'dist/libs/eventstore/src/index.js'));

const MONEY_EVENTS = Number(process.argv[2] ?? 1_000_000);
const ACCOUNTS = 1000;
const PER_APPEND = 50; // events per append to one stream
const CONCURRENCY = 16;
const ADMIN_URL = process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const log = (...args) => console.error(`[export bench ${new Date().toISOString().slice(11, 19)}]`, ...args);

const PROVIDERS = [
  ['sim', 'sim/echo'],
  ['sim', 'sim/small-8k'],
  ['openai', 'openai/gpt-4o-mini'],
  ['anthropic:byok', 'anthropic/claude-haiku'],
];

/** One account's next events: mostly a hold and its charge (1 money event), sometimes a credit or an adjustment. */
function* accountEvents(account, start, money) {
  let at = start;
  const meta = () => ({ at: new Date((at += 1000)).toISOString() });
  yield { type: 'CreditsAdded', data: { account_id: account, amount_nano: '100000000000', reason: 'signup' }, metadata: meta() };
  for (let i = 1; i < money; i++) {
    const r = (i * 2654435761) % 100;
    if (r < 2) {
      yield { type: 'CreditsAdded', data: { account_id: account, amount_nano: String(1_000_000_000 + r), reason: 'purchase' }, metadata: meta() };
    } else if (r < 4) {
      yield {
        type: 'BalanceAdjusted',
        data: {
          account_id: account,
          adjustment_id: `adj-${account}-${i}`,
          amount_nano: r === 2 ? '250000000' : '-1000',
          kind: r === 2 ? 'credit_note' : 'adjustment',
          reason: 'bench',
          operator: 'bench',
        },
        metadata: meta(),
      };
    } else {
      const [provider, model] = PROVIDERS[i % PROVIDERS.length];
      const hold = `gen-${account}-${i}`;
      const amount = 1000 + ((i * 7919) % 5_000_000);
      const usage = { input: 100 + (i % 900), output: 10 + (i % 300) };
      yield {
        type: 'HoldPlaced',
        data: {
          account_id: account,
          hold_id: hold,
          key_id: `key-${account}`,
          amount_nano: String(amount * 2),
          model,
          endpoint: '/v1/chat/completions',
          expires_at: new Date(at + 900_000).toISOString(),
        },
        metadata: meta(),
      };
      yield {
        type: 'UsageCharged',
        data: {
          account_id: account,
          hold_id: hold,
          key_id: `key-${account}`,
          amount_nano: String(amount),
          charged_at: new Date(at + 500).toISOString(),
          model,
          provider,
          endpoint: '/v1/chat/completions',
          prompt_tokens: usage.input,
          completion_tokens: usage.output,
          cached_tokens: 0,
          reasoning_tokens: 0,
          latency_ms: 120,
          ttft_ms: 30,
          usage,
          lines: [
            { meter: 'input', quantity: usage.input, unit_price_usd: '0.000000150', amount_nano: String(usage.input * 150) },
            { meter: 'output', quantity: usage.output, unit_price_usd: '0.000000600', amount_nano: String(amount - usage.input * 150) },
          ],
          ...(i % 5 === 0 ? {} : { provider_cost_nano: provider.endsWith(':byok') ? '0' : String(Math.floor(amount * 0.7)) }),
        },
        metadata: meta(),
      };
    }
  }
}

async function appendAll(store) {
  const perAccount = Math.ceil(MONEY_EVENTS / ACCOUNTS);
  const start = Date.parse('2026-11-01T00:00:00Z');
  // Accounts interleave in the log: each worker appends PER_APPEND events to one account, then the next.
  const iterators = Array.from({ length: ACCOUNTS }, (_, a) => ({
    stream: `account-bench-${a}`,
    it: accountEvents(`bench-${a}`, start + a * 7, Math.min(perAccount, MONEY_EVENTS - a * perAccount)),
  }));
  let appended = 0;
  let money = 0;
  const t0 = Date.now();
  let reported = 0;
  // Worker w appends for accounts w, w + CONCURRENCY, ... in turn, PER_APPEND events at a time.
  async function worker(w) {
    const mine = iterators.filter((_, a) => a % CONCURRENCY === w);
    while (mine.length > 0) {
      for (let k = 0; k < mine.length;) {
        const entry = mine[k];
        const batch = [];
        for (let i = 0; i < PER_APPEND; i++) {
          const { value, done } = entry.it.next();
          if (done) break;
          batch.push({ id: crypto.randomUUID(), ...value });
        }
        if (batch.length > 0) {
          await store.append(entry.stream, batch, 'any');
          appended += batch.length;
          money += batch.filter((e) => e.type !== 'HoldPlaced').length;
        }
        if (batch.length < PER_APPEND) mine.splice(k, 1);
        else k++;
        if (appended - reported >= 200_000) {
          reported = appended;
          log(`appended ${appended} events (${money} money) in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
        }
      }
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, (_, w) => worker(w)));
  return { appended, money, append_s: (Date.now() - t0) / 1000 };
}

function runCli(args, env) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const child = spawn(process.execPath, [path.join(ROOT, 'dist/src/cli.js'), ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('close', (code) => {
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      if (code !== 0) reject(new Error(`cli ${args.join(' ')} exited ${code}:\n${stderr}`));
      else resolve({ ms, stdout, stderr });
    });
  });
}

function countLines(file) {
  const fd = fs.openSync(file, 'r');
  const buffer = Buffer.alloc(1 << 20);
  let lines = 0;
  for (let n; (n = fs.readSync(fd, buffer, 0, buffer.length, null)) > 0;) for (let i = 0; i < n; i++) if (buffer[i] === 10) lines++;
  fs.closeSync(fd);
  return lines;
}

(async () => {
  const db = `svc_bench_export_${process.pid}`;
  const admin = new Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${db}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${db}`;
  const env = { ...process.env, DATABASE_URL: url.toString() };
  delete env.EVENTSTORE_URL;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-export-bench-'));
  const results = { money_events: MONEY_EVENTS, node: process.version, cpus: os.cpus().length, cpu: os.cpus()[0]?.model };
  try {
    const sql = await PgSqlRunner.connect({ connectionString: url.toString(), max: CONCURRENCY + 2 });
    const store = new SqlEventStore(sql);
    await store.init();
    log(`appending ${MONEY_EVENTS} money events (each charge after its hold) to ${db}`);
    Object.assign(results, await appendAll(store));
    results.postgres = (await sql.query('SHOW server_version')).rows[0].server_version;
    await store.close();
    await sql.close();
    log(`appended ${results.appended} events (${results.money} money) in ${results.append_s} s`);

    results.formats = {};
    for (const format of ['csv', 'jsonl', 'parquet']) {
      const file = path.join(dir, `ledger.${format}`);
      log(`ledger export --format ${format}`);
      const { ms, stderr } = await runCli(['ledger', 'export', '--format', format, '--out', file], env);
      let rows;
      if (format === 'parquet') {
        const { asyncBufferFromFile, parquetMetadataAsync } = await import(path.join(ROOT, 'node_modules/hyparquet/src/node.js'));
        rows = Number((await parquetMetadataAsync(await asyncBufferFromFile(file))).num_rows);
      } else rows = countLines(file) - (format === 'csv' ? 1 : 0);
      if (rows !== results.money) throw new Error(`${format}: ${rows} rows, expected ${results.money}\n${stderr}`);
      const bytes = fs.statSync(file).size;
      results.formats[format] = {
        rows,
        seconds: +(ms / 1000).toFixed(2),
        money_events_per_s: Math.round(rows / (ms / 1000)),
        log_events_per_s: Math.round(results.appended / (ms / 1000)),
        mb: +(bytes / 1e6).toFixed(1),
      };
      log(
        `${format}: ${rows} rows in ${(ms / 1000).toFixed(2)} s = ${results.formats[format].money_events_per_s} money events/s (${results.formats[format].mb} MB)`,
      );
      fs.rmSync(file, { force: true });
    }
    log('ledger reconcile --json');
    const rec = await runCli(['ledger', 'reconcile', '--json'], env);
    const report = JSON.parse(rec.stdout);
    results.reconcile = {
      seconds: +(rec.ms / 1000).toFixed(2),
      charges: report.totals.requests + report.byok_totals.requests,
      events_per_s: Math.round(results.appended / (rec.ms / 1000)),
    };
    log(`reconcile: ${results.reconcile.charges} charges in ${results.reconcile.seconds} s`);
    console.log(JSON.stringify(results));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    if (!process.env.BENCH_KEEP_DB) await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    await admin.end();
  }
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
