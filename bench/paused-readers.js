#!/usr/bin/env node
'use strict';
/**
 * Issue 41 F: the resident memory of a gateway while clients hold streamed chat completions
 * open without reading them, and after they leave.
 *
 *   node bench/paused-readers.js [readers=20] [tokens=100000]
 *
 * Builds nothing (`npm run build` first). Starts the simulated upstream in its own process (its
 * memory is not the gateway's) and `dist/src/main.js` (what `npm start` runs, in-memory limits)
 * on a fresh data directory and a fresh PostgreSQL database (PGlite's WASM heap would hide the
 * figures; BENCH_PG_URL, an admin connection, default postgres://postgres@127.0.0.1:5432/postgres,
 * dropped afterwards), waits until the gateway is idle, then opens `readers`
 * streams of `tokens` output tokens each and reads nothing of them but their headers. Prints the
 * gateway's RSS (from /proc) before, every second while they are held (the stall limit,
 * SVC_STREAM_STALL_MS, is 20 s by default), and after they all left. Not a test: RSS moves with the garbage collector and the machine.
 */
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const { spawn } = require('node:child_process');
const { Client } = require('pg');
const { setTimeout: sleep } = require('node:timers/promises');

const APP_ROOT = path.resolve(process.env.BENCH_APP_ROOT || path.join(__dirname, '..'));
const READERS = Number(process.argv[2] ?? 20);
const TOKENS = Number(process.argv[3] ?? 100_000);
const HOLD_SECONDS = Number(process.env.BENCH_HOLD_SECONDS ?? 15);

const rssMb = (pid) => {
  const line = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
  return Math.round(Number(line[1]) / 1024);
};

function start(name, args, env, ready) {
  const proc = spawn(process.execPath, args, { cwd: APP_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk) => {
      out += chunk;
      const m = out.match(ready);
      if (m) resolve({ proc, match: m });
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code) => reject(new Error(`${name} exited with ${code}:\n${out.slice(-2000)}`)));
  });
}

function open(port, key, i) {
  const body = JSON.stringify({
    model: 'sim/echo',
    stream: true,
    max_tokens: TOKENS,
    messages: [{ role: 'user', content: `reader ${i}\n#sim {"completion_tokens": ${TOKENS}, "chunk_delay_ms": 0}` }],
  });
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1',
      port,
      path: '/v1/chat/completions',
      method: 'POST',
      agent: false,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    });
    req.on('response', resolve).on('error', reject);
    req.end(body);
  });
}

async function admin(sql) {
  const client = new Client({ connectionString: process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres' });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function main() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-paused-'));
  const database = `svc_paused_${process.pid}`;
  await admin(`CREATE DATABASE ${database}`);
  const databaseUrl = new URL(process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres');
  databaseUrl.pathname = `/${database}`;
  const sim = await start('simulator', [path.join(__dirname, 'simulator.js'), APP_ROOT, '0'], {}, /simulator listening on (\S+)/);
  const simulatorUrl = sim.match[1];
  const port = 20000 + Math.floor(Math.random() * 20000);
  const gateway = await start(
    'gateway',
    ['dist/src/main.js'],
    {
      PORT: String(port),
      HOST: '127.0.0.1',
      SVC_DATA_DIR: dataDir,
      DATABASE_URL: databaseUrl.toString(),
      SVC_SIMULATOR_URL: simulatorUrl,
      SVC_REQUEST_LOG: 'off',
      LOG_LEVEL: 'warn',
      SVC_LOG_FORMAT: 'json',
    },
    /live_api_key|listening|running/i,
  );
  try {
    for (let i = 0; i < 100; i++) {
      if (fs.existsSync(path.join(dataDir, 'dev-keys.json'))) break;
      await sleep(200);
    }
    await sleep(2000);
    const key = JSON.parse(fs.readFileSync(path.join(dataDir, 'dev-keys.json'), 'utf8')).live_api_key;
    const pid = gateway.proc.pid;
    // One stream read whole first, so what every request loads once is loaded before the figure.
    const warm = await open(port, key, 'warm');
    for await (const _ of warm);
    await sleep(5000);
    const before = rssMb(pid);
    console.log(`gateway RSS before: ${before} MB`);

    const responses = await Promise.all(Array.from({ length: READERS }, (_, i) => open(port, key, i)));
    let peak = before;
    for (let s = 1; s <= HOLD_SECONDS; s++) {
      await sleep(1000);
      const rss = rssMb(pid);
      peak = Math.max(peak, rss);
      console.log(`  ${s} s with ${READERS} paused readers: ${rss} MB`);
    }
    for (const r of responses) r.destroy();
    console.log(`readers left after ${HOLD_SECONDS} s; peak ${peak} MB`);
    for (let s = 1; s <= 20; s++) {
      await sleep(1000);
      if (s % 5 === 0) console.log(`  ${s} s after they left: ${rssMb(pid)} MB`);
    }
  } finally {
    gateway.proc.kill('SIGTERM');
    sim.proc.kill('SIGTERM');
    await sleep(2000);
    fs.rmSync(dataDir, { recursive: true, force: true });
    await admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
