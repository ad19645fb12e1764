import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Catalog } from '@svc/catalog';
import { routeLabel, type ServiceMetrics } from '@svc/metrics';

/**
 * Issue 22: every request counted once, when its response finishes (errors included), by route
 * template, method, status and the catalog model it named. In memory only: no I/O on the path.
 */
export function installRequestMetrics(fastify: FastifyInstance, metrics: ServiceMetrics, catalog: Catalog): void {
  // Route templates are few and fixed: each is rewritten once, not on every request.
  const labels = new Map<string | undefined, string>();
  const labelOf = (template: string | undefined) => {
    let label = labels.get(template);
    if (label === undefined) labels.set(template, (label = routeLabel(template)));
    return label;
  };
  fastify.addHook('onResponse', async (request, reply) => {
    metrics.recordRequest(labelOf(request.routeOptions.url), methodLabel(request.method), reply.statusCode, modelLabel(request, catalog), reply.elapsedTime / 1000);
  });
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** Node accepts any token as a method; only the usual ones become label values. */
export function methodLabel(method: string): string {
  return METHODS.has(method) ? method : 'OTHER';
}

/** The model the request named, when it is a catalog model id; else "" (never a caller's arbitrary string). */
export function modelLabel(request: Pick<FastifyRequest, 'body'>, catalog: Pick<Catalog, 'get'>): string {
  const body = request.body as { model?: unknown } | null | undefined;
  const model = body !== null && typeof body === 'object' ? body.model : undefined;
  return typeof model === 'string' && catalog.get(model) !== undefined ? model : '';
}
