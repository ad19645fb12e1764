import Fastify from 'fastify';
import { installRequestLog, isQuietProbe } from './request-checks';

describe('the request log and the health probes', () => {
  it('leaves out the liveness probe and a ready readiness probe, and nothing else', () => {
    expect(isQuietProbe('/health/live', 200)).toBe(true);
    expect(isQuietProbe('/health/ready', 200)).toBe(true);
    expect(isQuietProbe('/health/ready', 503)).toBe(false);
    expect(isQuietProbe('/health', 404)).toBe(false);
    expect(isQuietProbe('/v1/health/live', 404)).toBe(false);
  });

  it('writes a line for every request but those probes', async () => {
    const lines: string[] = [];
    const fastify = Fastify();
    installRequestLog(fastify, (line) => lines.push(line));
    let ready = true;
    fastify.get('/health/live', async () => ({ status: 'ok' }));
    fastify.get('/health/ready', async (_request, reply) => reply.status(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready' }));
    fastify.get('/v1/models', async () => ({ data: [] }));
    await fastify.inject({ method: 'GET', url: '/health/live' });
    await fastify.inject({ method: 'GET', url: '/health/ready' });
    await fastify.inject({ method: 'GET', url: '/v1/models?x=1' });
    ready = false;
    await fastify.inject({ method: 'GET', url: '/health/ready' });
    await fastify.close();
    expect(lines.map((l) => l.split(' ').slice(1, 4).join(' '))).toEqual(['GET /v1/models 200', 'GET /health/ready 503']);
  });
});
