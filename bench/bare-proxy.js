'use strict';
// The floor: a bare pass-through proxy on undici. Pipes the request to the upstream and the
// response back (SSE streams too, chunk by chunk). No parsing, no auth, no billing.
// Usage: node bare-proxy.js <upstream origin, e.g. http://127.0.0.1:4010> [port]
const http = require('node:http');
const { pipeline } = require('node:stream/promises');
const { Pool } = require('undici');

const upstream = new Pool(process.argv[2], { connections: 256, pipelining: 1 });
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host', 'proxy-connection', 'upgrade', 'te', 'trailer']);
const strip = (headers) => Object.fromEntries(Object.entries(headers).filter(([k]) => !HOP.has(k.toLowerCase())));

const server = http.createServer(async (req, res) => {
  try {
    const up = await upstream.request({ method: req.method, path: req.url, headers: strip(req.headers), body: req.method === 'GET' ? null : req });
    res.writeHead(up.statusCode, strip(up.headers));
    await pipeline(up.body, res);
  } catch (err) {
    if (res.headersSent) return void res.destroy(err);
    res.writeHead(502, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: `bare proxy: ${err.message}` } }));
  }
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.argv[3] ?? 0), '127.0.0.1', () => console.log(`bare-proxy listening on http://127.0.0.1:${server.address().port}`));
const stop = () => {
  server.close(() => upstream.close().then(() => process.exit(0)));
  server.closeAllConnections();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
