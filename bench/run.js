#!/usr/bin/env node
'use strict';
/**
 * Side-by-side benchmark of the gateway, Portkey gateway 1.15.2 and a bare undici pass-through
 * proxy (the floor), all in front of ONE simulated upstream process, in one run; the sequential
 * phase adds the bare proxy with the durable steps alone (durable-proxy.js, the durable floor).
 *
 *   node bench/run.js [--quick] [--no-profile] [--no-docs] [--sequential-only] [--throughput-only] [--profile-only] [--ab-only] [--gateways-only] [--report-only]
 *
 * `--report-only` runs nothing: it reads bench/results/latest.json, works its figures and targets
 * out again with this file's rules, and writes both it and docs/BENCHMARKS.md.
 *
 * `--sequential-only` runs phase 1 (and its worker-paused diagnostic) for the gateway, the
 * durable floor and the direct upstream alone (BENCH_SEQ_TARGETS, a comma-separated list of
 * direct, bare, durable, portkey and gateway, names others), prints the figures and writes nothing.
 *
 * `BENCH_GATEWAY_NODE_OPTIONS="--require <repo>/bench/timeline.js"` with TIMELINE_DIR and
 * TIMELINE_ROOT times each step of the gateway's lone requests (see bench/timeline.js);
 * `BENCH_GATEWAY_FLAGS` gives the gateway node flags NODE_OPTIONS refuses (`--cpu-prof`);
 * `BENCH_EVERY_GATEWAY_FLAGS` gives such flags to every gateway process, phase 2c's included.
 * `BENCH_WORKER_NODE_OPTIONS` does for the worker what BENCH_GATEWAY_NODE_OPTIONS does for the
 * gateway (`--require <repo>/bench/count-queries.js`: its statements per phase).
 *
 * `--gateways-only` runs phase 2c alone (issue 45): 1, 2 and 4 gateway processes of this build on
 * one database with one worker, behind HAProxy (BENCH_HAPROXY, default /usr/sbin/haproxy; mode
 * http, round robin per request, or by key), 64 connections on 64 accounts and on 8 shared
 * accounts, then the same HAProxy in front of 1, 2 and 4 Portkey processes and 1, 2 and 4
 * durable floors (the references; BENCH_SCALING_REFERENCES, comma-separated, picks them;
 * BENCH_GATEWAY_LOADS picks the loads: accounts64, accounts8, accounts8ByKey);
 * prints the figures and writes nothing. With `BENCH_GATEWAY_NODE_OPTIONS="--require
 * <repo>/bench/count-queries.js"`, COUNT_QUERIES_DIR and COUNT_QUERIES_ROOT, each load's line adds
 * the statements the gateways sent per request, by kind.
 *
 * Every gateway runs with SVC_PEER_FORWARDING=on (holds and charges handed over) unless BENCH_PEER_FORWARDING says otherwise
 * (off, requests, ledger);
 * BENCH_GATEWAY_COUNTS (default 1,2,4) picks the Ns of section 2c, BENCH_GATEWAY_MODE=stream
 * streams its requests (the targets are non-streamed).
 *
 * `--ab-only` with BENCH_AB_ROOT=<another build> compares two builds in one run: the other build's
 * gateway and worker run beside this one's, each on a database of its own; sequential requests
 * go to both interleaved (with the direct upstream), then 64 connections load each in turn, in
 * alternating slices. The machine's speed drifts by tens of percent within minutes here, so two
 * separate runs cannot tell a change of a few percent; this can. Writes nothing.
 *
 * Builds nothing: the gateway's `npm run build` must have run (dist/ in the app root, which is
 * the parent of bench/ unless BENCH_APP_ROOT says otherwise). Creates a fresh PostgreSQL
 * database, starts every process as a child, measures, stops them all (also on failure and
 * SIGINT), drops the database, and writes bench/results/latest.json and docs/BENCHMARKS.md.
 *
 * Environment: BENCH_APP_ROOT, BENCH_PG_URL (an admin connection, default
 * postgres://postgres@127.0.0.1:5432/postgres), BENCH_REDIS_URL (default redis://127.0.0.1:6379/14),
 * BENCH_SEQ_N, BENCH_SEQ_WARMUP, BENCH_LOAD_SECONDS, BENCH_LOAD_WARMUP, BENCH_HOT_REQUESTS,
 * BENCH_GATEWAY_ROUNDS (rounds of section 2c, 3 by default), and
 * BENCH_COMMIT (the commit an app root outside this checkout was built from, for the report).
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
const LOG_DIR = path.join(RESULTS_DIR, 'logs');
const PROFILE_DIR = path.join(RESULTS_DIR, 'profiles');
const DOCS_FILE = path.join(REPO_ROOT, 'docs', 'BENCHMARKS.md');

const args = new Set(process.argv.slice(2));
const QUICK = args.has('--quick');
const PROFILE = !args.has('--no-profile');
const SEQUENTIAL_ONLY = args.has('--sequential-only');
// A quick comparison of two builds: this gateway alone at 64 connections, with the CPU each
// process spent per request; nothing written.
const THROUGHPUT_ONLY = args.has('--throughput-only');
// The gateway under --cpu-prof alone, streamed or not (BENCH_PROFILE_MODE=stream|json), its
// summary printed; nothing else measured and nothing written but the profile.
const PROFILE_ONLY = args.has('--profile-only');
const PROFILE_MODE = process.env.BENCH_PROFILE_MODE === 'stream' ? 'stream' : 'json';
const AB_ONLY = args.has('--ab-only');
// Phase 2c alone (N gateways behind one HAProxy): figures printed, nothing written.
const GATEWAYS_ONLY = args.has('--gateways-only');
const AB_ROOT = process.env.BENCH_AB_ROOT ? path.resolve(process.env.BENCH_AB_ROOT) : null;
const WRITE_DOCS = !args.has('--no-docs') && !SEQUENTIAL_ONLY && !THROUGHPUT_ONLY && !PROFILE_ONLY && !AB_ONLY && !GATEWAYS_ONLY;
const num = (name, full, quick) => Number(process.env[name] || (QUICK ? quick : full));
const CFG = {
  seqN: num('BENCH_SEQ_N', 1000, 300),
  seqWarmup: num('BENCH_SEQ_WARMUP', 100, 50),
  loadSeconds: num('BENCH_LOAD_SECONDS', 10, 3),
  loadWarmup: num('BENCH_LOAD_WARMUP', 2, 1),
  jitWarmup: num('BENCH_JIT_WARMUP', 3, 1),
  loadConnections: num('BENCH_CONNECTIONS', 64, 64),
  loadAccounts: 64,
  hotConnections: 256,
  hotRequests: num('BENCH_HOT_REQUESTS', 256 * 12, 256 * 4),
  exhaustRequests: QUICK ? 1024 : 2048,
  exhaustWorstCases: 256,
  profileSeconds: num('BENCH_LOAD_SECONDS', 10, 3),
};

const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef';
const PG_ADMIN_URL = process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379/14';
/** The second build of an A/B run: the same Redis server, another database. */
const REDIS_URL_B = (() => {
  const u = new URL(REDIS_URL);
  u.pathname = `/${(Number(u.pathname.slice(1)) || 0) === 13 ? 12 : 13}`;
  return u.toString();
})();
const LIVE_LIMITS = 'rpm=100000000,tpm=100000000000,concurrent=100000';

const CHAT = { model: 'sim/echo', messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 };
const BODIES = {
  json: JSON.stringify(CHAT),
  stream: JSON.stringify({ ...CHAT, stream: true, stream_options: { include_usage: true } }),
};
const MODES = ['json', 'stream'];
const MODE_LABEL = { json: 'non-streamed', stream: 'streamed' };
const TARGETS = ['direct', 'bare', 'portkey', 'gateway'];
// The sequential phase adds the durable floor: what the guarantees alone cost one request.
const SEQ_TARGETS = ['direct', 'bare', 'durable', 'portkey', 'gateway'];

const { Client, request } = require('undici');
const pg = require('pg');
const { summarize } = require('./profile-summary');

// ---------------------------------------------------------------------------------------------
// Child processes: started with their output in results/logs, always stopped.

const children = new Map(); // name -> { proc, name }
/** Drops the run's database (set once it exists); idempotent. */
let cleanupDb = async () => undefined;

function log(...a) {
  console.log(`[bench ${new Date().toISOString().slice(11, 19)}]`, ...a);
}

/**
 * A pool whose idle clients' errors are logged: the run's end drops its database WITH (FORCE),
 * which terminates any client still connected, and node-postgres emits that on the pool, where
 * an unheard 'error' ended the bench before it dropped the durable floor's database.
 */
function idleErrorsLogged(pool) {
  pool.on('error', (err) => log(`an idle database connection ended: ${err.message}`));
  return pool;
}

function startProcess(name, command, argv, { env = process.env, cwd = APP_ROOT, ready, timeoutMs = 30_000, logName = name } = {}) {
  fs.mkdirSync(LOG_DIR, { recursive: true });
  const out = fs.createWriteStream(path.join(LOG_DIR, `${logName}.log`));
  const proc = spawn(command, argv, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const child = { name, proc, exited: false, exit: null };
  children.set(name, child);
  child.done = new Promise((resolve) => {
    proc.on('exit', (code, signal) => {
      child.exited = true;
      child.exit = { code, signal };
      children.delete(name);
      resolve(child.exit);
    });
  });
  let seen = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${name} not ready after ${timeoutMs} ms (see ${path.relative(REPO_ROOT, LOG_DIR)}/${logName}.log)`)),
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
    proc.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    proc.on('exit', (code, signal) => {
      out.end();
      if (seen !== null) {
        clearTimeout(timer);
        reject(new Error(`${name} exited (${code ?? signal}) before it was ready; see ${path.relative(REPO_ROOT, LOG_DIR)}/${logName}.log`));
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

async function stopAll() {
  await Promise.all([...children.keys()].map((n) => stopProcess(n)));
}

process.on('exit', () => {
  for (const { proc } of children.values()) {
    try {
      process.kill(proc.pid, 'SIGKILL');
    } catch {}
  }
});

/** Runs a node script to completion; resolves with its stdout (stderr goes to the log). */
function runNode(name, argv, { env = process.env, cwd = APP_ROOT, okCodes = [0] } = {}) {
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
      if (okCodes.includes(code)) resolve({ code, stdout, stderr });
      else reject(new Error(`${name} exited with ${code}: ${stderr.slice(-2000)}`));
    });
  });
}

// ---------------------------------------------------------------------------------------------
// /proc sampling: RSS and CPU time of the processes under test.

const CLK_TCK = 100;

function cpuSplit(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { user: Number(fields[11]) / CLK_TCK, system: Number(fields[12]) / CLK_TCK };
  } catch {
    return null;
  }
}

function cpuSeconds(pid) {
  const c = cpuSplit(pid);
  return c && c.user + c.system;
}

function rssMb(pid) {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

/** Busy CPU seconds of the whole machine since boot (all cores), from /proc/stat. */
function machineBusySeconds() {
  const [user, nice, system, _idle, _iowait, irq, softirq, steal] = machineCpuTicks();
  return (user + nice + system + irq + softirq + (steal ?? 0)) / CLK_TCK;
}

/** The whole machine's CPU time since boot by kind, in ticks: the `cpu` line of /proc/stat. */
function machineCpuTicks() {
  return fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
}

/** Seconds of all cores' time the hypervisor gave to other guests since boot (`steal` in /proc/stat). */
function machineStolenSeconds() {
  return (machineCpuTicks()[7] ?? 0) / CLK_TCK;
}

/** Context switches of the whole host since boot (/proc/stat): every wake-up of a process that slept on a socket is one. */
function hostContextSwitches() {
  return Number(/^ctxt (\d+)$/m.exec(fs.readFileSync('/proc/stat', 'utf8'))?.[1] ?? NaN);
}

/**
 * Samples RSS every 200 ms and CPU time at start/stop for the named pids, the PostgreSQL
 * backends of the bench database, and the whole machine (to tell other load on it apart).
 */
function startSampler(pids, db) {
  const rssMax = {};
  const cpu0 = {};
  const sys0 = {};
  for (const [n, pid] of Object.entries(pids)) sys0[n] = cpuSplit(pid)?.system ?? null;
  const machine0 = machineBusySeconds();
  const switches0 = hostContextSwitches();
  const driver0 = process.cpuUsage();
  const wall0 = Date.now();
  for (const [n, pid] of Object.entries(pids)) cpu0[n] = cpuSeconds(pid);
  const io0 = Object.fromEntries(Object.entries(pids).map(([n, pid]) => [n, syscallCounts(pid)]));
  const tick = () => {
    for (const [n, pid] of Object.entries(pids)) {
      const r = rssMb(pid);
      if (r !== null) rssMax[n] = Math.max(rssMax[n] ?? 0, r);
    }
  };
  tick();
  const timer = setInterval(tick, 200);
  const pg0 = db ? pgBackendCpu(db) : null;
  return {
    async stop() {
      clearInterval(timer);
      tick();
      const cpu = {};
      const system = {};
      for (const [n, pid] of Object.entries(pids)) {
        const c = cpuSplit(pid);
        cpu[n] = c === null || cpu0[n] === null ? null : +(c.user + c.system - cpu0[n]).toFixed(2);
        system[n] = c === null || sys0[n] === null ? null : +(c.system - sys0[n]).toFixed(2);
      }
      const pgBy = {};
      if (db) {
        const [before, after] = [await pg0, await pgBackendCpu(db, pids)];
        let s = 0;
        for (const [pid, { cpu: c, owner }] of after) {
          const d = c - (before.get(pid)?.cpu ?? 0);
          s += d;
          pgBy[owner] = +((pgBy[owner] ?? 0) + d).toFixed(2);
        }
        cpu.postgres = +s.toFixed(2);
      }
      // Read and write system calls (sockets included): a loopback write costs the writer the receiver's side too.
      const syscalls = {};
      for (const [n, pid] of Object.entries(pids)) {
        const [a, b] = [io0[n], syscallCounts(pid)];
        if (a && b) syscalls[n] = Object.fromEntries(Object.keys(b).map((k) => [k, b[k] - a[k]]));
      }
      const d = process.cpuUsage(driver0);
      cpu.driver = +((d.user + d.system) / 1e6).toFixed(2);
      const rss = Object.fromEntries(Object.entries(rssMax).map(([k, v]) => [k, +v.toFixed(1)]));
      return {
        rss_max_mb: rss,
        cpu_s: cpu,
        system_cpu_s: system,
        syscalls,
        postgres_cpu_s_by_client: pgBy,
        machine_busy_s: +(machineBusySeconds() - machine0).toFixed(2),
        host_context_switches: hostContextSwitches() - switches0,
        wall_s: (Date.now() - wall0) / 1000,
      };
    },
  };
}

/** A process's read and write system calls so far (/proc/<pid>/io), or null when it cannot be read. */
function syscallCounts(pid) {
  try {
    const io = fs.readFileSync(`/proc/${pid}/io`, 'utf8');
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    return {
      reads: Number(/^syscr: (\d+)/m.exec(io)[1]),
      writes: Number(/^syscw: (\d+)/m.exec(io)[1]),
      // The main thread's and every other thread's: how often the process slept and was woken, or was preempted.
      voluntary_switches: Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)[1]),
      involuntary_switches: Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)[1]),
    };
  } catch {
    return null;
  }
}

/** CPU that none of the bench's processes used (other work on the machine), in cores. */
function foreignCores(sample, extraCpuS = 0) {
  const ours = Object.values(sample.cpu_s).reduce((a, b) => a + (b ?? 0), 0) + extraCpuS;
  return r2(Math.max(0, sample.machine_busy_s - ours) / sample.wall_s);
}

/** Local TCP ports of a process's sockets (from /proc/<pid>/fd and /proc/net/tcp*). */
function localPorts(pid) {
  const inodes = new Set();
  try {
    for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`, { encoding: 'utf8' }) || '');
      if (m) inodes.add(m[1]);
    }
  } catch {
    return new Set();
  }
  const ports = new Set();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = fs.readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 9 && inodes.has(f[9])) ports.add(parseInt(f[1].split(':')[1], 16));
    }
  }
  return ports;
}

