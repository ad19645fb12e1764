#!/usr/bin/env node
'use strict';
/**
 * The capacity model's measurements (docs/SCALING.md): what one billed request costs each
 * resource, and how many appends one PostgreSQL primary takes.
 *
 *   node bench/capacity.js [--quick] [--requests-only] [--appends-only] [--no-ha]
 *
 * 1. Per billed request (non-streamed and streamed chat against the simulated upstream; one
 *    gateway and one worker from dist/, as bench/run.js starts them; a fresh PostgreSQL database;
 *    a redis-server of its own): CPU time of the gateway, the worker, the PostgreSQL backends and
 *    Redis (/proc/<pid>/stat), PostgreSQL transactions (pg_stat_database), statements (counted in
 *    the gateway and the worker by bench/count-queries.js, as pg_stat_statements is only there
 *    when the server preloads it), WAL bytes (pg_current_wal_lsn), rows inserted, Redis commands
 *    (INFO commandstats). Each figure is the delta over CAP_REQUESTS requests at CAP_CONNECTIONS
 *    connections minus what the same processes do idle over as long (measured first), repeated
 *    CAP_REPEATS times.
 * 2. The append rate of one primary: bench/capacity-append.js drives the account decider on
 *    SqlEventStore (group commit) with 1, 16 and 64 concurrent billed requests, (a) over 1,000
 *    accounts and (b) on one hot account, for CAP_APPEND_SECONDS each, repeated; on the local
 *    PostgreSQL, then (unless --no-ha) on a synchronous pair (scripts/topology/pg-ha.sh) of its own.
 *
 * WAL and the local server's counters are server-wide and other work on this machine writes to
 * the same server: WAL per request is the minimum over the repeats, beside the idle WAL rate of
 * the server. Every rate is given with the load average at its start and end.
 *
 * Starts everything as a child (or, for pg-ha, through its script with ports and a directory of its
 * own) and stops it all, drops its databases, also on failure and SIGINT. Prints a JSON summary
 * and writes bench/results/capacity.json.
 *
 * Environment: BENCH_APP_ROOT, BENCH_PG_URL (an admin connection, default
 * postgres://postgres@127.0.0.1:5432/postgres), CAP_REDIS_PORT (default 26379; db 10),
 * CAP_REQUESTS, CAP_CONNECTIONS, CAP_REPEATS, CAP_APPEND_SECONDS, CAP_HA_DIR.
 */
const fs = require('node:fs');
const os = require('node:os');
const net = require('node:net');
const path = require('node:path');
const { spawn, execFileSync } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');

const BENCH_DIR = __dirname;
const REPO_ROOT = path.resolve(BENCH_DIR, '..');
const APP_ROOT = path.resolve(process.env.BENCH_APP_ROOT || REPO_ROOT);
const RESULTS_DIR = path.join(BENCH_DIR, 'results');
const LOG_DIR = path.join(RESULTS_DIR, 'logs-capacity');
const RESULTS_FILE = path.join(RESULTS_DIR, 'capacity.json');

const args = new Set(process.argv.slice(2));
const QUICK = args.has('--quick');
const REQUESTS = !args.has('--appends-only');
const APPENDS = !args.has('--requests-only');
const HA = APPENDS && !args.has('--no-ha');
const num = (name, full, quick) => Number(process.env[name] || (QUICK ? quick : full));
const CFG = {
  requests: num('CAP_REQUESTS', 2000, 300),
  warmupRequests: num('CAP_WARMUP', 500, 100),
  connections: num('CAP_CONNECTIONS', 64, 64),
  repeats: num('CAP_REPEATS', 3, 1),
  accounts: 64,
  idleSeconds: num('CAP_IDLE_SECONDS', 15, 5),
  // A backend that goes idle with statistics pending sends them within 10 s (PGSTAT_IDLE_INTERVAL).
  statsFlushMs: 11_000,
  appendSeconds: num('CAP_APPEND_SECONDS', 5, 2),
  appendAccounts: 1000,
  appendConcurrency: [1, 16, 64],
  appendProcesses: num('CAP_APPEND_PROCESSES', 4, 2),
  redisPort: Number(process.env.CAP_REDIS_PORT || 26379),
  redisDb: 10,
};

const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef';
const PG_ADMIN_URL = process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = `redis://127.0.0.1:${CFG.redisPort}/${CFG.redisDb}`;
const LIVE_LIMITS = 'rpm=100000000,tpm=100000000000,concurrent=100000';
const HA_ENV = {
  SVC_TOPOLOGY_DIR: process.env.CAP_HA_DIR || '/tmp/svc-topology-cap',
  SVC_HA_PG_PORTS: '25632 25633',
  SVC_HA_API_PORTS: '28208 28209',
  SVC_HA_ETCD_PORT: '22579',
  SVC_HA_PRIMARY_PORT: '25200',
  SVC_HA_REPLICA_PORT: '25201',
};
const HA_URL = `postgres://postgres@127.0.0.1:${HA_ENV.SVC_HA_PRIMARY_PORT}/postgres`;
const PG_HA_SCRIPT = path.join(APP_ROOT, 'scripts/topology/pg-ha.sh');

const CHAT = { model: 'sim/echo', messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 };
const BODIES = {
  json: JSON.stringify(CHAT),
  stream: JSON.stringify({ ...CHAT, stream: true, stream_options: { include_usage: true } }),
};
const MODES = ['json', 'stream'];
const CHAT_PATH = '/v1/chat/completions';
const GATEWAY_ENTRY = 'dist/apps/gateway/src/main.js';

const { request } = require('undici');
const pg = require('pg');

const r2 = (x) => (x === null || x === undefined || Number.isNaN(x) ? null : Math.round(x * 100) / 100);
const r3 = (x) => (x === null || x === undefined || Number.isNaN(x) ? null : Math.round(x * 1000) / 1000);
const r4 = (x) => (x === null || x === undefined || Number.isNaN(x) ? null : Math.round(x * 10000) / 10000);
const loadavg = () => os.loadavg().map(r2);

function log(...a) {
  console.error(`[capacity ${new Date().toISOString().slice(11, 19)}]`, ...a);
}

// ---------------------------------------------------------------------------------------------
// Everything started is registered here and stopped in reverse order, once (failure, SIGINT).

