'use strict';
// The simulated upstream in its own process, so its CPU is never counted in a proxy's process.
// Usage: node simulator.js <app root with dist/> [port]
const path = require('node:path');
const { startSimulator } = require(path.join(process.argv[2], 'dist/libs/providers/src/simulator/index.js'));

startSimulator({ port: Number(process.argv[3] ?? 0), host: '127.0.0.1' }).then((sim) => {
  console.log(`simulator listening on ${sim.url}`);
  const stop = () => sim.close().finally(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
});