/**
 * CPU seconds of the PostgreSQL backends serving the bench database, by pid, each with the
 * bench process on the other end of its connection (matched by the client's TCP port).
 */
async function pgBackendCpu(db, pids = {}) {
  // The durable floor's database too: its backends are that target's PostgreSQL work.
  const { rows } = await db.admin.query('SELECT pid, client_port FROM pg_stat_activity WHERE datname = ANY($1)', [[db.name, db.floorName]]);
  const owners = Object.entries(pids).map(([name, pid]) => [name, localPorts(pid)]);
  const out = new Map();
  for (const { pid, client_port } of rows) {
    const c = cpuSeconds(pid);
    const owner = owners.find(([, ports]) => ports.has(client_port))?.[0] ?? 'other';
    if (c !== null) out.set(pid, { cpu: c, owner });
  }
  return out;
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

// ---------------------------------------------------------------------------------------------
// Helpers

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
const r3 = (x) => (x === null || x === undefined || Number.isNaN(x) ? null : Math.round(x * 1000) / 1000);
const r2 = (x) => (x === null || x === undefined || Number.isNaN(x) ? null : Math.round(x * 100) / 100);

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

async function waitForPort(port, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const sock = net.connect(port, '127.0.0.1');
      sock.once('connect', () => (sock.destroy(), resolve(true)));
      sock.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on ${port}`);
    await sleep(100);
  }
}

/** Waits up to maxSeconds until the machine's busy CPU is below 0.25 cores over 2 s. */
async function waitForQuiet(maxSeconds) {
  const start = Date.now();
  for (;;) {
    const a = machineBusySeconds();
    await sleep(2000);
    const busy = (machineBusySeconds() - a) / 2;
    const waited = (Date.now() - start) / 1000;
    if (busy < 0.25 || waited >= maxSeconds) {
      if (busy >= 0.25) log(`the machine is still busy (${busy.toFixed(2)} cores used by other work); measuring anyway`);
      return { waited_s: Math.round(waited), busy_cores_before_start: r2(busy) };
    }
    if (waited < 3) log(`waiting for the machine to be quiet (${busy.toFixed(2)} cores busy)`);
  }
}

function sh(cmd, argv, opts = {}) {
  try {
    return execFileSync(cmd, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], ...opts }).trim();
  } catch {
    return null;
  }
}

function machine() {
  const cpuinfo = fs.readFileSync('/proc/cpuinfo', 'utf8');
  const model = (/model name\s*:\s*(.*)/.exec(cpuinfo) || [])[1] || 'unknown';
  return {
    nproc: Number(sh('nproc', []) || os.cpus().length),
    cpu_model: model.trim(),
    memory_gb: +(os.totalmem() / 2 ** 30).toFixed(1),
    node: process.version,
    os: `${os.type()} ${os.release()}`,
    postgres: null,
    loadavg_start: os.loadavg().map(r2),
    stolen_s_at_start: machineStolenSeconds(),
  };
}

function gitInfo() {
  // BENCH_COMMIT names the commit an exported BENCH_APP_ROOT was built from.
  const commit = process.env.BENCH_COMMIT || sh('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT });
  const status = sh('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: REPO_ROOT });
  return { commit, app_root: path.relative(REPO_ROOT, APP_ROOT) || '.', tree_dirty: APP_ROOT === REPO_ROOT ? Boolean(status) : null };
}

// ---------------------------------------------------------------------------------------------
// The targets: one undici client per target for the sequential phase.

function targetHeaders(target, ctx) {
  const h = { 'content-type': 'application/json' };
  if (target === 'portkey') {
    h['x-portkey-provider'] = 'openai';
    h['x-portkey-custom-host'] = ctx.simUrl; // http://127.0.0.1:PORT/v1
  }
  return h;
}

function targetOrigin(target, ctx) {
  return {
    direct: ctx.simOrigin,
    bare: ctx.bareOrigin,
    durable: ctx.durableOrigin,
    portkey: ctx.portkeyOrigin,
    gateway: ctx.gatewayOrigin,
    gateway_b: ctx.b?.gatewayOrigin,
  }[target];
}

function targetKey(target, ctx) {
  return { gateway: ctx.seqKey, gateway_b: ctx.b?.seqKey }[target] ?? 'anything';
}

const CHAT_PATH = '/v1/chat/completions';

/** Whether one SSE line is a `data:` event of the OpenAI chat stream that carries content. */
function carriesContent(line) {
  if (!line.startsWith('data:')) return false;
  const data = line.slice(5).trim();
  if (data === '' || data === '[DONE]') return false;
  try {
    const content = JSON.parse(data).choices?.[0]?.delta?.content;
    return typeof content === 'string' && content.length > 0;
  } catch {
    return false;
  }
}

/**
 * One request; `ms` is the time from sending it to the last byte of the answer. With
 * `firstContent`, the body is read as it arrives and `firstContentMs` is the time to the end of
 * the first SSE `data:` line whose `choices[0].delta.content` is not empty (null if none came).
 */
async function timedRequest(client, headers, body, { firstContent = false } = {}) {
  const t0 = process.hrtime.bigint();
  const res = await client.request({ path: CHAT_PATH, method: 'POST', headers, body });
  let text = '';
  let firstContentMs = null;
  if (!firstContent) text = await res.body.text();
  else {
    res.body.setEncoding('utf8');
    let scanned = 0; // text before this offset holds whole lines already looked at
    for await (const chunk of res.body) {
      const at = process.hrtime.bigint();
      text += chunk;
      if (firstContentMs !== null) continue;
      const end = text.lastIndexOf('\n');
      if (end < scanned) continue;
      for (const line of text.slice(scanned, end).split('\n')) {
        if (carriesContent(line.trimEnd())) {
          firstContentMs = Number(at - t0) / 1e6;
          break;
        }
      }
      scanned = end + 1;
    }
  }
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  return { ms, status: res.statusCode, text, firstContentMs };
}

/** The sequential phase's orders come from this seed: two runs of one build draw the same orders. */
const SEQ_ORDER_SEED = 45;

/** mulberry32: a small seeded generator of floats in [0, 1). */
function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A copy of `xs` in a random order (Fisher-Yates). */
function shuffled(xs, random) {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/**
 * Targets whose streamed requests are measured in a block of their own, interleaved with the
 * direct upstream only. Portkey's take 27 ms, nearly all of it with the cores idle, and this host
 * runs whatever comes next slower the more of its time it sits idle: a 25 ms pause before each
 * round of the other targets raised the gateway's overhead from 1.9 to 3.2 ms at p50 and the
 * durable floor's from 0.82 to 1.4 ms. In the rotation they set the pace of everyone else's.
 */
const OWN_BLOCK_WHEN_STREAMED = new Set(['portkey']);

/** The blocks of one mode's rounds: every target in one, but those measured on their own when streamed. */
function sequentialBlocks(targets, mode) {
  const apart = mode === 'stream' ? targets.filter((t) => OWN_BLOCK_WHEN_STREAMED.has(t)) : [];
  if (apart.length === 0) return [targets];
  return [targets.filter((t) => !apart.includes(t)), ['direct', ...apart]];
}

/** `total` rounds of one request per target, the first `warmup` not kept. */
async function sequentialRounds(clients, headers, targets, mode, total, warmup) {
  const lat = Object.fromEntries(targets.map((t) => [t, []]));
  // Streamed: the time to the first content-carrying SSE event too (issue 45's first byte).
  const first = Object.fromEntries(targets.map((t) => [t, []]));
  const bad = Object.fromEntries(targets.map((t) => [t, {}]));
  const random = seededRandom(SEQ_ORDER_SEED);
  for (let i = 0; i < total; i++) {
    // Interleaved, in a new random order each round: every target follows every other about
    // equally often. A rotation kept each target's successor: Portkey's streamed requests
    // were followed by the gateway's in 4 rounds of 5.
    for (const t of shuffled(targets, random)) {
      const r = await timedRequest(clients[t], headers[t], BODIES[mode], { firstContent: mode === 'stream' });
      const valid = r.status === 200 && (mode === 'json' ? r.text.includes('Echo: hello') : r.text.includes('data: [DONE]') && r.firstContentMs !== null);
      if (!valid) bad[t][r.status] = (bad[t][r.status] ?? 0) + 1;
      if (i >= warmup) {
        lat[t].push(r.ms);
        if (mode === 'stream') first[t].push(r.firstContentMs ?? r.ms);
      }
    }
  }
  return { lat, first, bad };
}

async function sequentialPhase(ctx, { targets: TARGETS = SEQ_TARGETS, modes = MODES, n = CFG.seqN, warmup = CFG.seqWarmup } = {}) {
  const out = {};
  const clients = Object.fromEntries(TARGETS.map((t) => [t, new Client(targetOrigin(t, ctx), { pipelining: 1, keepAliveTimeout: 60_000 })]));
  const headers = Object.fromEntries(TARGETS.map((t) => [t, { ...targetHeaders(t, ctx), authorization: `Bearer ${targetKey(t, ctx)}` }]));
  try {
    for (const mode of modes) {
      const pg0 = await xactCounts(ctx.db);
      const sampler = startSampler(ctx.pids, ctx.db);
      const stats = {};
      for (const block of sequentialBlocks(TARGETS, mode)) {
        const { lat, first, bad } = await sequentialRounds(clients, headers, block, mode, warmup + n, warmup);
        const direct = [...lat.direct].sort((a, b) => a - b);
        for (const t of block) {
          if (stats[t]) continue;
          const s = [...lat[t]].sort((a, b) => a - b);
          const paired = lat[t].map((v, i) => v - lat.direct[i]).sort((a, b) => a - b);
          stats[t] = {
            n: s.length,
            latency_ms: { p50: r3(pct(s, 50)), p90: r3(pct(s, 90)), p99: r3(pct(s, 99)), mean: r3(s.reduce((a, b) => a + b, 0) / s.length) },
            // Primary: per-percentile difference from calling the upstream directly (in the same block).
            overhead_ms: t === 'direct' ? null : { p50: r3(pct(s, 50) - pct(direct, 50)), p99: r3(pct(s, 99) - pct(direct, 99)) },
            // Secondary: percentiles of the paired differences (same round, back to back).
            paired_overhead_ms: t === 'direct' ? null : { p50: r3(pct(paired, 50)), p99: r3(pct(paired, 99)) },
            invalid: bad[t],
            ...(block.length < TARGETS.length ? { own_block: true } : {}),
          };
          if (mode === 'stream') {
            // Request sent to the first SSE event with content: the same two overheads as above.
            const f = [...first[t]].sort((a, b) => a - b);
            const fDirect = [...first.direct].sort((a, b) => a - b);
            const fPaired = first[t].map((v, i) => v - first.direct[i]).sort((a, b) => a - b);
            stats[t].first_content_ms = { p50: r3(pct(f, 50)), p90: r3(pct(f, 90)), p99: r3(pct(f, 99)) };
            stats[t].first_content_overhead_ms = t === 'direct' ? null : { p50: r3(pct(f, 50) - pct(fDirect, 50)), p99: r3(pct(f, 99) - pct(fDirect, 99)) };
            stats[t].first_content_paired_overhead_ms = t === 'direct' ? null : { p50: r3(pct(fPaired, 50)), p99: r3(pct(fPaired, 99)) };
          }
        }
      }
      const total = warmup + n;
      const sample = await sampler.stop();
      await settle({ gateway: ctx.pids.gateway, worker: ctx.pids.worker });
      const pg1 = await xactCounts(ctx.db);
      const gatewayRequests = total;
      out[mode] = {
        ...stats,
        cpu_s: sample.cpu_s,
        wall_s: r2(sample.wall_s),
        other_load_cores: foreignCores(sample),
        // Every statement outside BEGIN/COMMIT counts as a transaction too (reads included).
        pg_transactions_per_gateway_request: r2((pg1.commits - pg0.commits) / gatewayRequests),
        postgres_cpu_s_by_client: sample.postgres_cpu_s_by_client,
      };
      log(`sequential ${mode}: ` + TARGETS.map((t) => `${t} p50 ${stats[t].latency_ms.p50} p99 ${stats[t].latency_ms.p99}`).join(' | '));
      if (mode === 'stream') {
        log(
          'sequential stream, first content byte: ' +
            TARGETS.map((t) => `${t} p50 ${stats[t].first_content_ms.p50} p99 ${stats[t].first_content_ms.p99}`).join(' | ') +
            '; overhead p50 / p99: ' +
            TARGETS.filter((t) => t !== 'direct')
              .map((t) => `${t} ${stats[t].first_content_overhead_ms.p50} / ${stats[t].first_content_overhead_ms.p99} ms`)
              .join(', '),
        );
      }
    }
  } finally {
    await Promise.all(Object.values(clients).map((c) => c.close()));
  }
  return out;
}

async function load(name, opts) {
  const { stdout } = await runNode(name, [path.join(BENCH_DIR, 'load.js'), JSON.stringify(opts)], { cwd: BENCH_DIR });
  return JSON.parse(stdout.trim().split('\n').pop());
}

/** CPU ms per answered request over the processes that serve a billed request: gateway, worker, PostgreSQL, Redis. */
function cpuMsPerBilledRequest(run) {
  const cpu = ['gateway', 'worker', 'postgres', 'redis'].reduce((sum, k) => sum + (run.cpu_s[k] ?? 0), 0);
  return (1000 * cpu) / Math.max(1, run.ok);
}

/** The load of phase 2 on target `t` in `mode` (64 connections; the gateway's requests rotate over the 64 accounts). */
function targetLoad(ctx, t, mode) {
  return {
    url: `${targetOrigin(t, ctx)}${CHAT_PATH}`,
    connections: CFG.loadConnections,
    body: BODIES[mode],
    headers: targetHeaders(t, ctx),
    keys: t === 'gateway' ? ctx.loadKeys : t === 'gateway_b' ? ctx.b.loadKeys : ['anything'],
    warmup: 0,
  };
}

/**
 * Every target under load for a few seconds per mode before phase 1: a process fresh from its
 * start runs its code unoptimised for thousands of requests (V8 optimises what has run often),
 * and phase 1's own warm-up of 100 requests left the gateway's first mode at twice the time per
 * step of its second (issue 45). A server in production has long served that much.
 */
async function warmTargets(ctx, targets) {
  const out = {};
  for (const mode of MODES) {
    for (const t of targets) {
      const r = await load(`jit-warmup-${mode}-${t}`, { ...targetLoad(ctx, t, mode), duration: CFG.jitWarmup });
      out[`${mode}_${t}`] = { ok: r.ok, non2xx: r.non2xx + r.errors };
    }
  }
  await settle({ gateway: ctx.pids.gateway, worker: ctx.pids.worker });
  return out;
}

async function throughputPhase(ctx, targets = TARGETS) {
  const out = {};
  for (const mode of MODES) {
    out[mode] = {};
    for (const t of targets) {
      const opts = targetLoad(ctx, t, mode);
      // Warm-up, then let the requests it left in flight drain, so they don't eat into the window.
      const warm = await load(`load-${mode}-${t}-warmup`, { ...opts, duration: CFG.loadWarmup });
      await settle({ gateway: ctx.pids.gateway, worker: ctx.pids.worker, [t]: ctx.pids[t === 'direct' ? 'simulator' : t] });
      const pg0 = t === 'gateway' ? { ...(await xactCounts(ctx.db)), charged: await chargedCount(ctx.db) } : null;
      const sampler = startSampler(ctx.pids, ctx.db);
      const r = await load(`load-${mode}-${t}`, { ...opts, duration: CFG.loadSeconds });
      r.warmup_ok = warm.ok;
      r.warmup_non2xx = warm.non2xx + warm.errors;
      const s = await sampler.stop();
      out[mode][t] = {
        ...r,
        rss_max_mb: s.rss_max_mb,
        cpu_s: { ...s.cpu_s, client: r2(r.client_cpu_s) },
        system_cpu_s: s.system_cpu_s,
        syscalls_per_request: Object.fromEntries(
          Object.entries(s.syscalls).map(([n, c]) => [n, { reads: r2(c.reads / Math.max(1, r.ok)), writes: r2(c.writes / Math.max(1, r.ok)) }]),
        ),
        postgres_cpu_s_by_client: s.postgres_cpu_s_by_client,
        machine_busy_s: s.machine_busy_s,
        other_load_cores: foreignCores(s, r.client_cpu_s),
      };
      if (t === 'gateway') {
        // The worker's projection of this run belongs to it: wait for it before counting.
        await settle({ gateway: ctx.pids.gateway, worker: ctx.pids.worker });
        const pg1 = await xactCounts(ctx.db);
        const charged = (await chargedCount(ctx.db)) - pg0.charged;
        out[mode][t].charged = charged;
        out[mode][t].pg_transactions_per_request = r2((pg1.commits - pg0.commits) / Math.max(1, charged));
      }
      log(`load ${mode} ${t}: ${r.rps.toFixed(0)} req/s, p50 ${r.latency_ms.p50} ms, p99 ${r.latency_ms.p99} ms, non2xx ${r.non2xx}, errors ${r.errors}`);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Accounts and the ledger

/**
 * A read of one's own write: a chat completion, then `GET /v1/generation` for it at once, which
 * waits for the projection to show it. Idle, then under the 64-connection load of other accounts.
 */
async function ownReadPhase(ctx, { idle = 40, loadSeconds = 8 } = {}) {
  const client = new Client(ctx.gatewayOrigin, { pipelining: 1, keepAliveTimeout: 60_000 });
  const headers = { ...targetHeaders('gateway', ctx), authorization: `Bearer ${ctx.seqKey}` };
  const probe = async () => {
    const r = await timedRequest(client, headers, BODIES.json);
    if (r.status !== 200) throw new Error(`own read: chat answered ${r.status}`);
    const t0 = process.hrtime.bigint();
    const g = await client.request({
      path: `/v1/generation?id=${encodeURIComponent(JSON.parse(r.text).id)}`,
      method: 'GET',
      headers: { authorization: headers.authorization },
    });
    await g.body.dump();
    if (g.statusCode !== 200) throw new Error(`own read: /v1/generation answered ${g.statusCode}`);
    return Number(process.hrtime.bigint() - t0) / 1e6;
  };
  const summary = (ms) => {
    const s = [...ms].sort((a, b) => a - b);
    return { n: s.length, p50: r2(pct(s, 50)), p90: r2(pct(s, 90)), max: r2(s[s.length - 1]) };
  };
  try {
    const quiet = [];
    for (let i = 0; i < idle; i++) {
      quiet.push(await probe());
      await sleep(20);
    }
    const loaded = [];
    const opts = {
      url: `${ctx.gatewayOrigin}${CHAT_PATH}`,
      connections: CFG.loadConnections,
      body: BODIES.json,
      headers: targetHeaders('gateway', ctx),
      keys: ctx.loadKeys,
      warmup: 0,
      duration: loadSeconds,
    };
    let loading = true;
    const background = load('load-own-read', opts).finally(() => (loading = false));
    await sleep(1000);
    while (loading) {
      loaded.push(await probe());
      await sleep(20);
    }
    const l = await background;
    return { idle_ms: summary(quiet), under_load_ms: summary(loaded), load_rps: r2(l.rps), load_ok: l.ok };
  } finally {
    await client.close();
  }
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

/** Key look-ups read the identity projection (the worker's): wait until the key works. */
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

async function xactCounts(db) {
  await sleep(1200); // PostgreSQL flushes backend statistics at most once a second
  await db.admin.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await db.admin.query('SELECT xact_rollback::bigint AS n, xact_commit::bigint AS c FROM pg_stat_database WHERE datname = $1', [db.name]);
  return { rollbacks: Number(rows[0].n), commits: Number(rows[0].c) };
}

/** Over the accounts that got holds after `afterSeq`: the fewest and the most gateways (by lease) that placed them. */
async function gatewaysPerAccount(db, afterSeq) {
  const { rows } = await db.app.query(
    `SELECT coalesce(min(n), 0)::int AS min, coalesce(max(n), 0)::int AS max, count(*)::int AS accounts FROM (
       SELECT count(DISTINCT metadata->>'gateway') AS n FROM events WHERE seq > $1 AND type = 'HoldPlaced' GROUP BY stream) per_account`,
    [afterSeq],
  );
  return rows[0];
}

/** Events written after `afterSeq` and the transactions that wrote them; `seq`, the last one's. */
async function appendFacts(db, afterSeq = '0') {
  const { rows } = await db.app.query(
    `SELECT count(*)::int AS events, count(DISTINCT tx)::int AS txs, coalesce(max(seq), 0)::text AS seq FROM events WHERE seq > $1`,
    [afterSeq],
  );
  return rows[0];
}

async function chargedCount(db) {
  const { rows } = await db.app.query(`SELECT count(*)::int AS n FROM events WHERE type = 'UsageCharged'`);
  return rows[0].n;
}

async function streamFacts(db, accountId) {
  const { rows } = await db.app.query(`SELECT type, count(*)::int AS n, count(DISTINCT tx)::int AS txs FROM events WHERE stream = $1 GROUP BY type`, [
    `account-${accountId}`,
  ]);
  const { rows: all } = await db.app.query(`SELECT count(*)::int AS n, count(DISTINCT tx)::int AS txs FROM events WHERE stream = $1`, [`account-${accountId}`]);
  return { by_type: Object.fromEntries(rows.map((r) => [r.type, r.n])), events: all[0].n, appends: all[0].txs };
}

async function worstCaseNano(db) {
  const { rows } = await db.app.query(`SELECT max((data->>'amount_nano')::numeric)::text AS w FROM events WHERE type = 'HoldPlaced'`);
  return BigInt(rows[0].w);
}

const nanoToUsd = (n) => Number(n) / 1e9;

async function hotPhase(ctx) {
  const worst = await worstCaseNano(ctx.db);
  const out = { worst_case_usd: nanoToUsd(worst) };

  // (a) Funded: credit for every request's worst case (plus 10%), so none can get 402.
  const credit = (worst * BigInt(CFG.hotRequests) * 11n) / 10n;
  const funded = await newAccount(ctx, nanoToUsd(credit) + 0.01);
  await waitForKey(ctx, funded.key);
  await settle({ gateway: ctx.pids.gateway, worker: ctx.pids.worker });
  const before = await xactCounts(ctx.db);
  const sampler = startSampler(ctx.pids, ctx.db);
  const r = await load('load-hot-funded', {
    url: `${ctx.gatewayOrigin}${CHAT_PATH}`,
    connections: CFG.hotConnections,
    amount: CFG.hotRequests,
    body: BODIES.json,
    headers: targetHeaders('gateway', ctx),
    keys: [funded.key],
  });
  const s = await sampler.stop();
  const after = await xactCounts(ctx.db);
  const facts = await streamFacts(ctx.db, funded.id);
  out.funded = {
    account: funded.id,
    credit_usd: nanoToUsd(credit) + 0.01,
    in_flight: CFG.hotConnections,
    requests: r.requests,
    ok: r.ok,
    status_codes: r.status_codes,
    errors: r.errors,
    timeouts: r.timeouts,
    wall_s: r3(r.wall_s),
    billed_rps: r2(r.ok / r.wall_s),
    latency_ms: r.latency_ms,
    charged_events: facts.by_type.UsageCharged ?? 0,
    holds_placed: facts.by_type.HoldPlaced ?? 0,
    stream_events: facts.events,
    appends: facts.appends,
    commands_per_append: r2(facts.events / Math.max(1, facts.appends)),
    pg_rollbacks: after.rollbacks - before.rollbacks,
    pg_commits: after.commits - before.commits,
    rss_max_mb: s.rss_max_mb,
    cpu_s: { ...s.cpu_s, client: r2(r.client_cpu_s) },
    postgres_cpu_s_by_client: s.postgres_cpu_s_by_client,
    other_load_cores: foreignCores(s, r.client_cpu_s),
  };
  log(
    `hot funded: ${out.funded.billed_rps} billed req/s, ${r.ok}/${r.requests} ok, ${facts.appends} appends for ${facts.events} events, ${out.funded.pg_rollbacks} rollbacks`,
  );

  // (b) Under-funded: credit for exactly 256 worst cases, 8x as many requests: the account
  // runs dry under 256 in flight, the rest must get 402, and the balance must stay >= 0.
  const small = worst * BigInt(CFG.exhaustWorstCases);
  const dry = await newAccount(ctx, nanoToUsd(small));
  await waitForKey(ctx, dry.key);
  await settle({ gateway: ctx.pids.gateway, worker: ctx.pids.worker });
  const before2 = await xactCounts(ctx.db);
  const r2_ = await load('load-hot-exhaust', {
    url: `${ctx.gatewayOrigin}${CHAT_PATH}`,
    connections: CFG.hotConnections,
    amount: CFG.exhaustRequests,
    body: BODIES.json,
    headers: targetHeaders('gateway', ctx),
    keys: [dry.key],
  });
  const after2 = await xactCounts(ctx.db);
  const facts2 = await streamFacts(ctx.db, dry.id);
  out.exhaust = {
    account: dry.id,
    credit_usd: nanoToUsd(small),
    worst_cases_affordable: CFG.exhaustWorstCases,
    in_flight: CFG.hotConnections,
    requests: r2_.requests,
    ok: r2_.ok,
    status_codes: r2_.status_codes,
    errors: r2_.errors,
    wall_s: r3(r2_.wall_s),
    charged_events: facts2.by_type.UsageCharged ?? 0,
    stream_events: facts2.events,
    appends: facts2.appends,
    pg_rollbacks: after2.rollbacks - before2.rollbacks,
  };
  log(`hot exhaust: ${JSON.stringify(r2_.status_codes)}, ${facts2.appends} appends, ${out.exhaust.pg_rollbacks} rollbacks`);
  return out;
}

async function profilePhase(ctx) {
  fs.mkdirSync(PROFILE_DIR, { recursive: true });
  for (const f of fs.readdirSync(PROFILE_DIR)) if (f.endsWith('.cpuprofile')) fs.rmSync(path.join(PROFILE_DIR, f));
  await stopProcess('gateway');
  await settle({ worker: ctx.pids.worker });
  const gw = await startGateway(ctx, ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`], 'gateway-profiled');
  await waitForKey(ctx, ctx.loadKeys[0]);
  const opts = {
    url: `${ctx.gatewayOrigin}${CHAT_PATH}`,
    connections: CFG.loadConnections,
    body: BODIES[PROFILE_MODE],
    headers: targetHeaders('gateway', ctx),
    keys: ctx.loadKeys,
  };
  const warm = await load('load-profile-warmup', { ...opts, duration: Math.max(3, CFG.loadWarmup), warmup: 0 });
  await settle({ gateway: ctx.pids.gateway, worker: ctx.pids.worker });
  const sampler = startSampler({ gateway: gw.pid }, null);
  const r = await load('load-profile', { ...opts, duration: CFG.profileSeconds, warmup: 0 });
  const s = await sampler.stop();
  r.warmup_ok = warm.ok;
  // Requests the load left in flight finish (and are charged) before the process stops.
  await settle({ gateway: ctx.pids.gateway, worker: ctx.pids.worker });
  await stopProcess('gateway', 'SIGINT', 20_000);
  const files = fs.readdirSync(PROFILE_DIR).filter((f) => f.endsWith('.cpuprofile'));
  if (files.length === 0) throw new Error('the profiled gateway wrote no .cpuprofile');
  const file = path.join(PROFILE_DIR, files[0]);
  const summary = summarize(file, APP_ROOT, 15, r.window_us);
  log(`profile: ${path.relative(REPO_ROOT, file)} (${summary.busy_ms} ms busy of ${summary.sampled_ms} ms)`);
  return {
    file: path.relative(REPO_ROOT, file),
    pid: gw.pid,
    load: { rps: r2(r.rps), ok: r.ok, warmup_ok: r.warmup_ok, non2xx: r.non2xx + warm.non2xx, errors: r.errors + warm.errors, latency_ms: r.latency_ms },
    // What the process really ran on a CPU during the window, against the profile's busy time
    // (V8 samples wall-clock: time preempted inside a native call counts as that call's).
    gateway_cpu_s: s.cpu_s.gateway,
    gateway_system_cpu_s: s.system_cpu_s.gateway,
    window_wall_s: r2(s.wall_s),
    ...summary,
  };
}

