import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Catalog } from '@svc/catalog';
import type { Caller } from '@svc/identity';
import { routeLabel, type GenerationNotes } from '@svc/metrics';
import { nanoToUsd } from '@svc/platform';
import { modelLabel } from '../metrics/request-metrics';
import { onResponseOver, type ResponseEnd } from './response-over';

/**
 * Health probes (issue 22) come every few seconds from the orchestrator: a line each would bury
 * the requests. The liveness probe is never logged; the readiness probe only when it answers
 * anything but 200, since a 503 is the news an operator looks for.
 */
export function isQuietProbe(path: string, status: number): boolean {
  return path === '/health/live' || (path === '/health/ready' && status === 200);
}

/** The fields of a request's log line (issue 22), beside pino's level, time and request id. */
export interface RequestLine {
  method: string;
  /** The route template as the spec writes it (`/v1/keys/{id}`); `unmatched` for a 404. */
  route: string;
  /** The path as it came, without its query string: ids and filters stay out. */
  path: string;
  status: number;
  latency_ms: number;
  /** Of the latency, the time spent waiting on providers: the rest is the gateway's own. */
  upstream_ms?: number;
  generation_id?: string;
  key_id?: string;
  account_id?: string;
  /** The catalog model the request named (never an arbitrary string a caller sent). */
  model?: string;
  provider?: string;
  /** USD charged for this request, exact to the nano. */
  cost?: number;
  /**
   * The client left before the response was over. Its generation still completes and is billed
   * (spec 1 rule 4), after this line: its charge is in `GET /v1/generation`.
   */
  client_closed?: true;
}

/**
 * One request's line: who (key and account ids, never a secret), what (route, model, the
 * provider that answered), how it went (status, latency, time upstream) and what it cost. Never
 * a header, a query string or a body.
 */
export function requestLine(
  request: FastifyRequest & { caller?: Caller },
  reply: FastifyReply,
  notes: GenerationNotes,
  catalog: Pick<Catalog, 'get'>,
  end: ResponseEnd,
): RequestLine {
  const generation = reply.getHeader('x-svc-generation-id');
  const record = notes.takeFor(request, generation);
  const model = modelLabel(request, catalog, record);
  const provider = record?.provider ?? record?.failedProvider;
  return {
    method: request.method,
    route: routeLabel(request.routeOptions.url),
    // Node's parser refuses control characters in the path, so it cannot forge a line; the
    // cap keeps a 16 KB URL out.
    path: request.url.split('?')[0].slice(0, 200),
    status: end.status,
    latency_ms: Math.round(reply.elapsedTime * 10) / 10,
    ...(record && record.upstreamSeconds > 0 ? { upstream_ms: Math.round(record.upstreamSeconds * 10_000) / 10 } : {}),
    ...(typeof generation === 'string' ? { generation_id: generation } : {}),
    ...(request.caller ? { key_id: request.caller.keyId, account_id: request.caller.accountId } : {}),
    ...(model ? { model } : {}),
    ...(provider ? { provider } : {}),
    ...(record?.charged ? { cost: nanoToUsd(record.chargedNano) } : {}),
    ...(end.clientClosed ? { client_closed: true as const } : {}),
  };
}

/**
 * Issue 22: one line per request through Fastify's logger (pino), written when the response
 * has ended, so a stream's line carries its charge: the metering pipeline's notes of the
 * generation the response named (`x-svc-generation-id`) are taken then. A client that left
 * has its line when it left.
 */
export function installRequestLog(fastify: FastifyInstance, notes: GenerationNotes, catalog: Pick<Catalog, 'get'>): void {
  notes.enabled = true;
  onResponseOver(fastify, (request, reply, end) => {
    const line = requestLine(request, reply, notes, catalog, end);
    if (isQuietProbe(line.path, line.status)) return;
    const message = `${line.method} ${line.path} ${line.status}`;
    if (line.status >= 500) request.log.error(line, message);
    else request.log.info(line, message);
  });
}
