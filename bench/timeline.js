'use strict';
/**
 * A timeline of each request a process serves, for requests sent one at a time (phase 1's
 * load): preloaded into the process under test (`node --require bench/timeline.js ...`), it
 * time-stamps, relative to the HTTP request's arrival, each Redis command sent and answered, each
 * PostgreSQL statement sent and answered, the upstream call (undici) and its headers and end, and
 * the response's end. Every 200 ms the medians of each step's offsets (by its label and its rank among steps of that label in the
 * request) are written as JSON to `$TIMELINE_DIR/<pid>.json`. It patches the app's own `pg` and
 * `ioredis` (resolved from TIMELINE_ROOT, the app root); both are clients, so nothing of the
 * process's work changes but the time to record an offset.
 *
 * A request that overlapped another is counted (`overlapped`) but not timed: their steps
 * cannot be told apart. Steps are keyed by the response's mode (json or stream).
 */
const fs = require('node:fs');
const path = require('node:path');
const dc = require('node:diagnostics_channel');

const root = process.env.TIMELINE_ROOT || process.cwd();
const dir = process.env.TIMELINE_DIR;
const now = () => performance.now();

/** The request being served (the latest to arrive), its start and its steps. */
let current = null;
let inFlight = 0;
const done = { requests: 0, overlapped: 0 };
/** label#rank -> offsets (ms) over the kept requests. */
const offsets = new Map();

function mark(label) {
  if (!current) return;
  const rank = (current.ranks[label] = (current.ranks[label] ?? 0) + 1);
  current.steps.push([`${label}#${rank}`, now() - current.t0]);
}

function finish(req, response) {
  if (req.finished) return;
  req.finished = true;
  inFlight--;
  if (current === req) current = null;
  done.requests++;
  // Overlapping requests' steps cannot be told apart: only lone requests are kept.
  if (req.overlapped) {
    done.overlapped++;
    return;
  }
  const mode = String(response.getHeader('content-type') ?? '').includes('text/event-stream') ? 'stream' : 'json';
  req.steps.push(['response finished#1', now() - req.t0]);
  for (const [step, ms] of req.steps) {
    const key = `${mode} ${step}`;
    let xs = offsets.get(key);
    if (!xs) offsets.set(key, (xs = []));
    xs.push(ms);
  }
}

dc.subscribe('http.server.request.start', ({ request, response }) => {
  inFlight++;
  const req = { t0: now(), steps: [], ranks: {}, overlapped: inFlight > 1 };
  if (current) current.overlapped = true;
  current = req;
  // 'close' always comes, 'finish' only when the response was sent whole.
  response.once('finish', () => finish(req, response));
  response.once('close', () => finish(req, response));
  void request;
});
dc.subscribe('undici:request:create', ({ request }) => {
  // The gateway's own calls only (the upstream); undici's requests to Redis or PostgreSQL do not exist.
  mark(`upstream ${request.method}`);
});
dc.subscribe('undici:request:headers', () => mark('upstream headers'));
dc.subscribe('undici:request:trailers', () => mark('upstream end'));

function patchResponse() {
  const http = require('node:http');
  const { writeHead, write } = http.ServerResponse.prototype;
  http.ServerResponse.prototype.writeHead = function timedWriteHead(...args) {
    mark('response head');
    return writeHead.apply(this, args);
  };
  http.ServerResponse.prototype.write = function timedWrite(...args) {
    mark('response write');
    return write.apply(this, args);
  };
}
patchResponse();

function patchPg() {
  const pg = require(require.resolve('pg', { paths: [root] }));
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function timedQuery(config, ...rest) {
    const text = typeof config === 'string' ? config : config && typeof config.text === 'string' ? config.text : '';
    const label = `pg ${text.replace(/\s+/g, ' ').trim().slice(0, 48)}`;
    const owner = current;
    mark(`${label} sent`);
    // The pool passes a callback (its client's query then returns nothing): the answer is its call.
    const last = rest.length - 1;
    if (last >= 0 && typeof rest[last] === 'function') {
      const callback = rest[last];
      rest[last] = (...args) => {
        if (owner === current) mark(`${label} answered`);
        return callback(...args);
      };
    }
    const result = query.call(this, config, ...rest);
    if (result && typeof result.then === 'function') {
      result.then(
        () => owner === current && mark(`${label} answered`),
        () => undefined,
      );
    }
    return result;
  };
}

function patchRedis() {
  const Redis = require(require.resolve('ioredis', { paths: [root] }));
  const send = Redis.prototype.sendCommand;
  Redis.prototype.sendCommand = function timedCommand(command, ...rest) {
    const name = command && command.name ? String(command.name) : '?';
    const owner = current;
    mark(`redis ${name} sent`);
    const result = send.call(this, command, ...rest);
    if (command && command.promise && typeof command.promise.then === 'function') {
      command.promise.then(
        () => owner === current && mark(`redis ${name} answered`),
        () => undefined,
      );
    }
    return result;
  };
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function report() {
  const steps = [...offsets.entries()]
    .map(([step, xs]) => ({ step, n: xs.length, median_ms: Math.round(median(xs) * 1000) / 1000 }))
    .sort((a, b) => a.median_ms - b.median_ms);
  return { pid: process.pid, ...done, steps };
}

try {
  patchPg();
} catch {
  /* a process without pg */
}
try {
  patchRedis();
} catch {
  /* a process without ioredis */
}

if (dir) {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${process.pid}.json`);
  setInterval(() => {
    if (done.requests > 0) fs.writeFileSync(file, JSON.stringify(report(), null, 1));
  }, 200).unref();
}

module.exports = { report, reset: () => offsets.clear() };
