'use strict';
// What the per-request observability of issue 22 costs, in CPU per request: the request metrics
// and the JSON request log (written to a real file, as a collector would read it). One process, Fastify's inject (no sockets), a handler shaped like a
// billed call's (body read, the pipeline's reports, a generation header, a JSON answer). Each
// configuration runs in turn, several rounds, and the CPU of the bare app is subtracted, so
// what remains is the cost of the hooks alone. Inject makes the bare request cheaper than a
// real one, so the share this gives is an upper bound.
// Usage: node observability.js <app root> [requests per round]
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(process.argv[2] || path.join(__dirname, '..'));
const N = Number(process.argv[3] || 20000);
require(path.join(root, 'node_modules/reflect-metadata'));
const Fastify = require(path.join(root, 'node_modules/fastify'));
const { LogController } = Fastify;
const dist = (p) => require(path.join(root, 'dist', p));
const { ServiceMetrics } = dist('libs/metrics/src/index.js');
const { processLog } = dist('libs/platform/src/index.js');
const { installRequestLog } = dist('apps/gateway/src/http/request-log.js');
const { installRequestMetrics } = dist('apps/gateway/src/metrics/request-metrics.js');

const catalog = { get: (id) => (id === 'sim/echo' ? { id } : undefined) };
const body = JSON.stringify({ model: 'sim/echo', messages: [{ role: 'user', content: 'Hello! '.repeat(20) }], max_tokens: 64 });
const answer = {
  id: 'gen-0123456789abcdef01234567',
  object: 'chat.completion',
  model: 'sim/echo',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Echo: Hello!' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 40, completion_tokens: 8, total_tokens: 48, cost: 0.000144 },
};

function app(config, logFile) {
  const metrics = new ServiceMetrics({ sql: { query: async () => ({ rows: [] }) } });
  const fastify = Fastify({
    ...(config.log ? { loggerInstance: processLog({ logLevel: 'info', logFormat: 'json' }, fs.createWriteStream(logFile, { flags: 'a' })) } : {}),
    logController: new LogController({ disableRequestLogging: true }),
  });
  if (config.log) installRequestLog(fastify, metrics.requests, catalog);
  if (config.metrics) installRequestMetrics(fastify, metrics, catalog);
  fastify.post('/v1/chat/completions', async (request, reply) => {
    request.caller = { keyId: 'key_0123456789abcdef0123456789abcdef', accountId: 'acc_0123456789abcdef' };
    // What the metering pipeline reports during a billed call.
    metrics.metering.upstreamAnswered(answer.id, 'sim', 'chat', 0.002);
    metrics.metering.charged(answer.id, 144000n);
    reply.header('x-svc-generation-id', answer.id);
    return answer;
  });
  return fastify;
}

async function cpuPerRequest(fastify) {
  const request = { method: 'POST', url: '/v1/chat/completions', headers: { 'content-type': 'application/json', authorization: 'Bearer x' }, payload: body };
  for (let i = 0; i < 2000; i++) await fastify.inject(request);
  const start = process.cpuUsage();
  for (let i = 0; i < N; i++) await fastify.inject(request);
  const used = process.cpuUsage(start);
  return (used.user + used.system) / N;
}

(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-obs-'));
  const configs = {
    bare: {},
    metrics: { metrics: true },
    'metrics + log': { metrics: true, log: true },
  };
  const rounds = 5;
  const samples = Object.fromEntries(Object.keys(configs).map((k) => [k, []]));
  for (let r = 0; r < rounds; r++) {
    for (const [name, config] of Object.entries(configs)) {
      const fastify = app(config, path.join(dir, 'requests.log'));
      await fastify.ready();
      samples[name].push(await cpuPerRequest(fastify));
      await fastify.close();
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const bare = median(samples.bare);
  const result = Object.fromEntries(
    Object.entries(samples).map(([name, xs]) => [
      name,
      { cpu_us_per_request: Math.round(median(xs) * 10) / 10, over_bare_us: Math.round((median(xs) - bare) * 10) / 10 },
    ]),
  );
  const logged = fs.statSync(path.join(dir, 'requests.log')).size;
  fs.rmSync(dir, { recursive: true, force: true });
  console.log(JSON.stringify({ requests_per_round: N, rounds, log_bytes_per_request: Math.round(logged / (N + 2000) / rounds), result }));
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