const children = new Map(); // name -> { proc, done }
const cleanups = []; // [name, async fn], run last-in first-out
/** Synchronous last resorts for process 'exit' (a second SIGINT): what cannot wait. */
const exitCleanups = new Map();

function onCleanup(name, fn, syncFn) {
  cleanups.push([name, fn]);
  if (syncFn) exitCleanups.set(name, syncFn);
}

let cleaning = null;
function cleanupAll() {
  cleaning ??= (async () => {
    await Promise.all([...children.keys()].map((n) => stopProcess(n)));
    while (cleanups.length) {
      const [name, fn] = cleanups.pop();
      try {
        await fn();
      } catch (err) {
        log(`cleanup ${name}: ${err.message}`);
      }
      exitCleanups.delete(name);
    }
  })();
  return cleaning;
}

process.on('exit', () => {
  for (const { proc } of children.values()) {
    try {
      process.kill(proc.pid, 'SIGKILL');
    } catch {}
  }
  for (const fn of exitCleanups.values()) {
    try {
      fn();
    } catch {}
  }
});

function startProcess(name, command, argv, { env = process.env, cwd = APP_ROOT, ready, timeoutMs = 30_000, stdin = 'ignore' } = {}) {
  fs.mkdirSync(LOG_DIR, { recursive: true });
  const out = fs.createWriteStream(path.join(LOG_DIR, `${name}.log`));
  const proc = spawn(command, argv, { cwd, env, stdio: [stdin, 'pipe', 'pipe'] });
  const child = { name, proc };
  children.set(name, child);
  child.done = new Promise((resolve) =>
    proc.on('exit', (code, signal) => {
      children.delete(name);
      resolve({ code, signal });
    }),
  );
  let seen = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${name} not ready after ${timeoutMs} ms (see ${path.relative(REPO_ROOT, LOG_DIR)}/${name}.log)`)),
      timeoutMs,
    );
    const onData = (buf) => {
      out.write(buf);
      if (seen === null) return;
      seen += buf.toString();
      const m = ready.exec(seen);
      if (m) {
        seen = null;
        clearTimeout(timer);
        resolve({ ...child, pid: proc.pid, match: m });
      } else if (seen.length > 1e6) seen = seen.slice(-1e5);
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('error', (err) => (clearTimeout(timer), reject(err)));
    proc.on('exit', (code, signal) => {
      out.end();
      if (seen !== null) {
        clearTimeout(timer);
        reject(new Error(`${name} exited (${code ?? signal}) before it was ready; see ${path.relative(REPO_ROOT, LOG_DIR)}/${name}.log`));
      }
    });
  });
}

async function stopProcess(name, signal = 'SIGTERM', timeoutMs = 8000) {
  const child = children.get(name);
  if (!child) return null;
  try {
    child.proc.kill(signal);
  } catch {}
  const exited = await Promise.race([child.done, sleep(timeoutMs).then(() => null)]);
  if (exited) return exited;
  try {
    child.proc.kill('SIGKILL');
  } catch {}
  return child.done;
}

/** Runs a node script to completion; resolves with its stdout (stderr goes to the log). */
function runNode(name, argv, { env = process.env, cwd = BENCH_DIR } = {}) {
  fs.mkdirSync(LOG_DIR, { recursive: true });
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, argv, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.set(name, { name, proc, done: new Promise((r) => proc.on('exit', r)) });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (b) => (stdout += b));
    proc.stderr.on('data', (b) => (stderr += b));
    proc.on('error', reject);
    proc.on('exit', (code) => {
      children.delete(name);
      fs.writeFileSync(path.join(LOG_DIR, `${name}.log`), `${stdout}\n--- stderr ---\n${stderr}`);
      if (code === 0) resolve(stdout);
      else reject(new Error(`${name} exited with ${code}: ${stderr.slice(-2000)}`));
    });
  });
}

async function load(name, opts) {
  const stdout = await runNode(name, [path.join(BENCH_DIR, 'load.js'), JSON.stringify(opts)]);
  return JSON.parse(stdout.trim().split('\n').pop());
}

// ---------------------------------------------------------------------------------------------
// /proc: CPU time of a process and of the PostgreSQL backends of a database.

const CLK_TCK = 100;

function cpuSeconds(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / CLK_TCK;
  } catch {
    return null;
  }
}

/** Busy CPU seconds of the whole machine since boot (all cores), from /proc/stat. */
function machineBusySeconds() {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, _idle, _iowait, irq, softirq, steal] = f;
  return (user + nice + system + irq + softirq + (steal ?? 0)) / CLK_TCK;
}

/** The pids of the PostgreSQL backends connected to `dbName` (their process title names it). */
function backendPids(dbName) {
  const out = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let cmd;
    try {
      cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (cmd.startsWith('postgres: ') && cmd.includes(` ${dbName} `)) out.push(Number(d));
  }
  return out;
}

/**
 * CPU seconds the backends of a database spend from start() to stop(). Polled every 500 ms, so a
 * backend that exits meanwhile (a pool closing an idle connection) keeps the time it had.
 */
function backendCpuMeter(dbName) {
  const first = new Map();
  const last = new Map();
  const poll = () => {
    for (const pid of backendPids(dbName)) {
      const c = cpuSeconds(pid);
      if (c === null) continue;
      if (!first.has(pid)) first.set(pid, started ? 0 : c);
      last.set(pid, c);
    }
  };
  let started = false;
  poll();
  started = true;
  const timer = setInterval(poll, 500);
  return {
    stop() {
      clearInterval(timer);
      poll();
      let s = 0;
      for (const [pid, c] of last) s += c - first.get(pid);
      return s;
    },
  };
}

/** Waits until the named processes have gone (nearly) idle: background catch-up is over. */
async function settle(pids, { maxMs = 30_000, windowMs = 500, busyFraction = 0.05 } = {}) {
  const deadline = Date.now() + maxMs;
  for (;;) {
    const a = Object.values(pids).map(cpuSeconds);
    await sleep(windowMs);
    const b = Object.values(pids).map(cpuSeconds);
    const busy = b.reduce((s, v, i) => s + (v === null || a[i] === null ? 0 : v - a[i]), 0);
    if (busy / (windowMs / 1000) <= busyFraction || Date.now() > deadline) return;
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function portInUse(port) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.once('connect', () => (sock.destroy(), resolve(true)));
    sock.once('error', () => resolve(false));
  });
}

function sh(cmd, argv, opts = {}) {
  try {
    return execFileSync(cmd, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], ...opts }).trim();
  } catch {
    return null;
  }
}

/** Median and spread (min, max) of a list of numbers. */
function spread(xs) {
  const s = xs.filter((x) => x !== null && x !== undefined && !Number.isNaN(x)).sort((a, b) => a - b);
  if (!s.length) return null;
  const median = s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  return { median: r4(median), min: r4(s[0]), max: r4(s[s.length - 1]), n: s.length };
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL and Redis counters

/** Server-wide WAL position (text LSN). */
async function walLsn(client) {
  return (await client.query('SELECT pg_current_wal_lsn()::text AS l')).rows[0].l;
}

async function walSince(client, lsn) {
  return Number((await client.query('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint AS b', [lsn])).rows[0].b);
}

async function walBetween(client, from, to) {
  return Number((await client.query('SELECT pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn)::bigint AS b', [from, to])).rows[0].b);
}

/** The database's cumulative statistics as the server has them now (see statsFlushMs). */
async function dbStats(admin, name) {
  await admin.query('SELECT pg_stat_force_next_flush()');
  await admin.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await admin.query(
    `SELECT (xact_commit + xact_rollback)::bigint AS xacts, xact_rollback::bigint AS rollbacks, tup_inserted::bigint AS inserted,
            tup_updated::bigint AS updated, tup_deleted::bigint AS deleted
       FROM pg_stat_database WHERE datname = $1`,
    [name],
  );
  return Object.fromEntries(Object.entries(rows[0]).map(([k, v]) => [k, Number(v)]));
}

/** Rows inserted by table (cumulative statistics), read on the database itself. */
async function tableInserts(app) {
  const { rows } = await app.query('SELECT relname, n_tup_ins::bigint AS n FROM pg_stat_user_tables');
  return Object.fromEntries(rows.map((r) => [r.relname, Number(r.n)]));
}
async function eventCounts(app) {
  const { rows } = await app.query(`SELECT count(*)::int AS events, count(*) FILTER (WHERE type = 'UsageCharged')::int AS charged FROM events`);
  return rows[0];
}

function redisCommandStats() {
  const text = sh('redis-cli', ['-p', String(CFG.redisPort), 'INFO', 'commandstats']) ?? '';
  const out = {};
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]] = Number(m[2]);
  return out;
}

function redisInfoPid() {
  const m = /process_id:(\d+)/.exec(sh('redis-cli', ['-p', String(CFG.redisPort), 'INFO', 'server']) ?? '');
  return m ? Number(m[1]) : null;
}

function readQueryCounts(dir, pid) {
  try {
    return JSON.parse(fs.readFileSync(path.join(dir, `${pid}.json`), 'utf8'));
  } catch {
    return { statements: 0, begin: 0, commit: 0, rollback: 0, append_groups: 0 };
  }
}

const diff = (a, b) => Object.fromEntries(Object.keys({ ...a, ...b }).map((k) => [k, (b[k] ?? 0) - (a[k] ?? 0)]));

// ---------------------------------------------------------------------------------------------
// Phase 1: per billed request

function productionGatewayFlags(appRoot) {
  const script = JSON.parse(fs.readFileSync(path.join(appRoot, 'package.json'), 'utf8')).scripts?.['start:gateway'] ?? '';
  const words = script.trim().split(/\s+/);
  const entry = words.indexOf(GATEWAY_ENTRY);
  return words[0] === 'node' && entry > 0 ? words.slice(1, entry) : [];
}

async function admin(ctx, method, p, body) {
  const res = await request(`${ctx.gatewayOrigin}${p}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.body.json().catch(() => null);
  if (res.statusCode >= 300) throw new Error(`${method} ${p}: ${res.statusCode} ${JSON.stringify(json)}`);
  return json;
}