/**
 * Node options for one gateway only (`BENCH_GATEWAY_NODE_OPTIONS`, and for build B
 * `BENCH_AB_GATEWAY_NODE_OPTIONS`) or the worker (`BENCH_WORKER_NODE_OPTIONS`), added to any NODE_OPTIONS the bench itself was given: a
 * runtime flag (say `--max-semi-space-size=32`) can then be measured against the same build
 * without it, or against another build, in one run.
 */
function gatewayNodeOptions(name) {
  const extra = process.env[name];
  return extra ? { NODE_OPTIONS: [process.env.NODE_OPTIONS, extra].filter(Boolean).join(' ') } : {};
}

const GATEWAY_ENTRY = 'dist/apps/gateway/src/main.js';

/**
 * The node flags a build's gateway runs with in production: those of its `npm run start:gateway`
 * (the Dockerfile and docker-compose.yml say the same). Each build of an A/B run gets its own.
 */
function productionGatewayFlags(appRoot) {
  const script = JSON.parse(fs.readFileSync(path.join(appRoot, 'package.json'), 'utf8')).scripts?.['start:gateway'] ?? '';
  const words = script.trim().split(/\s+/);
  const entry = words.indexOf(GATEWAY_ENTRY);
  return words[0] === 'node' && entry > 0 ? words.slice(1, entry) : [];
}

