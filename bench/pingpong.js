'use strict';
// What one hand-off between two processes costs on this machine: a byte sent back and forth over
// loopback TCP between this process and a child, one at a time. Every step of a billed request
// (Redis, PostgreSQL, the upstream, the client) is such a hand-off, so hosts where it costs more
// slow the gateway more than a proxy that makes fewer of them.
// Usage: node pingpong.js [round trips]   (prints JSON: p50 and p90 in microseconds)
const net = require('node:net');
const { fork } = require('node:child_process');

if (process.argv[2] === '--echo') {
  const server = net.createServer((s) => {
    s.setNoDelay(true);
    s.on('data', (d) => s.write(d));
  });
  server.listen(0, '127.0.0.1', () => process.send(server.address().port));
} else {
  const n = Number(process.argv[2] || 20_000);
  const child = fork(__filename, ['--echo'], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  child.once('message', (port) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.setNoDelay(true);
      const us = [];
      let t0 = 0n;
      const ping = () => {
        t0 = process.hrtime.bigint();
        socket.write('x');
      };
      socket.on('data', () => {
        us.push(Number(process.hrtime.bigint() - t0) / 1000);
        if (us.length < n) return ping();
        socket.destroy();
        child.kill();
        const kept = us.slice(Math.floor(n / 10)).sort((a, b) => a - b);
        const at = (p) => Math.round(kept[Math.floor((p / 100) * (kept.length - 1))] * 10) / 10;
        console.log(JSON.stringify({ round_trips: kept.length, p50_us: at(50), p90_us: at(90) }));
      });
      ping();
    });
  });
}