async function newAccount(ctx, usd) {
  const { id } = await admin(ctx, 'POST', '/admin/accounts', { initial_credits_usd: usd });
  const { key } = await admin(ctx, 'POST', `/admin/accounts/${id}/keys`, {});
  return { id, key };
}

async function waitForKey(ctx, key, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await request(`${ctx.gatewayOrigin}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    await res.body.dump();
    if (res.statusCode === 200) return;
    if (Date.now() > deadline) throw new Error(`key not usable after ${timeoutMs} ms (last status ${res.statusCode})`);
    await sleep(50);
  }
}

async function createDatabase(adminDb, name, url) {
  await adminDb.query(`CREATE DATABASE ${name}`);
  onCleanup(
    `database ${name}`,
    () => adminDb.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
    () => execFileSync('psql', [url, '-c', `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`], { stdio: 'ignore', timeout: 10_000 }),
  );
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/**
 * One snapshot of everything counted. `quick` parts (CPU, WAL, Redis, statements, events) are
 * exact at once; the cumulative statistics (dbStats, tableInserts) lag and are taken apart.
 */
async function snapshot(ctx) {
  return {
    t: Date.now(),
    machine_busy_s: machineBusySeconds(),
    cpu: { gateway: cpuSeconds(ctx.pids.gateway), worker: cpuSeconds(ctx.pids.worker), redis: cpuSeconds(ctx.pids.redis) },
    wal: await walLsn(ctx.adminDb),
    redis: redisCommandStats(),
    queries: { gateway: readQueryCounts(ctx.countDir, ctx.pids.gateway), worker: readQueryCounts(ctx.countDir, ctx.pids.worker) },
    events: await eventCounts(ctx.app),
  };
}

/** The database's statistics, and how many statements the driver itself had sent to it by then (each one a transaction). */
async function statsSnapshot(ctx) {
  const db = await dbStats(ctx.adminDb, ctx.dbName);
  const driver = ctx.app.statements;
  return { t: Date.now(), db, driver, tables: await tableInserts(ctx.app) };
}

/** What happened between two pairs of snapshots, raw. */
async function windowOf(ctx, s0, st0, s1, st1, pgCpu) {
  const redis = diff(s0.redis, s1.redis);
  delete redis.info; // the driver's own INFO calls
  const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0);
  const q = (who) => diff(s0.queries[who], s1.queries[who]);
  return {
    seconds: (s1.t - s0.t) / 1000,
    stats_seconds: (st1.t - st0.t) / 1000,
    cpu_s: {
      gateway: s1.cpu.gateway - s0.cpu.gateway,
      worker: s1.cpu.worker - s0.cpu.worker,
      postgres: pgCpu,
      redis: s1.cpu.redis - s0.cpu.redis,
    },
    machine_busy_s: s1.machine_busy_s - s0.machine_busy_s,
    wal_bytes: await walBetween(ctx.adminDb, s0.wal, s1.wal),
    redis_commands: sum(redis),
    redis_by_command: redis,
    statements: { gateway: q('gateway'), worker: q('worker') },
    events: s1.events.events - s0.events.events,
    charged: s1.events.charged - s0.events.charged,
    xacts: st1.db.xacts - st0.db.xacts - (st1.driver - st0.driver),
    rollbacks: st1.db.rollbacks - st0.db.rollbacks,
    rows_inserted: st1.db.inserted - st0.db.inserted,
    rows_updated: st1.db.updated - st0.db.updated,
    rows_deleted: st1.db.deleted - st0.db.deleted,
    inserted_by_table: Object.fromEntries(Object.entries(diff(st0.tables, st1.tables)).filter(([, v]) => v)),
  };
}

/** Idle rates (per second) of the processes under test, measured over CFG.idleSeconds. */
async function idleBaseline(ctx) {
  await settle({ gateway: ctx.pids.gateway, worker: ctx.pids.worker });
  await sleep(CFG.statsFlushMs);
  const st0 = await statsSnapshot(ctx);
  const s0 = await snapshot(ctx);
  const meter = backendCpuMeter(ctx.dbName);
  await sleep(CFG.idleSeconds * 1000);
  const s1 = await snapshot(ctx);
  const pgCpu = meter.stop();
  await sleep(CFG.statsFlushMs);
  const st1 = await statsSnapshot(ctx);
  const w = await windowOf(ctx, s0, st0, s1, st1, pgCpu);
  const perS = (x) => x / w.seconds;
  const perStatsS = (x) => x / w.stats_seconds;
  return {
    window: w,
    rate: {
      cpu_s: Object.fromEntries(Object.entries(w.cpu_s).map(([k, v]) => [k, perS(v)])),
      wal_bytes: perS(w.wal_bytes),
      redis_commands: perS(w.redis_commands),
      statements: { gateway: perS(w.statements.gateway.statements), worker: perS(w.statements.worker.statements) },
      xacts: perStatsS(w.xacts),
      rows_inserted: perStatsS(w.rows_inserted),
    },
  };
}

async function requestRun(ctx, mode, name, idle) {
  const opts = {
    url: `${ctx.gatewayOrigin}${CHAT_PATH}`,
    connections: CFG.connections,
    body: BODIES[mode],
    headers: {},
    keys: ctx.loadKeys,
    amount: CFG.requests,
  };
  const la0 = loadavg();
  const st0 = await statsSnapshot(ctx);
  const s0 = await snapshot(ctx);
  const meter = backendCpuMeter(ctx.dbName);
  const r = await load(name, opts);
  // The worker projects what the requests appended: its work belongs to them.
  await settle({ gateway: ctx.pids.gateway, worker: ctx.pids.worker });
  const s1 = await snapshot(ctx);
  const pgCpu = meter.stop();
  const la1 = loadavg();
  await sleep(CFG.statsFlushMs);
  const st1 = await statsSnapshot(ctx);
  const w = await windowOf(ctx, s0, st0, s1, st1, pgCpu);
  const billed = w.charged;
  const per = (x) => x / Math.max(1, billed);
  const ir = idle.rate;
  const net = (x, rate, seconds) => per(x - rate * seconds);
  const cpuMs = (k) => r3(1000 * net(w.cpu_s[k], ir.cpu_s[k], w.seconds));
  const out = {
    mode,
    connections: CFG.connections,
    requests: r.requests,
    ok: r.ok,
    non2xx: r.non2xx,
    errors: r.errors,
    billed,
    rps: r2(r.rps),
    latency_ms: r.latency_ms,
    loadavg_start: la0,
    loadavg_end: la1,
    // Busy CPU of the machine that none of the measured processes used (other jobs, the load client), in cores.
    other_busy_cores: r2((w.machine_busy_s - Object.values(w.cpu_s).reduce((a, b) => a + b, 0) - r.client_cpu_s) / w.seconds),
    window_s: r2(w.seconds),
    per_request: {
      cpu_ms: { gateway: cpuMs('gateway'), worker: cpuMs('worker'), postgres: cpuMs('postgres'), redis: cpuMs('redis') },
      pg_transactions: r3(net(w.xacts, ir.xacts, w.stats_seconds)),
      pg_statements: {
        gateway: r3(net(w.statements.gateway.statements, ir.statements.gateway, w.seconds)),
        worker: r3(net(w.statements.worker.statements, ir.statements.worker, w.seconds)),
        gateway_append_groups: r3(per(w.statements.gateway.append_groups)),
        worker_append_groups: r3(per(w.statements.worker.append_groups)),
      },
      // Server-wide: other writers on the server add to it (see the idle rate); not corrected.
      wal_bytes: Math.round(per(w.wal_bytes)),
      rows_inserted: r3(net(w.rows_inserted, ir.rows_inserted, w.stats_seconds)),
      events: r3(per(w.events)),
      redis_commands: r3(net(w.redis_commands, ir.redis_commands, w.seconds)),
    },
    raw: w,
  };
  log(
    `${name}: ${r.ok}/${r.requests} ok, ${billed} billed, ${r2(r.rps)} req/s (load ${la0[0]}→${la1[0]}); ms/request gateway ${out.per_request.cpu_ms.gateway}, worker ${out.per_request.cpu_ms.worker}, ` +
      `postgres ${out.per_request.cpu_ms.postgres}; ${out.per_request.pg_transactions} xacts, ${out.per_request.wal_bytes} WAL B, ${out.per_request.redis_commands} redis cmds`,
  );
  return out;
}

async function requestsPhase(results) {
  const adminDb = new pg.Client({ connectionString: PG_ADMIN_URL });
  await adminDb.connect();
  onCleanup('admin connection', () => adminDb.end());
  results.machine.postgres = (await adminDb.query('SHOW server_version')).rows[0].server_version;
  const pss = await adminDb.query(`SELECT setting FROM pg_settings WHERE name = 'shared_preload_libraries'`);
  results.pg_stat_statements = /pg_stat_statements/.test(pss.rows[0]?.setting ?? '')
    ? 'loaded (not used: statements are counted in the processes)'
    : `not loaded on this server (shared_preload_libraries = '${pss.rows[0]?.setting ?? ''}'): statements are counted in the gateway and the worker (bench/count-queries.js)`;

  const dbName = `svc_cap_${Date.now()}_${process.pid}`;
  const dbUrl = await createDatabase(adminDb, dbName, PG_ADMIN_URL);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-cap-'));
  onCleanup('data dir', () => fs.rmSync(dataDir, { recursive: true, force: true }));
  const countDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-cap-count-'));
  onCleanup('count dir', () => fs.rmSync(countDir, { recursive: true, force: true }));
  log(`database ${dbName}; redis ${REDIS_URL}`);

  const ctx = { adminDb, dbName, countDir, pids: {}, gatewayPort: await freePort() };
  const appEnv = (extra) => {
    const env = { ...process.env };
    for (const k of Object.keys(env)) if (k.startsWith('SVC_') || k === 'EVENTSTORE_URL') delete env[k];
    return {
      ...env,
      NODE_ENV: 'production',
      DATABASE_URL: dbUrl,
      REDIS_URL,
      SVC_ADMIN_TOKEN: ADMIN_TOKEN,
      SVC_SIMULATOR_URL: ctx.simUrl,
      SVC_RATE_LIMITS_LIVE: LIVE_LIMITS,
      SVC_DATA_DIR: dataDir,
      HOST: '127.0.0.1',
      COUNT_QUERIES_DIR: countDir,
      COUNT_QUERIES_ROOT: APP_ROOT,
      ...extra,
    };
  };
  const counting = ['--require', path.join(BENCH_DIR, 'count-queries.js')];

  const sim = await startProcess('simulator', process.execPath, [path.join(BENCH_DIR, 'simulator.js'), APP_ROOT, '0'], {
    ready: /simulator listening on (\S+)/,
  });
  ctx.simUrl = sim.match[1];
  ctx.pids.simulator = sim.pid;
  // The gateway first (it creates the schema), then the worker.
  const gw = await startProcess('gateway', process.execPath, [...productionGatewayFlags(APP_ROOT), ...counting, GATEWAY_ENTRY], {
    env: appEnv({ PORT: String(ctx.gatewayPort) }),
    ready: /svc-gateway listening on (http:\/\/\S+)/,
  });
  ctx.pids.gateway = gw.pid;
  ctx.gatewayOrigin = `http://127.0.0.1:${ctx.gatewayPort}`;
  const worker = await startProcess('worker', process.execPath, [...counting, 'dist/apps/worker/src/main.js'], {
    env: appEnv({ PORT: '0' }),
    ready: /svc-worker running/,
  });
  ctx.pids.worker = worker.pid;
  ctx.pids.redis = redisInfoPid();
  const pool = new pg.Pool({ connectionString: dbUrl, max: 1 });
  pool.on('error', () => undefined);
  onCleanup('app pool', () => pool.end());
  ctx.app = {
    statements: 0,
    query(...a) {
      this.statements++;
      return pool.query(...a);
    },
  };

  ctx.loadKeys = [];
  for (let i = 0; i < CFG.accounts; i++) ctx.loadKeys.push((await newAccount(ctx, 1000)).key);
  await waitForKey(ctx, ctx.loadKeys[ctx.loadKeys.length - 1]);

  for (const mode of MODES) {
    const w = await load(`warmup-${mode}`, {
      url: `${ctx.gatewayOrigin}${CHAT_PATH}`,
      connections: CFG.connections,
      body: BODIES[mode],
      keys: ctx.loadKeys,
      amount: CFG.warmupRequests,
    });
    if (w.ok !== w.requests) throw new Error(`warm-up ${mode}: ${w.ok}/${w.requests} ok ${JSON.stringify(w.status_codes)}`);
  }
  log(`idle baseline over ${CFG.idleSeconds} s`);
  const idle = await idleBaseline(ctx);
  results.idle = idle;
  log(`idle rates: ${JSON.stringify(idle.rate)}`);

  const runs = { json: [], stream: [] };
  // Interleaved: each mode's repeats meet the same spread of conditions.
  for (let i = 0; i < CFG.repeats; i++) for (const mode of MODES) runs[mode].push(await requestRun(ctx, mode, `${mode}-${i + 1}`, idle));
  const sumUp = (list) => {
    const f = (get) => spread(list.map(get));
    return {
      per_request: {
        cpu_ms: Object.fromEntries(['gateway', 'worker', 'postgres', 'redis'].map((k) => [k, f((r) => r.per_request.cpu_ms[k])])),
        pg_transactions: f((r) => r.per_request.pg_transactions),
        pg_statements_gateway: f((r) => r.per_request.pg_statements.gateway),
        pg_statements_worker: f((r) => r.per_request.pg_statements.worker),
        append_groups_gateway: f((r) => r.per_request.pg_statements.gateway_append_groups),
        wal_bytes: f((r) => r.per_request.wal_bytes),
        rows_inserted: f((r) => r.per_request.rows_inserted),
        events: f((r) => r.per_request.events),
        redis_commands: f((r) => r.per_request.redis_commands),
      },
      rps: f((r) => r.rps),
      loadavg_1m: f((r) => r.loadavg_start[0]),
      other_busy_cores: f((r) => r.other_busy_cores),
      redis_by_command: Object.fromEntries(Object.entries(list[0].raw.redis_by_command).map(([k, v]) => [k, r3(v / Math.max(1, list[0].billed))])),
      inserted_by_table: Object.fromEntries(Object.entries(list[0].raw.inserted_by_table).map(([k, v]) => [k, r3(v / Math.max(1, list[0].billed))])),
    };
  };
  results.per_request = { connections: CFG.connections, requests_per_run: CFG.requests, runs, summary: { json: sumUp(runs.json), stream: sumUp(runs.stream) } };

  await stopProcess('gateway');
  await stopProcess('worker');
  await stopProcess('simulator');
}

// ---------------------------------------------------------------------------------------------
// Phase 2: the append rate of one primary

/** A capacity-append.js child: one JSON command a line in, one JSON answer a line out. */
async function startAppender(name, dbUrl) {
  const child = await startProcess(name, process.execPath, [path.join(BENCH_DIR, 'capacity-append.js'), APP_ROOT], {
    cwd: BENCH_DIR,
    env: { ...process.env, DATABASE_URL: dbUrl },
    ready: /"ready":true/,
    stdin: 'pipe',
  });
  const answers = [];
  let waiting = null;
  let buf = '';
  child.proc.stdout.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (!line.startsWith('{') || line.includes('"ready":true')) continue;
      answers.push(JSON.parse(line));
      if (waiting) waiting();
    }
  });
  const ask = async (cmd) => {
    child.proc.stdin.write(`${JSON.stringify(cmd)}\n`);
    while (!answers.length) {
      if (!children.has(name)) throw new Error(`${name} exited`);
      await new Promise((resolve) => {
        waiting = resolve;
        setTimeout(resolve, 1000);
      });
    }
    const a = answers.shift();
    if (a.error) throw new Error(`${name}: ${a.error}`);
    return a;
  };
  return { pid: child.pid, ask };
}

