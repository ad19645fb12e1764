'use strict';
/**
 * Counts the statements a process sends to PostgreSQL through node-postgres: a client-side
 * stand-in for pg_stat_statements where the server does not load it. Preloaded into a process
 * under test (`node --require bench/count-queries.js ...`) it patches the app's own `pg` (resolved
 * from COUNT_QUERIES_ROOT, the app root) and writes its counters as JSON to
 * `$COUNT_QUERIES_DIR/<pid>.json` every 200 ms; required as a module it exports `install(root)`
 * and the live counters. A statement is one `Client#query` call: a call of the event store's
 * append function counts once, whatever it does inside. `append_groups` counts the statements
 * that write appends: the group function's calls and the INSERTs of one-event appends (an INSERT the
 * function then answers, a lost race or a retry, counts twice).
 */
const fs = require('node:fs');
const path = require('node:path');

const counters = { statements: 0, begin: 0, commit: 0, rollback: 0, append_groups: 0, by_statement: {} };
/** What the event store's INSERTs of one-event appends hold (LONE_APPEND, SINGLES_APPEND in libs/eventstore/src/sql/append.ts). */
const ONE_EVENT_INSERT = 'INSERT INTO events (stream, revision, id, type, data, metadata)';
const isAppend = (text) => text.includes('eventstore_append_group') || text.includes(ONE_EVENT_INSERT);
let installed = false;

function classify(config) {
  const text = typeof config === 'string' ? config : config && typeof config.text === 'string' ? config.text : '';
  counters.statements++;
  const head = text.trimStart().slice(0, 8).toUpperCase();
  if (head.startsWith('BEGIN')) counters.begin++;
  else if (head.startsWith('COMMIT')) counters.commit++;
  else if (head.startsWith('ROLLBACK')) counters.rollback++;
  if (isAppend(text)) counters.append_groups++;
  // The statement's head, whitespace folded: which statements a request costs.
  const key = text.replace(/\s+/g, ' ').trim().slice(0, 60);
  counters.by_statement[key] = (counters.by_statement[key] ?? 0) + 1;
}

function install(root) {
  if (installed) return counters;
  installed = true;
  const pg = require(require.resolve('pg', { paths: [root] }));
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function countedQuery(config, ...rest) {
    classify(config);
    const text = typeof config === 'string' ? config : config && typeof config.text === 'string' ? config.text : '';
    // An append the group function did not write, for no earlier write of its ids: a lost race.
    // Such an INSERT returns a row per append it wrote; what it refused, the function answers next.
    const direct = text.includes(ONE_EVENT_INSERT);
    const tally = (r) => {
      if (!r || !r.rows) return;
      counters.appends = (counters.appends ?? 0) + r.rows.length;
      if (direct) return;
      counters.lost_races = (counters.lost_races ?? 0) + r.rows.filter((row) => row.appended === false && (!row.existing || row.existing.length === 0)).length;
    };
    const watch = isAppend(text);
    const last = rest.length - 1;
    if (watch && typeof rest[last] === 'function') {
      const cb = rest[last];
      rest[last] = (err, r) => {
        if (!err) tally(r);
        return cb(err, r);
      };
    } else if (watch && config && typeof config.callback === 'function') {
      const cb = config.callback;
      config.callback = (err, r) => {
        if (!err) tally(r);
        return cb(err, r);
      };
    }
    const result = query.call(this, config, ...rest);
    if (watch && result && typeof result.then === 'function') result.then(tally, () => undefined);
    return result;
  };
  return counters;
}

if (require.main !== module && process.env.COUNT_QUERIES_DIR && process.env.COUNT_QUERIES_ROOT) {
  install(process.env.COUNT_QUERIES_ROOT);
  const file = path.join(process.env.COUNT_QUERIES_DIR, `${process.pid}.json`);
  let last = '';
  const write = () => {
    const text = JSON.stringify(counters);
    if (text === last) return;
    last = text;
    try {
      fs.writeFileSync(file, text);
    } catch {}
  };
  setInterval(write, 200).unref();
  process.on('exit', write);
}

module.exports = { install, counters };