/** BENCH_EVERY_GATEWAY_FLAGS: node flags for every gateway process of this build (a flag's A/B). */
const everyGatewayFlags = () => process.env.BENCH_EVERY_GATEWAY_FLAGS?.split(/\s+/).filter(Boolean) ?? [];

async function startGateway(ctx, nodeFlags = [], logName = 'gateway') {
  // BENCH_GATEWAY_FLAGS: node flags NODE_OPTIONS does not take (--cpu-prof), for the main gateway.
  const extra = process.env.BENCH_GATEWAY_FLAGS?.split(/\s+/).filter(Boolean) ?? [];
  const gw = await startProcess(
    'gateway',
    process.execPath,
    [...productionGatewayFlags(APP_ROOT), ...everyGatewayFlags(), ...extra, ...nodeFlags, GATEWAY_ENTRY],
    {
      logName,
      env: ctx.appEnv({ PORT: String(ctx.gatewayPort), ...gatewayNodeOptions('BENCH_GATEWAY_NODE_OPTIONS') }),
      ready: /svc-gateway listening on (http:\/\/\S+)/,
    },
  );
  ctx.pids.gateway = gw.pid;
  return gw;
}

// ---------------------------------------------------------------------------------------------
// N gateways behind one balancer (issue 45)

const HAPROXY = process.env.BENCH_HAPROXY || '/usr/sbin/haproxy';
const PORTKEY_ENTRY = path.join(BENCH_DIR, 'node_modules/@portkey-ai/gateway/build/start-server.js');
/** BENCH_GATEWAY_COUNTS (comma-separated, starting with 1): the Ns of section 2c. */
const GATEWAY_COUNTS = (process.env.BENCH_GATEWAY_COUNTS ?? '1,2,4').split(',').map(Number);
// Each N is judged against one gateway in the same rounds: without it, the first N would be
// judged against itself (1x, "REACHED").
if (GATEWAY_COUNTS[0] !== 1) throw new Error(`BENCH_GATEWAY_COUNTS must start with 1, not ${GATEWAY_COUNTS[0]}`);
/** The two loads: every connection rotates over these accounts, one key each, per request. */
const ALL_GATEWAY_LOADS = {
  // The throughput phase's rotation: with 64 keys and 1, 2 or 4 gateways, each account's
  // requests land on one gateway (a key comes round every 64th request, a gateway every Nth).
  accounts64: { accounts: 64, label: '64 accounts', randomKeys: false },
  // Each request's key drawn at random: every account's requests land on every gateway.
  accounts8: { accounts: 8, label: '8 accounts, every one on every gateway', randomKeys: true },
  // The same requests with HAProxy choosing the gateway by the key (BY_KEY_BALANCING): each
  // account on one gateway, as an operator can route. Not a target's load: the 8 keys spread
  // unevenly over the gateways.
  accounts8ByKey: { accounts: 8, label: '8 accounts, each routed to one gateway by its key', randomKeys: true, byKey: true },
};
/** BENCH_GATEWAY_LOADS (comma-separated names of the loads above): the loads of section 2c. */
const GATEWAY_LOADS = process.env.BENCH_GATEWAY_LOADS
  ? Object.fromEntries(
      process.env.BENCH_GATEWAY_LOADS.split(',').map((name) => {
        if (!ALL_GATEWAY_LOADS[name]) throw new Error(`BENCH_GATEWAY_LOADS: no load ${name} (${Object.keys(ALL_GATEWAY_LOADS).join(', ')})`);
        return [name, ALL_GATEWAY_LOADS[name]];
      }),
    )
  : ALL_GATEWAY_LOADS;

/**
 * The Ns of 2c take turns in this many rounds, each run this long after CFG.loadWarmup through the
 * balancer: on a host whose speed drifts, one run per N in a row gave N = 4 anything from 0.42x to
 * 1.01x one gateway on the same build.
 */
const GATEWAY_ROUNDS = num('BENCH_GATEWAY_ROUNDS', 3, 1);
/** BENCH_GATEWAY_MODE: section 2c's requests, non-streamed (json, the targets' load) or streamed (stream). */
const GATEWAY_MODE = process.env.BENCH_GATEWAY_MODE === 'stream' ? 'stream' : 'json';
const GATEWAY_ROUND_SECONDS = Math.max(3, Math.round(CFG.loadSeconds / 2));

/** A fresh process is warmed alone in windows of this many seconds, until its CPU per request settles. */
const WARM_WINDOW_S = 3;
const WARM_WINDOWS = { min: QUICK ? 1 : 3, max: QUICK ? 2 : 12 };

/**
 * A fresh process runs cold for many seconds: its code unoptimised, its heap still growing. At
 * 4 s of warm-up alone, the two gateways started for N = 4 spent 1.5-1.9 times the CPU per
 * request of the first on the same requests, and N = 4 served 0.42x one gateway; warmed 30 s,
 * 1.06-1.18 times and 0.51x. So each is warmed alone, directly, with the load the phase measures,
 * window after window until its CPU per request falls by less than 5% from one to the next: what
 * is measured afterwards is what a long-running process serves. The curve is kept. Portkey's
 * processes for the reference are warmed the same way.
 */
async function warmAlone(ctx, g, target) {
  const curve = [];
  let [ok, non2xx] = [0, 0];
  while (curve.length < WARM_WINDOWS.max) {
    const cpu0 = cpuSeconds(g.pid);
    const w = await load(`${g.name}-warm-${curve.length + 1}`, {
      url: `http://127.0.0.1:${g.port}${CHAT_PATH}`,
      connections: CFG.loadConnections,
      body: BODIES.json,
      headers: targetHeaders(target, ctx),
      keys: ctx.loadKeys,
      warmup: 0,
      duration: WARM_WINDOW_S,
    });
    ok += w.ok;
    non2xx += w.non2xx + w.errors;
    curve.push({ rps: r2(w.rps), cpu_ms_per_request: r3((1000 * (cpuSeconds(g.pid) - cpu0)) / Math.max(1, w.ok)) });
    const [before, last] = curve.slice(-2).map((x) => x.cpu_ms_per_request);
    if (curve.length >= WARM_WINDOWS.min && last > before * 0.95) break;
  }
  log(
    `${target}: ${g.name} warmed alone in ${curve.length} windows of ${WARM_WINDOW_S} s, CPU ms/request ${curve.map((w) => w.cpu_ms_per_request).join(', ')}`,
  );
  return { ok, non2xx, curve };
}

/** Another gateway process of this build on the same database, Redis and data directory. */
async function startExtraGateway(ctx, i) {
  const port = await freePort();
  const name = `gateway-${i}`;
  const gw = await startProcess(name, process.execPath, [...productionGatewayFlags(APP_ROOT), ...everyGatewayFlags(), GATEWAY_ENTRY], {
    env: ctx.appEnv({ PORT: String(port), ...gatewayNodeOptions('BENCH_GATEWAY_NODE_OPTIONS') }),
    ready: /svc-gateway listening on (http:\/\/\S+)/,
  });
  return { name, port, pid: gw.pid };
}

/**
 * A backend that sends each API key's requests to one gateway: the key as the OpenAI SDKs send it
 * (Authorization, without its `Bearer `) or as the Anthropic SDKs do (x-api-key), so one key goes
 * to one gateway whichever SDK sends it; hashed consistently, so that a gateway joining or leaving
 * moves only its share of the keys. `balance hash` needs HAProxy 2.6 (Debian 12 has 2.6.12).
 */
const BY_KEY_BALANCING = [
  '  http-request set-var(txn.api_key) req.hdr(x-api-key)',
  '  http-request set-var(txn.api_key) req.hdr(authorization),regsub("^Bearer ","") if { req.hdr(authorization) -m found }',
  '  balance hash var(txn.api_key)',
  '  hash-type consistent',
];

/**
 * HAProxy from the distribution, in the foreground (-db) as a child process: mode http, so every
 * request of a keep-alive connection is balanced on its own (round robin over the gateways, or
 * `byKey` by its API key), and one thread (the load is small for it; it shares the 2 cores with
 * everything else). Its stats page (CSV) says how many requests each gateway got.
 */