/** One run on every appender at once; the counts are summed, the window is the longest. */
async function appendRun(target, appenders, scenario, concurrency, seconds) {
  // Each writer catches up with the stream before the clock starts: one that last saw it tens of
  // thousands of events ago replays them first (seconds), which is not what sharing it costs.
  if (scenario === 'hot' && appenders.length > 1) await Promise.all(appenders.map((a) => a.ask({ catch_up: 'hot' })));
  const la0 = loadavg();
  const lsn = await walLsn(target.admin);
  const busy0 = machineBusySeconds();
  const cpu0 = appenders.map((a) => cpuSeconds(a.pid));
  const meter = backendCpuMeter(target.dbName);
  const answers = await Promise.all(appenders.map((a) => a.ask({ run: { scenario, concurrency, seconds } })));
  const wal = await walSince(target.admin, lsn);
  const pgCpu = meter.stop();
  const clientCpu = appenders.reduce((sum, a, i) => sum + cpuSeconds(a.pid) - cpu0[i], 0);
  const busy = machineBusySeconds() - busy0;
  const la1 = loadavg();
  const r = { ms: Math.max(...answers.map((a) => a.ms)) };
  for (const k of ['billed', 'commands', 'appends', 'conflicts', 'append_groups', 'statements']) r[k] = answers.reduce((sum, a) => sum + a[k], 0);
  const s = r.ms / 1000;
  return {
    scenario,
    processes: appenders.length,
    concurrency,
    key: configKey(appenders.length, concurrency),
    seconds: r3(s),
    billed_per_s: r2(r.billed / s),
    appends_per_s: r2(r.appends / s),
    commands_per_s: r2(r.commands / s),
    groups_per_s: r2(r.append_groups / s),
    appends_per_group: r2(r.appends / Math.max(1, r.append_groups)),
    commands_per_append: r2(r.commands / Math.max(1, r.appends)),
    conflicts: r.conflicts,
    wal_bytes_per_append: Math.round(wal / Math.max(1, r.appends)),
    wal_bytes_per_billed: Math.round(wal / Math.max(1, r.billed)),
    wal_mb_per_s: r3(wal / s / 1e6),
    statements_per_append: r2(r.statements / Math.max(1, r.appends)),
    postgres_cpu_ms_per_append: r4((1000 * pgCpu) / Math.max(1, r.appends)),
    postgres_cpu_ms_per_billed: r4((1000 * pgCpu) / Math.max(1, r.billed)),
    postgres_cores: r2(pgCpu / s),
    client_cpu_ms_per_billed: r4((1000 * clientCpu) / Math.max(1, r.billed)),
    client_cores: r2(clientCpu / s),
    machine_busy_cores: r2(busy / s),
    loadavg_start: la0,
    loadavg_end: la1,
    raw: { ...r, per_process: answers },
  };
}

