'use strict';
// The floor with the gateway's durable steps and nothing else: before the upstream call, one
// Redis script (an admission counter) and one committed INSERT (the hold); after it, one
// committed INSERT (the charge) before the answer's last byte. No auth, no parsing, no
// validation, no pricing, no events: what those steps alone cost on this machine.
// Usage: node durable-proxy.js <upstream origin> <postgres url> <redis url> [port]
const http = require('node:http');
const { Pool } = require('undici');
const pg = require('pg');
const Redis = require('ioredis');

const upstream = new Pool(process.argv[2], { connections: 256, pipelining: 1 });
const db = new pg.Pool({ connectionString: process.argv[3], max: 10 });
const redis = new Redis(process.argv[4]);
redis.defineCommand('admit', {
  numberOfKeys: 1,
  lua: "local n = redis.call('INCR', KEYS[1]) if n == 1 then redis.call('PEXPIRE', KEYS[1], 60000) end return n",
});
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host', 'proxy-connection', 'upgrade', 'te', 'trailer', 'content-length']);
const strip = (headers) => Object.fromEntries(Object.entries(headers).filter(([k]) => !HOP.has(k.toLowerCase())));
const record = (kind, amount) =>
  db.query({ name: 'durable_floor_insert', text: 'INSERT INTO durable_floor (kind, amount) VALUES ($1, $2)', values: [kind, amount] });

const server = http.createServer(async (req, res) => {
  try {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    await redis.admit(`durable-floor:${Math.floor(Date.now() / 60_000)}`);
    await record('hold', 1);
    const up = await upstream.request({ method: req.method, path: req.url, headers: strip(req.headers), body: Buffer.concat(chunks) });
    res.writeHead(up.statusCode, strip(up.headers));
    // Every chunk but the last goes out at once; the last waits for the charge's commit.
    let last = null;
    for await (const c of up.body) {
      if (last) res.write(last);
      last = c;
    }
    await record('charge', 1);
    res.end(last ?? undefined);
  } catch (err) {
    if (res.headersSent) return void res.destroy(err);
    res.writeHead(502, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: `durable proxy: ${err.message}` } }));
  }
});
server.keepAliveTimeout = 60_000;
db.query(
  'CREATE TABLE IF NOT EXISTS durable_floor (id bigserial PRIMARY KEY, kind text NOT NULL, amount bigint NOT NULL, at timestamptz NOT NULL DEFAULT now())',
).then(() =>
  server.listen(Number(process.argv[5] ?? 0), '127.0.0.1', () => console.log(`durable-proxy listening on http://127.0.0.1:${server.address().port}`)),
);
const stop = () => {
  server.close(() => Promise.all([upstream.close(), db.end(), redis.quit()]).then(() => process.exit(0)));
  server.closeAllConnections();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
