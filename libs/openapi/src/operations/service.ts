import { constant, obj, ref, str } from '../json-schema';
import type { OperationDescription } from './types';

/** Operating it (docs/operations.md "Health", "Metrics") and this document. */
export const SERVICE_OPERATIONS: Record<string, OperationDescription> = {
  'GET /health/live': { summary: 'Liveness', tag: 'Operations', access: 'none', ok: { schema: obj({ status: constant('ok') }) } },
  'GET /health/ready': {
    summary: 'Readiness of the database, Redis, the event store and the projections',
    tag: 'Operations',
    access: 'none',
    ok: { schema: ref('Readiness') },
    also: { 503: { description: 'Not ready: a check failed (the same body).', schema: ref('Readiness') } },
  },
  'GET /metrics': {
    summary: 'Prometheus metrics',
    description: 'On the main port only without SVC_METRICS_PORT.',
    tag: 'Operations',
    access: 'admin',
    ok: { content: { 'text/plain': str('Prometheus text format') } },
  },
  'GET /openapi.json': {
    summary: 'This document',
    tag: 'Operations',
    access: 'none',
    ok: { content: { 'application/json': { type: 'object', required: ['openapi', 'paths'] } } },
  },
  'GET /docs': { summary: 'The API reference page (Swagger UI)', tag: 'Operations', access: 'none', ok: { content: { 'text/html': str() } } },
};