const configKey = (processes, concurrency) => (processes === 1 ? String(concurrency) : `${processes}x${concurrency}`);

async function appendsOn(label, adminUrl, results) {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  onCleanup(`${label} admin connection`, () => admin.end());
  const dbName = `svc_cap_append_${label}_${Date.now()}`;
  const dbUrl = await createDatabase(admin, dbName, adminUrl);
  const target = { admin, dbName };
  const settings = await admin.query(
    `SELECT name, setting FROM pg_settings WHERE name IN ('synchronous_commit', 'synchronous_standby_names', 'fsync', 'wal_sync_method', 'commit_delay', 'full_page_writes', 'server_version')`,
  );
  // Several processes, as several gateways would be: each has its own group commit (one group on its way at a time).
  const appenders = [];
  for (let i = 0; i < CFG.appendProcesses; i++) appenders.push(await startAppender(`appender-${label}-${i}`, dbUrl));
  await Promise.all(appenders.map((a) => a.ask({ setup: 'many', accounts: CFG.appendAccounts })));
  const hot = await appenders[0].ask({ setup: 'hot' });
  await Promise.all(appenders.slice(1).map((a) => a.ask({ use_hot: hot.first })));

  // The server's WAL when nothing of ours runs: other work on the same server (the local one is shared).
  const lsn = await walLsn(admin);
  await sleep(5000);
  const idleWal = (await walSince(admin, lsn)) / 5;

  const configs = [...CFG.appendConcurrency.map((c) => [1, c]), [CFG.appendProcesses, 64]];
  for (const scenario of ['many', 'hot']) await appendRun(target, appenders, scenario, 16, 1); // warm-up
  const runs = [];
  // Interleaved repeats: every configuration meets the same spread of conditions.
  for (let i = 0; i < CFG.repeats; i++) {
    for (const scenario of ['many', 'hot']) {
      for (const [procs, c] of configs) {
        const r = await appendRun(target, appenders.slice(0, procs), scenario, c, CFG.appendSeconds);
        runs.push(r);
        log(
          `${label} ${scenario} ${r.key}: ${r.billed_per_s} billed/s, ${r.appends_per_s} appends/s, ${r.groups_per_s} groups/s, ${r.wal_bytes_per_append} WAL B/append, ` +
            `postgres ${r.postgres_cores} cores, clients ${r.client_cores}, machine ${r.machine_busy_cores} (load ${r.loadavg_start[0]})`,
        );
      }
    }
  }
  for (let i = 0; i < appenders.length; i++) await stopProcess(`appender-${label}-${i}`);
  const walCeiling = await walProbe(target, dbUrl, label);
  const summary = {};
  for (const scenario of ['many', 'hot']) {
    summary[scenario] = {};
    for (const [procs, c] of configs) {
      const rs = runs.filter((r) => r.scenario === scenario && r.key === configKey(procs, c));
      const f = (k) => spread(rs.map(typeof k === 'function' ? k : (r) => r[k]));
      summary[scenario][configKey(procs, c)] = {
        processes: procs,
        concurrency_per_process: c,
        billed_per_s: f('billed_per_s'),
        appends_per_s: f('appends_per_s'),
        groups_per_s: f('groups_per_s'),
        appends_per_group: f('appends_per_group'),
        commands_per_append: f('commands_per_append'),
        conflicts: f('conflicts'),
        // The minimum: other writers on a shared server only ever add to it.
        wal_bytes_per_append_min: Math.min(...rs.map((r) => r.wal_bytes_per_append)),
        wal_bytes_per_billed_min: Math.min(...rs.map((r) => r.wal_bytes_per_billed)),
        wal_mb_per_s: f('wal_mb_per_s'),
        postgres_cpu_ms_per_append: f('postgres_cpu_ms_per_append'),
        postgres_cpu_ms_per_billed: f('postgres_cpu_ms_per_billed'),
        postgres_cores: f('postgres_cores'),
        client_cpu_ms_per_billed: f('client_cpu_ms_per_billed'),
        client_cores: f('client_cores'),
        machine_busy_cores: f('machine_busy_cores'),
        loadavg_1m: f((r) => r.loadavg_start[0]),
      };
    }
  }
  results.appends[label] = {
    url: adminUrl.replace(/\/[^/]*$/, `/${dbName}`),
    settings: Object.fromEntries(settings.rows.map((r) => [r.name, r.setting])),
    idle_server_wal_bytes_per_s: Math.round(idleWal),
    runs,
    summary,
    wal_ceiling: walCeiling,
  };
}