async function startBalancer(ctx, gateways, { byKey = false, name = byKey ? 'haproxy-by-key' : 'haproxy' } = {}) {
  const [port, statsPort] = [await freePort(), await freePort()];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-haproxy-'));
  const cfg = path.join(dir, 'haproxy.cfg');
  fs.writeFileSync(
    cfg,
    [
      'global',
      '  nbthread 1',
      '  maxconn 4096',
      'defaults',
      '  mode http',
      '  option http-keep-alive',
      '  timeout connect 5s',
      '  timeout client 60s',
      '  timeout server 60s',
      'frontend gateways',
      `  bind 127.0.0.1:${port}`,
      '  default_backend gateways',
      'backend gateways',
      ...(byKey ? BY_KEY_BALANCING : ['  balance roundrobin']),
      ...gateways.map((g, i) => `  server g${i + 1} 127.0.0.1:${g.port}`),
      'listen stats',
      `  bind 127.0.0.1:${statsPort}`,
      '  stats enable',
      '  stats uri /stats',
      '',
    ].join('\n'),
  );
  // HAProxy prints nothing when it starts well: it is ready when its port answers; its exit
  // before that (a bad configuration) fails the phase, and the silence is no failure.
  const started = startProcess(name, HAPROXY, ['-db', '-f', cfg], { ready: /(?!)/, timeoutMs: 10_000, logName: `${name}-${gateways.length}` });
  started.catch(() => undefined);
  try {
    await Promise.race([waitForPort(port), started]);
    await waitForPort(statsPort);
  } finally {
    // HAProxy has read its configuration (or failed on it): the file is no longer needed.
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const pid = children.get(name)?.proc.pid;
  if (!pid) throw new Error(`haproxy exited at start; see ${path.relative(REPO_ROOT, LOG_DIR)}/${name}-${gateways.length}.log`);
  return { name, port, statsPort, pid, origin: `http://127.0.0.1:${port}` };
}

/** Requests each gateway has been sent so far, by server name (g1, g2, ...), from HAProxy's stats. */
async function balancerCounts(balancer) {
  const res = await request(`http://127.0.0.1:${balancer.statsPort}/stats;csv`);
  const [head, ...lines] = (await res.body.text()).trim().split('\n');
  const cols = head.replace(/^# /, '').split(',');
  const [px, sv, stot] = ['pxname', 'svname', 'stot'].map((c) => cols.indexOf(c));
  const out = {};
  for (const l of lines) {
    const f = l.split(',');
    if (f[px] === 'gateways' && /^g\d+$/.test(f[sv])) out[f[sv]] = Number(f[stot]);
  }
  return out;
}

/**
 * The requests the gateways handed to a peer (SVC_PEER_FORWARDING) so far, summed over them:
 * such a request is served twice (or, with SVC_PEER_FORWARDING=on or ledger, its hold and charge are
 * decided elsewhere), so a load that should need none shows it here.
 */
async function peerForwards(gateways) {
  let sum = 0;
  for (const g of gateways) {
    const res = await request(`http://127.0.0.1:${g.port}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const text = await res.body.text();
    sum += Number(/^svc_peer_forwards_total\{outcome="forwarded"\} (\d+)$/m.exec(text)?.[1] ?? 0);
    // SVC_PEER_FORWARDING=on or ledger: a hold and a charge per request served here with its account's owner.
    sum += Number(/^svc_peer_ledger_commands_total\{outcome="forwarded"\} (\d+)$/m.exec(text)?.[1] ?? 0) / 2;
  }
  return sum;
}

/**
 * With every gateway under bench/count-queries.js (BENCH_GATEWAY_NODE_OPTIONS and
 * COUNT_QUERIES_DIR), the statements all of them have sent so far, summed by kind; else null.
 */
function countedStatements() {
  const dir = process.env.COUNT_QUERIES_DIR;
  if (!dir || !fs.existsSync(dir)) return null;
  const sum = { statements: 0, append_groups: 0, group_function: 0, one_event_inserts: 0, lost_races: 0 };
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.json'))) {
    let c;
    try {
      c = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
    } catch {
      continue; // being rewritten: its next copy counts
    }
    sum.statements += c.statements;
    sum.append_groups += c.append_groups;
    sum.lost_races += c.lost_races ?? 0;
    for (const [head, n] of Object.entries(c.by_statement)) if (head.includes('eventstore_append_group')) sum.group_function += n;
  }
  // count-queries.js counts the statements that write appends: the function's calls and the INSERTs.
  sum.one_event_inserts = sum.append_groups - sum.group_function;
  return sum;
}

function statementsPerRequest(before, after, requests) {
  if (!before || !after) return null;
  return Object.fromEntries(Object.keys(after).map((k) => [k, r3((after[k] - before[k]) / Math.max(1, requests))]));
}

/**
 * N = 1, 2 and 4 gateway processes of this build on one database, one worker, behind one HAProxy;
 * at each N, 64 connections for the throughput phase's duration, non-streamed (streamed with BENCH_GATEWAY_MODE=stream), on two loads:
 * the 64 accounts of the throughput phase, and 8 accounts shared by all 64 connections.
 */
async function gatewaysPhase(ctx) {
  const out = {
    balancer: 'haproxy, mode http, balance roundrobin (per request), 1 thread',
    balancer_by_key: 'haproxy, mode http, balance hash of the key (Authorization or x-api-key) with hash-type consistent, 1 thread',
    workers: 1,
    mode: GATEWAY_MODE,
    rounds: GATEWAY_ROUNDS,
    round_seconds: GATEWAY_ROUND_SECONDS,
    direct_warmup_ok: 0,
    direct_warmup_non2xx: 0,
    by_n: {},
  };
  const gateways = [];
  const balancers = {};
  try {
    // Every gateway is started and warmed first; the Ns then take turns in rounds, each round in
    // another order, so that a host whose speed drifts (another tenant's load) moves every N alike.
    while (gateways.length < Math.max(...GATEWAY_COUNTS)) {
      // The first is the gateway of the other phases: warm already in a full run, not with --gateways-only.
      const g = gateways.length === 0 ? { name: 'gateway', port: ctx.gatewayPort, pid: ctx.pids.gateway } : await startExtraGateway(ctx, gateways.length + 1);
      gateways.push(g);
      const warm = await warmAlone(ctx, g, 'gateway');
      out.direct_warmup_ok += warm.ok;
      out.direct_warmup_non2xx += warm.non2xx;
      (out.warmup_curves ??= {})[g.name] = warm.curve;
    }
    for (const n of GATEWAY_COUNTS) {
      balancers[n] = {
        roundRobin: await startBalancer(ctx, gateways.slice(0, n), { name: `haproxy-${n}` }),
        byKey: await startBalancer(ctx, gateways.slice(0, n), { byKey: true, name: `haproxy-by-key-${n}` }),
      };
    }
    const runs = Object.fromEntries(GATEWAY_COUNTS.map((n) => [n, Object.fromEntries(Object.keys(GATEWAY_LOADS).map((l) => [l, []]))]));
    for (let round = 1; round <= GATEWAY_ROUNDS; round++) {
      for (const n of rotated(GATEWAY_COUNTS, round - 1)) {
        for (const [loadName, { accounts, randomKeys, byKey }] of Object.entries(GATEWAY_LOADS)) {
          const run = await measureGateways(
            n,
            loadName,
            round,
            byKey ? balancers[n].byKey : balancers[n].roundRobin,
            gateways.slice(0, n),
            accounts,
            randomKeys,
          );
          runs[n][loadName].push(run);
          log(
            `gateways ${n}, ${GATEWAY_LOADS[loadName].label}, round ${round}: ${run.rps.toFixed(0)} req/s, ` +
              `p99 ${run.latency_ms.p99} ms, non2xx ${run.non2xx}, errors ${run.errors}; requests per gateway ${JSON.stringify(run.requests_per_gateway)}; ` +
              `CPU ms/request ${run.cpu_ms_per_request_all} (gateways ${run.cpu_ms_per_request_gateways}, HAProxy ${run.cpu_ms_per_request_haproxy}); ` +
              `${run.pg_transactions_per_request} transactions/request, ${run.pg_rollbacks} rollbacks, ${run.peer_forwards} handed to a peer, ` +
              `${run.events_per_append_tx} events per append transaction; ${run.host_context_switches_per_request} context switches/request (host); gateways per account ${JSON.stringify(run.gateways_per_account)}; CPU s ${JSON.stringify(run.cpu_s)}, PostgreSQL by client ${JSON.stringify(run.postgres_cpu_s_by_client)}` +
              (run.statements_per_request ? `; statements per request ${JSON.stringify(run.statements_per_request)}` : ''),
          );
        }
      }
    }
    for (const n of GATEWAY_COUNTS) {
      out.by_n[n] = {};
      for (const loadName of Object.keys(GATEWAY_LOADS)) {
        out.by_n[n][loadName] = pairedRounds(runs[n][loadName], runs[GATEWAY_COUNTS[0]][loadName]);
        const g = out.by_n[n][loadName];
        log(
          `gateways ${n}, ${GATEWAY_LOADS[loadName].label}: ${g.rps_x_one}x one gateway (the median of the rounds' ${g.rounds.map((x) => x.x_one).join(', ')}), ${g.rps.toFixed(0)} req/s in the median round`,
        );
      }
    }
  } finally {
    // Requests the last load left in flight finish before the extra gateways stop.
    await settle({ ...Object.fromEntries(gateways.map((g) => [g.name, g.pid])), worker: ctx.pids.worker });
    await Promise.all(Object.values(balancers).flatMap((b) => [b.roundRobin, b.byKey].map((x) => stopProcess(x.name))));
    await Promise.all(gateways.slice(1).map((g) => stopProcess(g.name)));
  }
  return out;

  /** One measurement of N gateways on one load: a short warm-up through the balancer, then the run. */
  async function measureGateways(n, loadName, round, balancer, serving, accounts, randomKeys) {
    const gwPids = Object.fromEntries(serving.map((g) => [g.name, g.pid]));
    const pids = { ...gwPids, worker: ctx.pids.worker, haproxy: balancer.pid, simulator: ctx.pids.simulator };
    if (ctx.pids.redis) pids.redis = ctx.pids.redis;
    const opts = {
      url: `${balancer.origin}${CHAT_PATH}`,
      connections: CFG.loadConnections,
      body: BODIES[GATEWAY_MODE],
      headers: targetHeaders('gateway', ctx),
      keys: ctx.loadKeys.slice(0, accounts),
      randomKeys,
      warmup: 0,
    };
    const warm = await load(`gateways-${n}-${loadName}-warmup-${round}`, { ...opts, duration: CFG.loadWarmup });
    await settle({ ...gwPids, worker: ctx.pids.worker });
    const [c0, f0] = [await balancerCounts(balancer), await peerForwards(serving)];
    const q0 = countedStatements();
    const [x0, e0] = [await xactCounts(ctx.db), await appendFacts(ctx.db)];
    const sampler = startSampler(pids, ctx.db);
    const r = await load(`gateways-${n}-${loadName}-${round}`, { ...opts, duration: GATEWAY_ROUND_SECONDS });
    const s = await sampler.stop();
    const [c1, f1] = [await balancerCounts(balancer), await peerForwards(serving)];
    await settle({ ...gwPids, worker: ctx.pids.worker });
    const [x1, e1] = [await xactCounts(ctx.db), await appendFacts(ctx.db, e0.seq)];
    const statements = statementsPerRequest(q0, countedStatements(), r.ok);
    const spread = await gatewaysPerAccount(ctx.db, e0.seq);
    const cpu = Object.values(s.cpu_s).reduce((a, b) => a + (b ?? 0), 0) - (s.cpu_s.driver ?? 0) - (s.cpu_s.simulator ?? 0);
    const gatewaysCpu = Object.keys(gwPids).reduce((a, k) => a + (s.cpu_s[k] ?? 0), 0);
    const per = (x) => r3((1000 * x) / Math.max(1, r.ok));
    return {
      accounts,
      rps: r2(r.rps),
      ok: r.ok,
      warmup_ok: warm.ok,
      non2xx: r.non2xx,
      errors: r.errors,
      timeouts: r.timeouts,
      warmup_non2xx: warm.non2xx + warm.errors,
      status_codes: r.status_codes,
      latency_ms: r.latency_ms,
      requests_per_gateway: Object.fromEntries(Object.keys(c1).map((k) => [k, c1[k] - (c0[k] ?? 0)])),
      peer_forwards: f1 - f0,
      cpu_s: { ...s.cpu_s, client: r2(r.client_cpu_s) },
      // Gateways, worker, PostgreSQL, Redis and HAProxy (not the simulator, the client or the driver).
      cpu_ms_per_request_all: per(cpu),
      cpu_ms_per_request_gateways: per(gatewaysCpu),
      cpu_ms_per_request_haproxy: per(s.cpu_s.haproxy ?? 0),
      other_load_cores: foreignCores(s, r.client_cpu_s),
      postgres_cpu_s_by_client: s.postgres_cpu_s_by_client,
      system_cpu_s: s.system_cpu_s,
      syscalls: s.syscalls,
      // Every statement outside BEGIN/COMMIT counts as one; rollbacks bound the conflicts.
      pg_transactions_per_request: r3((x1.commits - x0.commits) / Math.max(1, r.ok)),
      pg_rollbacks: x1.rollbacks - x0.rollbacks,
      events_per_request: r3(e1.events / Math.max(1, r.ok)),
      events_per_append_tx: r3(e1.events / Math.max(1, e1.txs)),
      // Every process's wake-ups, the load client's included: what batching saves shows here first.
      host_context_switches_per_request: r2(s.host_context_switches / Math.max(1, r.ok)),
      // How many of the gateways placed holds on each account during the run (their leases).
      gateways_per_account: spread,
      ...(statements ? { statements_per_request: statements } : {}),
    };
  }
}

/** `xs` turned left by `k` places: each round of the N-gateway phase starts with another N. */
const rotated = (xs, k) => xs.map((_, i) => xs[(i + k) % xs.length]);

/**
 * The rounds of one N and load against those of the base (N = 1) run in the same rounds: the
 * round with the median requests/s stands for them (its figures), `rps_x_one` is the median of
 * each round's ratio to the base's run of the same round, and the failures are summed over every
 * round, so a target is met only if no round failed a request.
 */
function pairedRounds(runs, baseRuns) {
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
  const ratios = runs.map((r, i) => r.rps / baseRuns[i].rps);
  const byRps = [...runs].sort((a, b) => a.rps - b.rps);
  const sum = (k) => runs.reduce((a, r) => a + r[k], 0);
  return {
    ...byRps[Math.floor((byRps.length - 1) / 2)],
    rps_x_one: r3(median(ratios)),
    failures_all_rounds: sum('non2xx') + sum('errors') + sum('timeouts'),
    rounds: runs.map((r, i) => ({ rps: r.rps, x_one: r3(ratios[i]), non2xx: r.non2xx, errors: r.errors + r.timeouts, warmup_non2xx: r.warmup_non2xx ?? 0 })),
  };
}

/** Another Portkey process, headless, on a port of its own. */
async function startExtraPortkey(i) {
  const port = await freePort();
  const name = `portkey-${i}`;
  const started = await startProcess(name, process.execPath, [PORTKEY_ENTRY, '--headless', `--port=${port}`], {
    cwd: BENCH_DIR,
    ready: /Ready for connections/,
  });
  await waitForPort(port);
  return { name, port, pid: started.pid };
}

/** Another durable floor process, on the floor's database and Redis. */
async function startExtraDurable(ctx, i) {
  const name = `durable-proxy-${i}`;
  const started = await startProcess(name, process.execPath, [path.join(BENCH_DIR, 'durable-proxy.js'), ctx.simOrigin, ctx.db.floorUrl, REDIS_URL, '0'], {
    cwd: BENCH_DIR,
    ready: /durable-proxy listening on (\S+)/,
  });
  return { name, port: Number(new URL(started.match[1]).port), pid: started.pid };
}

/**
 * The references for 2c, not targets: the same HAProxy in front of 1, 2 and 4 processes of
 * another proxy, the 64 accounts' load. Portkey writes nothing durable and gathers nothing into
 * batches: what scaling out on this host costs a proxy whose work per request does not depend
 * on how many requests one process has in flight. The durable floor makes the gateway's durable
 * round trips (Redis, the hold's commit, the charge's commit) one request at a time, gathering
 * nothing either: what scaling out costs the guarantees alone, whatever the implementation.
 */
const SCALING_REFERENCES = {
  portkey: {
    first: (ctx) => ({ name: 'portkey', port: Number(new URL(ctx.portkeyOrigin).port), pid: ctx.pids.portkey }),
    extra: (ctx, i) => startExtraPortkey(i),
  },
  durable: {
    first: (ctx) => ({ name: 'durable-proxy', port: Number(new URL(ctx.durableOrigin).port), pid: ctx.pids.durable }),
    extra: startExtraDurable,
  },
};

/** Which references 2c runs (BENCH_SCALING_REFERENCES, comma-separated; empty for none). */
const SCALING_REFERENCE_TARGETS = (process.env.BENCH_SCALING_REFERENCES ?? 'portkey,durable').split(',').filter(Boolean);

async function referenceScalingPhase(ctx, target) {
  const reference = SCALING_REFERENCES[target];
  const procs = [];
  const balancers = {};
  const out = { balancer: 'haproxy, mode http, balance roundrobin (per request), 1 thread', by_n: {} };
  const headers = targetHeaders(target, ctx);
  try {
    // As for the gateways: every process started and warmed first, then the Ns in rounds.
    while (procs.length < Math.max(...GATEWAY_COUNTS)) {
      const p = procs.length === 0 ? reference.first(ctx) : await reference.extra(ctx, procs.length + 1);
      procs.push(p);
      const warm = await warmAlone(ctx, p, target);
      (out.warmup_curves ??= {})[p.name] = warm.curve;
    }
    for (const n of GATEWAY_COUNTS) balancers[n] = await startBalancer(ctx, procs.slice(0, n), { name: `haproxy-${target}-${n}` });
    const runs = Object.fromEntries(GATEWAY_COUNTS.map((n) => [n, []]));
    for (let round = 1; round <= GATEWAY_ROUNDS; round++) {
      for (const n of rotated(GATEWAY_COUNTS, round - 1)) {
        const balancer = balancers[n];
        const opts = {
          url: `${balancer.origin}${CHAT_PATH}`,
          connections: CFG.loadConnections,
          body: BODIES[GATEWAY_MODE],
          headers,
          keys: ctx.loadKeys,
          warmup: 0,
        };
        await load(`${target}-x${n}-warmup-${round}`, { ...opts, duration: CFG.loadWarmup });
        const pids = Object.fromEntries(procs.slice(0, n).map((p) => [p.name, p.pid]));
        const sampler = startSampler({ ...pids, haproxy: balancer.pid }, ctx.db);
        const r = await load(`${target}-x${n}-${round}`, { ...opts, duration: GATEWAY_ROUND_SECONDS });
        const s = await sampler.stop();
        const ownCpu = Object.keys(pids).reduce((a, k) => a + (s.cpu_s[k] ?? 0), 0);
        const run = {
          rps: r2(r.rps),
          ok: r.ok,
          non2xx: r.non2xx,
          errors: r.errors,
          timeouts: r.timeouts,
          latency_ms: r.latency_ms,
          cpu_ms_per_request_own: r3((1000 * ownCpu) / Math.max(1, r.ok)),
          cpu_ms_per_request_postgres: r3((1000 * (s.cpu_s.postgres ?? 0)) / Math.max(1, r.ok)),
          cpu_ms_per_request_haproxy: r3((1000 * (s.cpu_s.haproxy ?? 0)) / Math.max(1, r.ok)),
          host_context_switches_per_request: r2(s.host_context_switches / Math.max(1, r.ok)),
        };
        runs[n].push(run);
        log(
          `${target} x${n} behind HAProxy, round ${round}: ${r.rps.toFixed(0)} req/s, p99 ${r.latency_ms.p99} ms, non2xx ${r.non2xx}, errors ${r.errors}; ` +
            `own CPU ms/request ${run.cpu_ms_per_request_own}, PostgreSQL ${run.cpu_ms_per_request_postgres}; ${run.host_context_switches_per_request} context switches/request (host)`,
        );
      }
    }
    for (const n of GATEWAY_COUNTS) {
      out.by_n[n] = pairedRounds(runs[n], runs[GATEWAY_COUNTS[0]]);
      log(`${target} x${n}: ${out.by_n[n].rps_x_one}x one (the median of the rounds' ${out.by_n[n].rounds.map((x) => x.x_one).join(', ')})`);
    }
  } finally {
    await Promise.all(Object.values(balancers).map((b) => stopProcess(b.name)));
    await Promise.all(procs.slice(1).map((p) => stopProcess(p.name)));
  }
  return out;
}

/** Issue 45's targets for N gateways behind one balancer: >= 0.9x one gateway's req/s, 0 errors. */
function gatewaysTargets(g) {
  const targets = [];
  for (const n of GATEWAY_COUNTS.filter((k) => k > 1)) {
    for (const [loadName, { label, byKey }] of Object.entries(GATEWAY_LOADS)) {
      if (byKey) continue;
      const x = g.by_n[n]?.[loadName];
      if (!x) continue;
      const failures = x.failures_all_rounds ?? x.non2xx + x.errors + x.timeouts;
      const rounds = x.rounds ? `, the median of ${x.rounds.length} rounds (${x.rounds.map((r) => `${r.x_one}x`).join(', ')})` : '';
      targets.push({
        name: `${n} gateways behind one balancer >= 0.9x one gateway's req/s, 0 errors (${label}, ${MODE_LABEL[GATEWAY_MODE]})`,
        measured: `${x.rps_x_one}x${rounds}, ${failures} non-2xx or errors`,
        reached: x.rps_x_one >= 0.9 && failures === 0,
      });
    }
  }
  return targets;
}

// ---------------------------------------------------------------------------------------------
// Two builds in one run (--ab-only)

/** The build under BENCH_AB_ROOT's database and data directory, and how to drop them: registered before anything of B starts. */
async function prepareBuildB(ctx) {
  const name = `${ctx.db.name}_b`;
  await ctx.db.admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(ctx.db.url);
  url.pathname = `/${name}`;
  const db = { name, url: url.toString(), admin: ctx.db.admin, app: null };
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-b-'));
  const b = { db, pids: {}, gatewayPort: await freePort() };
  b.drop = async () => {
    if (db.app) await db.app.end().catch(() => undefined);
    await ctx.db.admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch((e) => log(`could not drop ${name}: ${e.message}`));
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  b.appEnv = (extra) => ctx.appEnv({ DATABASE_URL: db.url, REDIS_URL: REDIS_URL_B, SVC_DATA_DIR: dataDir, ...extra });
  return b;
}

/** The build under BENCH_AB_ROOT: its own gateway and worker, its own database and accounts; the same simulator. */
async function startBuildB(ctx, b) {
  const { db } = b;
  const gw = await startProcess('gateway-b', process.execPath, [...productionGatewayFlags(AB_ROOT), GATEWAY_ENTRY], {
    cwd: AB_ROOT,
    env: b.appEnv({ PORT: String(b.gatewayPort), ...gatewayNodeOptions('BENCH_AB_GATEWAY_NODE_OPTIONS') }),
    ready: /svc-gateway listening on (http:\/\/\S+)/,
  });
  b.pids.gateway = gw.pid;
  b.gatewayOrigin = `http://127.0.0.1:${b.gatewayPort}`;
  const worker = await startProcess('worker-b', process.execPath, ['dist/apps/worker/src/main.js'], {
    cwd: AB_ROOT,
    env: b.appEnv({ PORT: '0' }),
    ready: /svc-worker running/,
  });
  b.pids.worker = worker.pid;
  if (ctx.pids.redis) b.pids.redis = ctx.pids.redis;
  db.app = idleErrorsLogged(new pg.Pool({ connectionString: db.url, max: 2 }));
  b.seqKey = (await newAccount(b, 1000)).key;
  b.loadKeys = [];
  for (let i = 0; i < CFG.loadAccounts; i++) b.loadKeys.push((await newAccount(b, 1000)).key);
  await waitForKey(b, b.loadKeys[b.loadKeys.length - 1]);
  await waitForKey(b, b.seqKey);
}

const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Build A (this app root) against build B, in the same run; prints the figures side by side. */
async function abPhase(ctx) {
  const b = ctx.b;
  const all = { a: ctx.pids.gateway, aw: ctx.pids.worker, b: b.pids.gateway, bw: b.pids.worker };
  // Both builds run optimised code first, as in phase 0 of a full run.
  await warmTargets(ctx, ['gateway', 'gateway_b']);
  const seq = await sequentialPhase(ctx, { targets: ['direct', 'gateway', 'gateway_b'] });
  for (const mode of MODES) {
    const [A, B] = [seq[mode].gateway, seq[mode].gateway_b];
    log(
      `A/B sequential ${mode}: overhead p50 A ${A.overhead_ms.p50} ms, B ${B.overhead_ms.p50} ms (B/A ${r2(B.overhead_ms.p50 / A.overhead_ms.p50)}); p99 A ${A.overhead_ms.p99}, B ${B.overhead_ms.p99}`,
    );
  }
  const rounds = QUICK ? 2 : 4;
  const seconds = QUICK ? 3 : 5;
  for (const mode of MODES) {
    const runs = { A: [], B: [] };
    for (let i = 0; i < rounds; i++) {
      // The order alternates so that neither build always runs right after the other.
      for (const side of i % 2 === 0 ? ['A', 'B'] : ['B', 'A']) {
        const c = side === 'A' ? ctx : b;
        const opts = {
          url: `${c.gatewayOrigin}${CHAT_PATH}`,
          connections: CFG.loadConnections,
          body: BODIES[mode],
          headers: targetHeaders('gateway', c),
          keys: c.loadKeys,
          warmup: 0,
        };
        if (i === 0) await load(`ab-${mode}-${side}-warmup`, { ...opts, duration: CFG.loadWarmup });
        await settle(all);
        const sampler = startSampler(c.pids, c.db);
        const r = await load(`ab-${mode}-${side}-${i}`, { ...opts, duration: seconds });
        const s = await sampler.stop();
        const per = (cpu) => (1000 * (cpu ?? 0)) / Math.max(1, r.ok);
        runs[side].push({
          rps: r.rps,
          p99: r.latency_ms.p99,
          all: cpuMsPerBilledRequest({ ok: r.ok, cpu_s: s.cpu_s }),
          gateway: per(s.cpu_s.gateway),
          worker: per(s.cpu_s.worker),
          postgres: per(s.cpu_s.postgres),
          non2xx: r.non2xx + r.errors,
        });
      }
    }
    const m = (side, k) => median(runs[side].map((x) => x[k]));
    const row = (k, digits) => `A ${m('A', k).toFixed(digits)}, B ${m('B', k).toFixed(digits)} (B/A ${(m('B', k) / m('A', k)).toFixed(3)})`;
    log(
      `A/B ${mode}, medians of ${rounds} slices of ${seconds} s: req/s ${row('rps', 0)}; CPU ms/request all four ${row('all', 3)}, gateway ${row('gateway', 3)}, ` +
        `worker ${row('worker', 3)}, PostgreSQL ${row('postgres', 3)}; p99 ms ${row('p99', 0)}; non-2xx A ${runs.A.reduce((n, x) => n + x.non2xx, 0)}, B ${runs.B.reduce((n, x) => n + x.non2xx, 0)}`,
    );
    log(`A/B ${mode}, req/s per slice: A ${runs.A.map((x) => x.rps.toFixed(0)).join(' ')} | B ${runs.B.map((x) => x.rps.toFixed(0)).join(' ')}`);
  }
}

// ---------------------------------------------------------------------------------------------

/** --report-only: the last run's figures and targets worked out again, and its documents written again. */
function reportOnly() {
  const file = path.join(RESULTS_DIR, 'latest.json');
  const results = JSON.parse(fs.readFileSync(file, 'utf8'));
  results.figures = figures(results);
  fs.writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  fs.writeFileSync(DOCS_FILE, require('./report').markdown(results));
  for (const t of results.figures.targets) log(`${t.reached ? 'REACHED ' : 'MISSED  '} ${t.name}: ${t.measured}`);
}

async function main() {
  if (args.has('--report-only')) return reportOnly();
  const t0 = Date.now();
  for (const f of ['dist/apps/gateway/src/main.js', 'dist/apps/worker/src/main.js', 'dist/src/cli.js', 'dist/libs/providers/src/simulator/index.js']) {
    if (!fs.existsSync(path.join(APP_ROOT, f))) throw new Error(`${f} is missing in ${APP_ROOT}: run \`npm run build\` at the root first`);
  }
  if (!fs.existsSync(PORTKEY_ENTRY)) throw new Error('bench dependencies missing: run `npm install --prefix bench`');

  // Other work on these cores skews every figure: wait (a while) for the machine to be quiet.
  const quiet = await waitForQuiet(QUICK ? 5 : 30);
  const results = {
    quiet_wait: quiet,
    date: new Date().toISOString(),
    machine: machine(),
    git: gitInfo(),
    config: { ...CFG, quick: QUICK, redis: REDIS_URL, body: CHAT, gateway_command: ['node', ...productionGatewayFlags(APP_ROOT), GATEWAY_ENTRY].join(' ') },
    anomalies: [],
  };
  // What a hand-off between two processes costs on this host, before anything else runs.
  results.machine.loopback_round_trip = JSON.parse(execFileSync(process.execPath, [path.join(BENCH_DIR, 'pingpong.js')], { encoding: 'utf8' }));
  log(`loopback round trip between two processes: p50 ${results.machine.loopback_round_trip.p50_us} µs, p90 ${results.machine.loopback_round_trip.p90_us} µs`);
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  fs.rmSync(LOG_DIR, { recursive: true, force: true });

  // A fresh database for this run, dropped at the end.
  const dbName = `svc_bench_${Date.now()}_${process.pid}`;
  const adminDb = new pg.Client({ connectionString: PG_ADMIN_URL });
  await adminDb.connect();
  results.machine.postgres = (await adminDb.query('SHOW server_version')).rows[0].server_version;
  await adminDb.query(`CREATE DATABASE ${dbName}`);
  const dbUrl = new URL(PG_ADMIN_URL);
  dbUrl.pathname = `/${dbName}`;
  // The durable floor writes to a database of its own, so the gateway's transaction counts stay its own.
  const floorName = `${dbName}_floor`;
  const floorUrl = new URL(PG_ADMIN_URL);
  floorUrl.pathname = `/${floorName}`;
  const db = { name: dbName, url: dbUrl.toString(), floorName, floorUrl: floorUrl.toString(), admin: adminDb, app: null };
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-'));
  log(`database ${dbName}; app root ${APP_ROOT}`);

  const ctx = { db, pids: {}, gatewayPort: await freePort() };
  ctx.appEnv = (extra) => {
    const env = { ...process.env };
    for (const k of Object.keys(env)) if (k.startsWith('SVC_') || k === 'EVENTSTORE_URL') delete env[k];
    return {
      ...env,
      NODE_ENV: 'production',
      DATABASE_URL: db.url,
      REDIS_URL,
      SVC_ADMIN_TOKEN: ADMIN_TOKEN,
      SVC_SIMULATOR_URL: ctx.simUrl,
      SVC_RATE_LIMITS_LIVE: LIVE_LIMITS,
      SVC_DATA_DIR: dataDir,
      HOST: '127.0.0.1',
      // Issue 45: gateways hand a raced account to one of them, as a deployment of several does
      // (docs/operations.md); BENCH_PEER_FORWARDING=off measures them without.
      ...(process.env.BENCH_PEER_FORWARDING === 'off' ? {} : { SVC_PEER_FORWARDING: process.env.BENCH_PEER_FORWARDING || 'on' }),
      ...extra,
    };
  };

  cleanupDb = async () => {
    cleanupDb = async () => undefined;
    if (db.app) await db.app.end().catch(() => undefined);
    for (const name of [dbName, floorName])
      await adminDb.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch((e) => log(`could not drop ${name}: ${e.message}`));
    await adminDb.end().catch(() => undefined);
    fs.rmSync(dataDir, { recursive: true, force: true });
  };

  let failed = null;
  try {
    // The simulated upstream, in its own process, shared by every target.
    const sim = await startProcess('simulator', process.execPath, [path.join(BENCH_DIR, 'simulator.js'), APP_ROOT, '0'], {
      ready: /simulator listening on (\S+)/,
    });
    ctx.simUrl = sim.match[1];
    ctx.simOrigin = new URL(ctx.simUrl).origin;
    ctx.pids.simulator = sim.pid;

    const bare = await startProcess('bare-proxy', process.execPath, [path.join(BENCH_DIR, 'bare-proxy.js'), ctx.simOrigin, '0'], {
      cwd: BENCH_DIR,
      ready: /bare-proxy listening on (\S+)/,
    });
    ctx.bareOrigin = bare.match[1];
    ctx.pids.bare = bare.pid;

    await adminDb.query(`CREATE DATABASE ${floorName}`);
    const durable = await startProcess(
      'durable-proxy',
      process.execPath,
      [path.join(BENCH_DIR, 'durable-proxy.js'), ctx.simOrigin, db.floorUrl, REDIS_URL, '0'],
      {
        cwd: BENCH_DIR,
        ready: /durable-proxy listening on (\S+)/,
      },
    );
    ctx.durableOrigin = durable.match[1];
    ctx.pids.durable = durable.pid;

    const portkeyPort = await freePort();
    const portkey = await startProcess('portkey', process.execPath, [PORTKEY_ENTRY, '--headless', `--port=${portkeyPort}`], {
      cwd: BENCH_DIR,
      ready: /Ready for connections/,
    });
    await waitForPort(portkeyPort);
    ctx.portkeyOrigin = `http://127.0.0.1:${portkeyPort}`;
    ctx.pids.portkey = portkey.pid;

    // The gateway first (it creates the schema), then the worker.
    await startGateway(ctx);
    ctx.gatewayOrigin = `http://127.0.0.1:${ctx.gatewayPort}`;
    const worker = await startProcess('worker', process.execPath, ['dist/apps/worker/src/main.js'], {
      env: ctx.appEnv({ PORT: '0', ...gatewayNodeOptions('BENCH_WORKER_NODE_OPTIONS') }),
      ready: /svc-worker running/,
    });
    ctx.pids.worker = worker.pid;
    const rpid = await redisPid(REDIS_URL);
    if (rpid && fs.existsSync(`/proc/${rpid}`)) ctx.pids.redis = rpid;
    db.app = idleErrorsLogged(new pg.Pool({ connectionString: db.url, max: 2 }));
    await sleep(500);
    results.rss_idle_mb = {
      gateway: r2(rssMb(ctx.pids.gateway)),
      worker: r2(rssMb(ctx.pids.worker)),
      portkey: r2(rssMb(ctx.pids.portkey)),
      bare: r2(rssMb(ctx.pids.bare)),
    };

    // Accounts: one for the sequential phase, 64 for the 64-connection runs (one per connection).
    const seq = await newAccount(ctx, 1000);
    ctx.seqKey = seq.key;
    ctx.loadKeys = [];
    for (let i = 0; i < CFG.loadAccounts; i++) ctx.loadKeys.push((await newAccount(ctx, 1000)).key);
    await waitForKey(ctx, ctx.loadKeys[ctx.loadKeys.length - 1]);
    await waitForKey(ctx, ctx.seqKey);
    log(`processes up: simulator ${ctx.simOrigin}, bare ${ctx.bareOrigin}, portkey ${ctx.portkeyOrigin}, gateway ${ctx.gatewayOrigin}`);

    if (AB_ONLY) {
      if (!AB_ROOT) throw new Error('--ab-only needs BENCH_AB_ROOT=<the root of another build>');
      const dropA = cleanupDb;
      ctx.b = await prepareBuildB(ctx);
      cleanupDb = async () => {
        await ctx.b.drop();
        await dropA();
      };
      // B's gateway may fail to start (a bad BENCH_AB_GATEWAY_NODE_OPTIONS): its database is dropped all the same.
      await startBuildB(ctx, ctx.b);
      log(`A/B: A = ${APP_ROOT} (${ctx.gatewayOrigin}), B = ${AB_ROOT} (${ctx.b.gatewayOrigin})`);
      await abPhase(ctx);
      return;
    }

    if (PROFILE_ONLY) {
      const p = await profilePhase(ctx);
      log(
        `profile (${PROFILE_MODE}): ${p.file}, ${p.load.rps} req/s, gateway CPU ${((1000 * p.gateway_cpu_s) / Math.max(1, p.load.ok)).toFixed(2)} ms per request`,
      );
      console.log(JSON.stringify({ top_functions: p.top_functions, top_files: p.top_files, by_area: p.by_area }));
      return;
    }

    if (GATEWAYS_ONLY) {
      const g = await gatewaysPhase(ctx);
      for (const target of SCALING_REFERENCE_TARGETS) await referenceScalingPhase(ctx, target);
      for (const t of gatewaysTargets(g)) log(`${t.reached ? 'REACHED ' : 'MISSED  '} ${t.name}: ${t.measured}`);
      console.log(JSON.stringify(g));
      return;
    }

    if (THROUGHPUT_ONLY) {
      // BENCH_TARGETS=gateway,portkey puts Portkey beside it in the same run.
      const targets = (process.env.BENCH_TARGETS || 'gateway').split(',');
      const figures = await throughputPhase(ctx, targets);
      for (const [mode, byTarget] of Object.entries(figures)) {
        const g = byTarget.gateway;
        const per = (s) => ((1000 * (s ?? 0)) / Math.max(1, g.ok)).toFixed(2);
        log(
          `${mode}: ${g.rps.toFixed(0)} req/s, p50 ${g.latency_ms.p50} ms, p99 ${g.latency_ms.p99} ms; CPU ms/request: gateway ${per(g.cpu_s.gateway)}, ` +
            `worker ${per(g.cpu_s.worker)}, PostgreSQL ${per(g.cpu_s.postgres)} (gateway ${per(g.postgres_cpu_s_by_client?.gateway)}, worker ${per(g.postgres_cpu_s_by_client?.worker)}), ` +
            `Redis ${per(g.cpu_s.redis)}, all four ${cpuMsPerBilledRequest(g).toFixed(2)}; ${g.pg_transactions_per_request} transactions per request; ` +
            `gateway system calls per request: ${g.syscalls_per_request.gateway?.reads} reads, ${g.syscalls_per_request.gateway?.writes} writes; gateway max RSS ${g.rss_max_mb?.gateway} MB`,
        );
        const p = byTarget.portkey;
        if (p) {
          const pp = (s) => ((1000 * (s ?? 0)) / Math.max(1, p.ok)).toFixed(2);
          log(
            `${mode}, Portkey: ${p.rps.toFixed(0)} req/s, p50 ${p.latency_ms.p50} ms, p99 ${p.latency_ms.p99} ms; CPU ms/request ${pp(p.cpu_s.portkey)}; system calls per request: ${p.syscalls_per_request.portkey?.reads} reads, ${p.syscalls_per_request.portkey?.writes} writes`,
          );
        }
      }
      return;
    }

    const seqTargets = process.env.BENCH_SEQ_TARGETS?.split(',') ?? (SEQUENTIAL_ONLY ? ['direct', 'durable', 'gateway'] : SEQ_TARGETS);
    log(`0. warming every target: ${CFG.jitWarmup} s of ${CFG.loadConnections} connections per target and mode`);
    results.jit_warmup = await warmTargets(ctx, seqTargets);
    log(`1. sequential overhead (${CFG.seqN} requests per target and mode after ${CFG.seqWarmup} warm-up, interleaved)`);
    results.sequential = await sequentialPhase(ctx, { targets: seqTargets });

    // Diagnostic: the same, gateway only, with the worker paused (its projections compete for
    // the same 2 cores and the same PostgreSQL): how much of the overhead is the worker's. The
    // phase above rotates five targets, this one two, so the worker's share is read against the
    // same two-target rotation with the worker running, measured just before.
    const nPaused = QUICK ? 200 : 500;
    const twoTargets = { targets: ['direct', 'gateway'], modes: ['json'], n: nPaused, warmup: 30 };
    log(`1b. sequential, gateway only, worker running, then paused (SIGSTOP), ${nPaused} requests each`);
    await settle({ gateway: ctx.pids.gateway, worker: ctx.pids.worker });
    results.sequential_worker_running = await sequentialPhase(ctx, twoTargets);
    await settle({ gateway: ctx.pids.gateway, worker: ctx.pids.worker });
    process.kill(ctx.pids.worker, 'SIGSTOP');
    try {
      results.sequential_worker_paused = await sequentialPhase(ctx, twoTargets);
    } finally {
      process.kill(ctx.pids.worker, 'SIGCONT');
    }
    await settle({ gateway: ctx.pids.gateway, worker: ctx.pids.worker });
    if (SEQUENTIAL_ONLY) {
      const fc = firstContentTarget(results.sequential.stream);
      log(`${fc.target.reached ? 'REACHED ' : 'MISSED  '} ${fc.target.name}: ${fc.target.measured}`);
      for (const [phase, figures] of Object.entries({
        ...results.sequential,
        running: results.sequential_worker_running.json,
        paused: results.sequential_worker_paused.json,
      })) {
        const floor = figures.durable ? `; durable floor p50 ${figures.durable.overhead_ms.p50} ms, p99 ${figures.durable.overhead_ms.p99} ms` : '';
        log(
          `${phase}: gateway overhead p50 ${figures.gateway.overhead_ms.p50} ms, p99 ${figures.gateway.overhead_ms.p99} ms${floor}; ${figures.pg_transactions_per_gateway_request} PostgreSQL transactions per request`,
        );
      }
      return;
    }

    log(`2. throughput at ${CFG.loadConnections} connections (${CFG.loadSeconds} s each after ${CFG.loadWarmup} s warm-up)`);
    results.throughput = await throughputPhase(ctx);
    log("2b. reading one's own generation right after the request, idle and under load");
    results.own_read = await ownReadPhase(ctx);
    log(
      `own read: idle p50 ${results.own_read.idle_ms.p50} ms, under load p50 ${results.own_read.under_load_ms.p50} ms (p90 ${results.own_read.under_load_ms.p90})`,
    );

    log(`2c. 1, 2 and 4 gateways behind one HAProxy, ${CFG.loadConnections} connections, 64 accounts (each on one gateway) and 8 (each on every gateway)`);
    results.gateways = await gatewaysPhase(ctx);
    for (const target of SCALING_REFERENCE_TARGETS) results.gateways[target] = await referenceScalingPhase(ctx, target);

    log(`3. hot account (${CFG.hotConnections} in flight on one account)`);
    results.hot = await hotPhase(ctx);
    {
      // The same load on the ledger alone (no HTTP, no upstream): its own ceiling.
      const { stdout } = await runNode('hot-ledger', [path.join(BENCH_DIR, 'hot-ledger.js'), APP_ROOT, '3072', String(CFG.hotConnections)], {
        env: ctx.appEnv({}),
      });
      results.hot.ledger_only = JSON.parse(stdout.trim().split('\n').pop());
      log(
        `hot, ledger only: ${results.hot.ledger_only.billed_rps} billed req/s, ${results.hot.ledger_only.appends} appends for ${results.hot.ledger_only.commands} commands, ${results.hot.ledger_only.conflicts} conflicts`,
      );
    }

    if (PROFILE) {
      log('profile: gateway under --cpu-prof, 64 connections, non-streamed');
      results.profile = await profilePhase(ctx);
    }

    // Gateway traffic is over: let the worker finish projecting, then stop it for the rebuild.
    await settle({ gateway: ctx.pids.gateway, worker: ctx.pids.worker });
    await stopProcess('gateway');
    await settle({ worker: ctx.pids.worker });
    await stopProcess('worker');

    log('4. projection rebuild from PostgreSQL');
    const { stdout: rb } = await runNode('rebuild', [path.join(BENCH_DIR, 'rebuild.js'), APP_ROOT], { env: ctx.appEnv({}) });
    const rebuild = JSON.parse(rb.trim().split('\n').pop());
    results.rebuild = {
      ...rebuild,
      events_per_s_all: Math.round(rebuild.store_events / (rebuild.total_ms / 1000)),
      projections: rebuild.projections.map((p) => ({ ...p, ms: r2(p.ms), events_per_s: Math.round(p.events / (p.ms / 1000)) })),
    };
    log(
      `rebuild: ${rebuild.store_events} events, all ${rebuild.projections.length} projections in ${(rebuild.total_ms / 1000).toFixed(2)} s = ${results.rebuild.events_per_s_all} events/s`,
    );

    log('ledger audit');
    const ta = Date.now();
    const audit = await runNode('ledger-audit', ['dist/src/cli.js', 'ledger', 'audit', '--json'], { env: ctx.appEnv({}), okCodes: [0, 1] });
    results.audit = summarizeAudit(audit, Date.now() - ta, results.hot);
    log(
      `audit: exit ${audit.code}, ${results.audit.violations} violations, ${results.audit.mismatches} mismatches, min available $${results.audit.min_available_usd}`,
    );

    results.consistency = await consistency(db, results);

    log('PostgreSQL commit probe (why appends cost what they cost)');
    results.pg_probe = await commitProbe(db);
    log(`commit probe: ${JSON.stringify(results.pg_probe)}`);
  } catch (err) {
    failed = err;
    results.error = String(err && err.stack ? err.stack : err);
  } finally {
    await stopAll();
    await cleanupDb();
    results.logs = scanLogs();
  }
  results.machine.loadavg_end = os.loadavg().map(r2);
  results.elapsed_s = Math.round((Date.now() - t0) / 1000);
  // A virtual machine's neighbours take time the run never sees as load: every figure is slower
  // and single runs vary (the eighteenth round's host lost 5-48% of its time, minute to minute).
  results.machine.stolen_share = r3((machineStolenSeconds() - results.machine.stolen_s_at_start) / Math.max(1, results.elapsed_s * results.machine.nproc));
  if (failed) {
    fs.writeFileSync(path.join(RESULTS_DIR, 'failed.json'), JSON.stringify(results, null, 2));
    throw failed;
  }
  results.figures = figures(results);
  checkAnomalies(results);
  fs.writeFileSync(path.join(RESULTS_DIR, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  if (WRITE_DOCS) {
    fs.mkdirSync(path.dirname(DOCS_FILE), { recursive: true });
    fs.writeFileSync(DOCS_FILE, require('./report').markdown(results));
  }
  log(`done in ${results.elapsed_s} s: bench/results/latest.json${WRITE_DOCS ? ', docs/BENCHMARKS.md' : ''}`);
  for (const t of results.figures.targets) log(`${t.reached ? 'REACHED ' : 'MISSED  '} ${t.name}: ${t.measured}`);
  if (results.anomalies.length) log(`anomalies:\n  ${results.anomalies.join('\n  ')}`);
}

/**
 * Transactions per second of a tiny append (BEGIN; INSERT; COMMIT) from 1 and 16 clients, with
 * and without a pg_notify in the transaction (the event store notifies on every append).
 * PostgreSQL serialises the commits of transactions that NOTIFY (a database-wide lock held
 * through the WAL flush), so the second pair shows the ceiling that puts on appends.
 */
async function commitProbe(db) {
  await db.app.query('CREATE TABLE bench_commit_probe (id bigserial PRIMARY KEY, data jsonb NOT NULL)');
  const pool = idleErrorsLogged(new pg.Pool({ connectionString: db.url, max: 16 }));
  const seconds = QUICK ? 1 : 2;
  const run = async (clients, notify) => {
    let n = 0;
    const end = Date.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: clients }, async () => {
        const c = await pool.connect();
        try {
          while (Date.now() < end) {
            await c.query('BEGIN');
            await c.query(`INSERT INTO bench_commit_probe (data) VALUES ('{"type":"HoldPlaced"}')`);
            if (notify) await c.query(`SELECT pg_notify('bench_probe', '')`);
            await c.query('COMMIT');
            n++;
          }
        } finally {
          c.release();
        }
      }),
    );
    return Math.round(n / seconds);
  };
  try {
    return {
      tx_per_s_1_client: await run(1, false),
      tx_per_s_1_client_notify: await run(1, true),
      tx_per_s_16_clients: await run(16, false),
      tx_per_s_16_clients_notify: await run(16, true),
    };
  } finally {
    await pool.end();
  }
}

/** Errors and warnings the long-running processes printed (they must print none under the bench). */
function scanLogs() {
  const out = {};
  if (!fs.existsSync(LOG_DIR)) return out;
  for (const f of fs.readdirSync(LOG_DIR)) {
    if (!/^(gateway|gateway-\d+|gateway-profiled|worker|portkey|bare-proxy|durable-proxy|durable-proxy-\d+|simulator)\.log$/.test(f)) continue;
    const lines = fs.readFileSync(path.join(LOG_DIR, f), 'utf8').split('\n');
    const bad = lines.filter((l) => /ERROR|Error:|unreachable|WARN/i.test(l) && !/^\s+at /.test(l));
    // A client that leaves mid-stream (autocannon closing its connections at the end of a timed
    // run) is logged as ERR_STREAM_PREMATURE_CLOSE: expected here, counted apart.
    const premature = bad.filter((l) => /ERR_STREAM_PREMATURE_CLOSE/.test(l));
    const other = bad.filter((l) => !/ERR_STREAM_PREMATURE_CLOSE/.test(l));
    out[f.replace(/\.log$/, '')] = {
      error_lines: other.length,
      client_left_mid_stream: premature.length,
      first: other.slice(0, 3).map((l) => l.replace(/\x1b\[[0-9;]*m/g, '').slice(0, 300)),
    };
  }
  return out;
}

/** The pid of the Redis server (shared), from INFO; null when it cannot be asked. */
function redisPid(url) {
  const u = new URL(url);
  return new Promise((resolve) => {
    const sock = net.connect(Number(u.port || 6379), u.hostname);
    let buf = '';
    const done = (v) => (sock.destroy(), resolve(v));
    sock.setTimeout(1000, () => done(null));
    sock.on('error', () => done(null));
    sock.on('connect', () => sock.write('INFO server\r\n'));
    sock.on('data', (d) => {
      buf += d;
      const m = /process_id:(\d+)/.exec(buf);
      if (m) done(Number(m[1]));
    });
  });
}

function summarizeAudit(audit, ms, hot) {
  let report = null;
  try {
    report = JSON.parse(audit.stdout);
  } catch {}
  const accounts = report?.accounts ?? [];
  const min = accounts.reduce((m, a) => (m === null || BigInt(a.availableNano) < m ? BigInt(a.availableNano) : m), null);
  const find = (id) => accounts.find((a) => a.accountId === id);
  const acct = (id) => {
    const a = find(id);
    return (
      a && {
        credits_usd: nanoToUsd(a.creditsNano),
        charged_usd: nanoToUsd(a.chargedNano),
        open_holds: a.openHolds,
        held_usd: nanoToUsd(a.heldNano),
        available_usd: nanoToUsd(a.availableNano),
        over_hold_charges: a.overHold?.count ?? 0,
      }
    );
  };
  return {
    exit_code: audit.code,
    ms,
    events: report?.events ?? null,
    accounts: accounts.length,
    violations: report ? (report.violations ?? []).length : null,
    mismatches: report ? (report.projections?.mismatches ?? []).length : null,
    min_available_usd: min === null ? null : nanoToUsd(min),
    negative_accounts: accounts.filter((a) => BigInt(a.availableNano) < 0n).length,
    open_holds: accounts.reduce((s, a) => s + a.openHolds, 0),
    hot_funded: acct(hot?.funded?.account),
    hot_exhaust: acct(hot?.exhaust?.account),
  };
}

async function consistency(db, results) {
  const { rows } = await db.app.query('SELECT type, count(*)::int AS n FROM events GROUP BY type ORDER BY type');
  const byType = Object.fromEntries(rows.map((r) => [r.type, r.n]));
  const okIn = (phase, warmup) =>
    Object.values(phase ?? {}).reduce((s, m) => s + (m.gateway ? m.gateway.n + warmup - Object.values(m.gateway.invalid).reduce((a, b) => a + b, 0) : 0), 0);
  const seqOk = okIn(results.sequential, CFG.seqWarmup) + okIn(results.sequential_worker_running, 30) + okIn(results.sequential_worker_paused, 30);
  const loadOk = MODES.reduce((s, m) => s + results.throughput[m].gateway.ok + results.throughput[m].gateway.warmup_ok, 0);
  const profileOk = results.profile ? results.profile.load.ok + results.profile.load.warmup_ok : 0;
  const own = results.own_read;
  const ownOk = own ? own.idle_ms.n + own.under_load_ms.n + own.load_ok : 0;
  const gatewaysOk =
    (results.gateways?.direct_warmup_ok ?? 0) +
    Object.values(results.gateways?.by_n ?? {}).reduce((s, byLoad) => s + Object.values(byLoad).reduce((a, x) => a + x.ok + x.warmup_ok, 0), 0);
  const jitOk = MODES.reduce((s, m) => s + (results.jit_warmup?.[`${m}_gateway`]?.ok ?? 0), 0);
  const seen = jitOk + seqOk + loadOk + ownOk + gatewaysOk + results.hot.funded.ok + results.hot.exhaust.ok + profileOk;
  return {
    events_by_type: byType,
    gateway_2xx_seen_by_clients: seen,
    // Requests still in flight when a timed load run ended: the client left, the gateway still billed them.
    charged_after_client_left: (byType.UsageCharged ?? 0) - seen,
  };
}

/** The figures of issue 45's first round (its run of ba1ff1a) that the second must not regress from. */
const FIRST_ROUND = { cpu_ms_per_request: { json: 1.05, stream: 1.25 }, rebuild_events_per_s: 32509, rss_mb: 270 };

function figures(r) {
  const seq = (mode, t) => r.sequential[mode][t];
  const thr = (mode, t) => r.throughput[mode][t];
  const ratio = (a, b) => (b > 0 ? r2(a / b) : null);
  const overheads = (mode, t) => {
    const o = seq(mode, t).overhead_ms;
    return {
      overhead_p50_ms: o.p50,
      overhead_p99_ms: o.p99,
      overhead_p50_x_floor: ratio(o.p50, seq(mode, 'bare').overhead_ms.p50),
      overhead_p50_x_portkey: ratio(o.p50, seq(mode, 'portkey').overhead_ms.p50),
      overhead_p99_x_floor: ratio(o.p99, seq(mode, 'bare').overhead_ms.p99),
      overhead_p99_x_portkey: ratio(o.p99, seq(mode, 'portkey').overhead_ms.p99),
    };
  };
  const rows = {};
  for (const mode of MODES) {
    rows[mode] = {};
    for (const t of ['bare', 'portkey', 'gateway']) {
      rows[mode][t] = {
        ...overheads(mode, t),
        rps: r2(thr(mode, t).rps),
        rps_x_floor: ratio(thr(mode, t).rps, thr(mode, 'bare').rps),
        rps_x_portkey: ratio(thr(mode, t).rps, thr(mode, 'portkey').rps),
      };
    }
    // The durable floor runs in the sequential phase only.
    rows[mode].durable = overheads(mode, 'durable');
    // What the gateway spends beyond the steps its guarantees need.
    rows[mode].gateway.beyond_durable_p50_ms = r3(seq(mode, 'gateway').overhead_ms.p50 - seq(mode, 'durable').overhead_ms.p50);
  }
  const gwRss = Math.max(...MODES.map((m) => thr(m, 'gateway').rss_max_mb.gateway ?? 0), r.hot.funded.rss_max_mb.gateway ?? 0);
  // Issue 45's targets: the same run's ratios to Portkey and to the durable floor, and no
  // regression from the first round's figures (its run of ba1ff1a) where it set an absolute one.
  const targets = [];
  for (const mode of MODES) {
    const g = rows[mode].gateway;
    const t = thr(mode, 'gateway');
    g.cpu_ms_per_request_all = r2(cpuMsPerBilledRequest(t));
    const minRps = mode === 'json' ? 1.5 : 1.3;
    targets.push({
      name: `throughput at 64 connections >= ${minRps.toFixed(1)}x Portkey's (${MODE_LABEL[mode]})`,
      measured: `${g.rps_x_portkey}x (${Math.round(g.rps)} vs ${Math.round(thr(mode, 'portkey').rps)} req/s)`,
      reached: g.rps_x_portkey >= minRps,
    });
    const firstRoundCpu = FIRST_ROUND.cpu_ms_per_request[mode];
    targets.push({
      name: `CPU per billed request, all processes, <= the first round's ${firstRoundCpu} ms (${MODE_LABEL[mode]})`,
      measured: `${g.cpu_ms_per_request_all} ms`,
      reached: g.cpu_ms_per_request_all <= firstRoundCpu,
    });
    targets.push({
      name: `sequential overhead p50 beyond the durable floor <= 1.0 ms (${MODE_LABEL[mode]})`,
      measured: `${g.beyond_durable_p50_ms} ms (${g.overhead_p50_ms} vs ${seq(mode, 'durable').overhead_ms.p50} ms)`,
      reached: g.beyond_durable_p50_ms <= 1.0,
    });
    targets.push({
      name: `p99 at 64 connections <= Portkey's (${MODE_LABEL[mode]})`,
      measured: `${t.latency_ms.p99} vs ${thr(mode, 'portkey').latency_ms.p99} ms`,
      reached: t.latency_ms.p99 <= thr(mode, 'portkey').latency_ms.p99,
    });
  }
  // Issue 45: the first content byte of a streamed request, against the durable floor's.
  const fc = firstContentTarget(r.sequential.stream);
  rows.stream.first_content = fc.rows;
  targets.push(fc.target);
  if (r.gateways) targets.push(...gatewaysTargets(r.gateways));
  const hot = r.hot.funded;
  const noOverdraft = r.audit.exit_code === 0 && r.audit.negative_accounts === 0 && r.audit.violations === 0;
  targets.push({ name: 'hot account >= 1,500 billed requests/s', measured: `${hot.billed_rps} req/s`, reached: hot.billed_rps >= 1500 });
  targets.push({
    name: 'hot account: 0 overdraft (ledger audit)',
    measured: `audit exit ${r.audit.exit_code}, ${r.audit.violations} violations, ${r.audit.negative_accounts} accounts below 0`,
    reached: noOverdraft,
  });
  targets.push({
    name: `projection rebuild >= the first round's ${FIRST_ROUND.rebuild_events_per_s.toLocaleString('en-US')} events/s (all projections)`,
    measured: `${r.rebuild.events_per_s_all} events/s`,
    reached: r.rebuild.events_per_s_all >= FIRST_ROUND.rebuild_events_per_s,
  });
  targets.push({
    name: `gateway RSS <= the first round's ${FIRST_ROUND.rss_mb} MB under load`,
    measured: `${r2(gwRss)} MB`,
    reached: gwRss <= FIRST_ROUND.rss_mb,
  });
  return { rows, gateway_rss_max_mb: r2(gwRss), targets };
}

/**
 * Time to the first content byte of a streamed request, overhead over the direct upstream, by
 * target, and issue 45's target: the gateway's p50 at most the durable floor's + 0.5 ms.
 */
function firstContentTarget(stream) {
  const rows = {};
  for (const t of ['bare', 'durable', 'portkey', 'gateway']) {
    if (stream[t]?.first_content_overhead_ms) rows[t] = { ...stream[t].first_content_overhead_ms };
  }
  const [g, d] = [rows.gateway?.p50, rows.durable?.p50];
  const known = g !== undefined && d !== undefined && g !== null && d !== null;
  if (known) rows.gateway.beyond_durable_p50_ms = r3(g - d);
  return {
    rows,
    target: {
      name: "first content byte, overhead p50 <= the durable floor's + 0.5 ms (streamed)",
      measured: known ? `${g} vs ${d} ms (+${r3(g - d)} ms)` : 'n/a',
      reached: known && g <= d + 0.5,
    },
  };
}

function checkAnomalies(r) {
  const a = r.anomalies;
  for (const mode of MODES) {
    for (const t of SEQ_TARGETS) {
      const inv = r.sequential[mode][t].invalid;
      if (Object.keys(inv).length) a.push(`sequential ${mode} ${t}: invalid answers ${JSON.stringify(inv)}`);
    }
    for (const t of TARGETS) {
      const l = r.throughput[mode][t];
      if (l.warmup_non2xx) a.push(`load ${mode} ${t}: ${l.warmup_non2xx} non-2xx or errors in the warm-up`);
      if (l.non2xx || l.errors || l.timeouts)
        a.push(`load ${mode} ${t}: non2xx ${l.non2xx} ${JSON.stringify(l.status_codes)}, errors ${l.errors}, timeouts ${l.timeouts}`);
    }
  }
  const f = r.hot.funded;
  if (f.ok !== f.requests || f.errors) a.push(`hot funded: ${f.ok}/${f.requests} ok ${JSON.stringify(f.status_codes)}, errors ${f.errors}`);
  if (f.charged_events !== f.ok) a.push(`hot funded: ${f.charged_events} UsageCharged events for ${f.ok} answered requests`);
  const e = r.hot.exhaust;
  const unexpected = Object.keys(e.status_codes).filter((c) => c !== '200' && c !== '402');
  if (unexpected.length || e.errors) a.push(`hot exhaust: unexpected ${JSON.stringify(e.status_codes)}, errors ${e.errors}`);
  if (r.gateways?.direct_warmup_non2xx) a.push(`gateways phase: ${r.gateways.direct_warmup_non2xx} non-2xx or errors warming the extra gateways`);
  for (const [n, byLoad] of Object.entries(r.gateways?.by_n ?? {})) {
    for (const [name, x] of Object.entries(byLoad)) {
      // Every round's, not only the median round's that stands for them.
      for (const [i, k] of (x.rounds ?? [x]).entries()) {
        if (k.non2xx || k.errors || k.timeouts || k.warmup_non2xx)
          a.push(
            `${n} gateways, ${name}${x.rounds ? `, round ${i + 1}` : ''}: non2xx ${k.non2xx}, errors ${k.errors + (k.timeouts ?? 0)}, warm-up ${k.warmup_non2xx}`,
          );
      }
    }
  }
  if (r.profile && (r.profile.load.non2xx || r.profile.load.errors)) a.push(`profile load: non2xx ${r.profile.load.non2xx}, errors ${r.profile.load.errors}`);
  if (r.audit.exit_code !== 0) a.push(`ledger audit exited ${r.audit.exit_code}`);
  if (r.audit.open_holds) a.push(`${r.audit.open_holds} holds still open after the run`);
  if (r.audit.mismatches) a.push(`${r.audit.mismatches} projection mismatches in the audit`);
  for (const [name, l] of Object.entries(r.logs ?? {})) if (l.error_lines) a.push(`${name} printed ${l.error_lines} error/warning lines, e.g. ${l.first[0]}`);
}

// ---------------------------------------------------------------------------------------------

let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    log(`${sig}: stopping child processes`);
    stopAll()
      .then(() => cleanupDb())
      .finally(() => process.exit(130));
  });
}

main().catch(async (err) => {
  if (interrupted) return; // the signal handler is already cleaning up
  console.error(err);
  await stopAll();
  await cleanupDb();
  process.exit(1);
});
