import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Catalog } from '@svc/catalog';
import { routeLabel, type RequestRecord, type ServiceMetrics } from '@svc/metrics';
import { onResponseOver } from '../http/response-over';

/**
 * Issue 22: every request counted once, when its response is over (errors and clients that left
 * included), by route template, method, status and the catalog model it named. In memory only:
 * no I/O on the path.
 */
export function installRequestMetrics(fastify: FastifyInstance, metrics: ServiceMetrics, catalog: Catalog): void {
  // Route templates are few and fixed: each is rewritten once, not on every request.
  const labels = new Map<string | undefined, string>();
  const labelOf = (template: string | undefined) => {
    let label = labels.get(template);
    if (label === undefined) labels.set(template, (label = routeLabel(template)));
    return label;
  };
  // The pipeline notes each hold's model, for requests whose body names none.
  metrics.requests.enabled = true;
  onResponseOver(fastify, (request, reply, end) => {
    const record = metrics.requests.takeFor(request, reply.getHeader('x-svc-generation-id'));
    metrics.recordRequest(
      labelOf(request.routeOptions.url),
      methodLabel(request.method),
      end.status,
      modelLabel(request, catalog, record),
      reply.elapsedTime / 1000,
    );
  });
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** Node accepts any token as a method; only the usual ones become label values. */
export function methodLabel(method: string): string {
  return METHODS.has(method) ? method : 'OTHER';
}

/**
 * The model the request named, when it is a catalog model id; else the model its generation's
 * hold was placed for (a multipart transcription, a search's engine); else "" (never a
 * caller's arbitrary string).
 */
export function modelLabel(request: Pick<FastifyRequest, 'body'>, catalog: Pick<Catalog, 'get'>, record?: Pick<RequestRecord, 'model'>): string {
  const body = request.body as { model?: unknown } | null | undefined;
  const named = body !== null && typeof body === 'object' ? body.model : undefined;
  const model = typeof named === 'string' && catalog.get(named) !== undefined ? named : record?.model;
  return typeof model === 'string' && catalog.get(model) !== undefined ? model : '';
}