/**
 * The WAL this server writes at most: 4 clients inserting rows of 64 KB (random bytes, stored
 * uncompressed) as fast as they can, CFG.appendSeconds at a time, CFG.repeats times. Bandwidth,
 * not commits: each transaction writes 64 KB.
 */
async function walProbe(target, dbUrl, label) {
  const pool = new pg.Pool({ connectionString: dbUrl, max: 4 });
  // The database is dropped WITH (FORCE) at the end: a connection still open then is cut, harmlessly.
  pool.on('error', () => undefined);
  try {
    // One value of 64 KB of random bytes, made once; each insert copies it (EXTERNAL: never compressed).
    for (const t of ['wal_probe_src', 'wal_probe']) {
      await pool.query(`CREATE TABLE ${t} (b bytea NOT NULL)`);
      await pool.query(`ALTER TABLE ${t} ALTER COLUMN b SET STORAGE EXTERNAL`);
    }
    await pool.query(`INSERT INTO wal_probe_src SELECT decode(string_agg(md5(random()::text), ''), 'hex') FROM generate_series(1, 4096)`);
    const insert = 'INSERT INTO wal_probe SELECT b FROM wal_probe_src';
    const runs = [];
    for (let i = 0; i < CFG.repeats; i++) {
      const la0 = loadavg();
      const lsn = await walLsn(target.admin);
      const busy0 = machineBusySeconds();
      const meter = backendCpuMeter(target.dbName);
      const t0 = Date.now();
      const end = t0 + CFG.appendSeconds * 1000;
      let n = 0;
      await Promise.all(
        Array.from({ length: 4 }, async () => {
          while (Date.now() < end) {
            await pool.query(insert);
            n++;
          }
        }),
      );
      const s = (Date.now() - t0) / 1000;
      const wal = await walSince(target.admin, lsn);
      const pgCpu = meter.stop();
      runs.push({
        seconds: r3(s),
        transactions_per_s: r2(n / s),
        wal_mb_per_s: r2(wal / s / 1e6),
        postgres_cores: r2(pgCpu / s),
        machine_busy_cores: r2((machineBusySeconds() - busy0) / s),
        loadavg_start: la0,
        loadavg_end: loadavg(),
      });
      await pool.query('TRUNCATE wal_probe');
    }
    const summary = { wal_mb_per_s: spread(runs.map((r) => r.wal_mb_per_s)), postgres_cores: spread(runs.map((r) => r.postgres_cores)) };
    log(`${label} WAL ceiling: ${JSON.stringify(summary.wal_mb_per_s)} MB/s`);
    return { method: '4 clients, each transaction an INSERT of the same 64 KB of random bytes (uncompressed)', runs, summary };
  } finally {
    await pool.end();
  }
}

