'use strict';
// One autocannon run in its own process (the driver stays free to sample RSS and CPU).
// Usage: node load.js '<json options>'; prints one JSON line with the summary.
// Options: url, connections, duration (s) | amount, warmup (s), body, headers, keys (bearer
// tokens, rotated per request; the same rotation runs for every target so the client does the
// same work everywhere), randomKeys (each request's key drawn at random instead: behind a
// round-robin balancer a rotation whose length is a multiple of the servers' number sends each
// key to one server only).
const autocannon = require('autocannon');

const opts = JSON.parse(process.argv[2]);

/** process.hrtime.bigint() of the latest answer of the run in progress. */
let lastAnswer = 0n;

function run(extra) {
  let i = 0;
  const keys = opts.keys && opts.keys.length ? opts.keys : ['anything'];
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: opts.url,
        connections: opts.connections,
        pipelining: 1,
        timeout: 30,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...opts.headers },
        body: opts.body,
        requests: [
          {
            setupRequest: (req) => {
              const key = opts.randomKeys ? keys[Math.floor(Math.random() * keys.length)] : keys[i++ % keys.length];
              return { ...req, headers: { ...req.headers, authorization: `Bearer ${key}` } };
            },
          },
        ],
        ...extra,
      },
      (err, result) => (err ? reject(err) : resolve(result)),
    );
    // With `amount`, autocannon notices that the last answer came only at its next sample tick
    // (once a second), so its end can trail the last answer by up to a second: a run of a
    // fixed number of requests ends at its last answer.
    instance.on('response', () => {
      lastAnswer = process.hrtime.bigint();
    });
  });
}

(async () => {
  const warm = opts.warmup > 0 ? await run({ duration: opts.warmup }) : null;
  const started = process.hrtime.bigint();
  const cpu0 = process.cpuUsage();
  const r = await run(opts.amount ? { amount: opts.amount } : { duration: opts.duration });
  const ended = opts.amount && lastAnswer > started ? lastAnswer : process.hrtime.bigint();
  const cpu = process.cpuUsage(cpu0);
  const wallSeconds = Number(ended - started) / 1e9;
  const ok = r['2xx'];
  console.log(
    JSON.stringify({
      // CLOCK_MONOTONIC in microseconds, the clock of V8's .cpuprofile timestamps.
      window_us: [Number(started / 1000n), Number(ended / 1000n)],
      client_cpu_s: (cpu.user + cpu.system) / 1e6,
      warmup_ok: warm ? warm['2xx'] : 0,
      warmup_non2xx: warm ? warm.non2xx + warm.errors : 0,
      connections: opts.connections,
      duration_s: r.duration,
      wall_s: wallSeconds,
      requests: r.requests.total,
      ok,
      non2xx: r.non2xx,
      status_codes: Object.fromEntries(Object.entries(r.statusCodeStats ?? {}).map(([code, v]) => [code, v.count])),
      errors: r.errors,
      timeouts: r.timeouts,
      resets: r.resets,
      rps: ok / (opts.amount ? wallSeconds : r.duration),
      rps_all: r.requests.total / (opts.amount ? wallSeconds : r.duration),
      latency_ms: { p50: r.latency.p50, p90: r.latency.p90, p99: r.latency.p99, max: r.latency.max, mean: r.latency.average },
      throughput_bytes_per_s: r.throughput.average,
    }),
  );
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