function haScript(cmd, { sync = false } = {}) {
  const env = { ...process.env, ...HA_ENV };
  if (sync) return execFileSync('bash', [PG_HA_SCRIPT, cmd], { env, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', timeout: 60_000 });
  return new Promise((resolve, reject) => {
    const proc = spawn('bash', [PG_HA_SCRIPT, cmd], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (d) => (out += d));
    proc.stderr.on('data', (d) => (out += d));
    proc.on('exit', (code) => {
      fs.mkdirSync(LOG_DIR, { recursive: true });
      fs.appendFileSync(path.join(LOG_DIR, 'pg-ha.log'), `--- ${cmd} (exit ${code})\n${out}\n`);
      if (code === 0) resolve(out);
      else reject(new Error(`pg-ha.sh ${cmd} exited with ${code}: ${out.slice(-1500)}`));
    });
  });
}

async function appendsPhase(results) {
  results.appends = {};
  log(`append rate on the local PostgreSQL (${PG_ADMIN_URL})`);
  await appendsOn('local', PG_ADMIN_URL, results);
  if (!HA) return;
  for (const port of [
    HA_ENV.SVC_HA_PRIMARY_PORT,
    HA_ENV.SVC_HA_REPLICA_PORT,
    ...HA_ENV.SVC_HA_PG_PORTS.split(' '),
    ...HA_ENV.SVC_HA_API_PORTS.split(' '),
    HA_ENV.SVC_HA_ETCD_PORT,
  ]) {
    if (await portInUse(Number(port))) throw new Error(`port ${port} is taken: another pg-ha instance runs there (${HA_ENV.SVC_TOPOLOGY_DIR}?)`);
  }
  log(`pg-ha up in ${HA_ENV.SVC_TOPOLOGY_DIR}`);
  // Registered before `up`: a half-started pair is stopped too.
  onCleanup(
    'pg-ha',
    () => haScript('down').then(() => fs.readdirSync(HA_ENV.SVC_TOPOLOGY_DIR).length || fs.rmdirSync(HA_ENV.SVC_TOPOLOGY_DIR)),
    () => haScript('down', { sync: true }),
  );
  const t0 = Date.now();
  await haScript('up');
  log(`pg-ha up in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  await appendsOn('sync_pair', HA_URL, results);
}

// ---------------------------------------------------------------------------------------------

function machine() {
  const cpuinfo = fs.readFileSync('/proc/cpuinfo', 'utf8');
  return {
    nproc: os.cpus().length,
    cpu_model: ((/model name\s*:\s*(.*)/.exec(cpuinfo) || [])[1] || 'unknown').trim(),
    memory_gb: r2(os.totalmem() / 2 ** 30),
    node: process.version,
    postgres: null,
    loadavg_start: loadavg(),
  };
}

async function main() {
  const t0 = Date.now();
  for (const f of [
    GATEWAY_ENTRY,
    'dist/apps/worker/src/main.js',
    'dist/libs/eventstore/src/sql-event-store.js',
    'dist/libs/providers/src/simulator/index.js',
  ]) {
    if (!fs.existsSync(path.join(APP_ROOT, f))) throw new Error(`${f} is missing in ${APP_ROOT}: run \`npm run build\` at the root first`);
  }
  fs.rmSync(LOG_DIR, { recursive: true, force: true });
  const results = {
    date: new Date().toISOString(),
    command: `node bench/capacity.js ${process.argv.slice(2).join(' ')}`.trim(),
    commit: sh('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT }),
    tree_dirty: Boolean(sh('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: REPO_ROOT })),
    machine: machine(),
    config: { ...CFG, redis: REDIS_URL, quick: QUICK },
  };
  let failed = null;
  try {
    if (REQUESTS) {
      if (await portInUse(CFG.redisPort)) throw new Error(`port ${CFG.redisPort} is taken: set CAP_REDIS_PORT`);
      const redisDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-cap-redis-'));
      onCleanup('redis dir', () => fs.rmSync(redisDir, { recursive: true, force: true }));
      await startProcess(
        'redis-server',
        'redis-server',
        ['--port', String(CFG.redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', redisDir],
        {
          ready: /Ready to accept connections/,
        },
      );
      results.machine.redis = sh('redis-server', ['--version']);
      log('1. per billed request');
      await requestsPhase(results);
      await stopProcess('redis-server');
    }
    if (APPENDS) {
      log('2. append rate of one primary');
      await appendsPhase(results);
    }
  } catch (err) {
    failed = err;
    results.error = String(err && err.stack ? err.stack : err);
  } finally {
    await cleanupAll();
  }
  results.machine.loadavg_end = loadavg();
  results.elapsed_s = Math.round((Date.now() - t0) / 1000);
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  if (failed) {
    fs.writeFileSync(path.join(RESULTS_DIR, 'capacity-failed.json'), `${JSON.stringify(results, null, 2)}\n`);
    throw failed;
  }
  results.model = model(results);
  fs.writeFileSync(RESULTS_FILE, `${JSON.stringify(results, null, 2)}\n`);
  console.log(JSON.stringify(summaryOf(results), null, 2));
  log(`done in ${results.elapsed_s} s: ${path.relative(REPO_ROOT, RESULTS_FILE)}`);
}

/** What N billed requests a second take, from the medians (WAL: the minimum) of the non-streamed and streamed runs. */
function model(results) {
  const pr = results.per_request?.summary;
  if (!pr) return null;
  const out = {};
  for (const mode of MODES) {
    const s = pr[mode].per_request;
    out[mode] = {};
    for (const n of [1000, 10_000, 100_000]) {
      out[mode][n] = {
        gateway_cores: r2((n * s.cpu_ms.gateway.median) / 1000),
        worker_cores: r2((n * s.cpu_ms.worker.median) / 1000),
        postgres_cores: r2((n * s.cpu_ms.postgres.median) / 1000),
        redis_cores: r2((n * s.cpu_ms.redis.median) / 1000),
        pg_transactions_per_s: Math.round(n * s.pg_transactions.median),
        wal_mb_per_s: r2((n * s.wal_bytes.min) / 1e6),
        rows_inserted_per_s: Math.round(n * s.rows_inserted.median),
        redis_ops_per_s: Math.round(n * s.redis_commands.median),
      };
    }
  }
  return out;
}

function summaryOf(results) {
  const out = {
    date: results.date,
    commit: results.commit,
    elapsed_s: results.elapsed_s,
    machine: results.machine,
    pg_stat_statements: results.pg_stat_statements,
  };
  if (results.per_request) out.per_request = results.per_request.summary;
  if (results.appends)
    out.appends = Object.fromEntries(
      Object.entries(results.appends).map(([k, v]) => [
        k,
        { settings: v.settings, idle_server_wal_bytes_per_s: v.idle_server_wal_bytes_per_s, summary: v.summary, wal_ceiling: v.wal_ceiling?.summary },
      ]),
    );
  out.model = results.model;
  return out;
}

let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    log(`${sig}: stopping everything started`);
    cleanupAll().finally(() => process.exit(130));
  });
}

main().catch(async (err) => {
  if (interrupted) return;
  console.error(err);
  await cleanupAll();
  process.exit(1);
});
