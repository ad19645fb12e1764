import type { JsonSchema } from '../json-schema';

/**
 * Who may call it (spec 5.3): `none` no key; `any` any key scope (read-only too); `full` a
 * full key (model calls); `management` a management key; `admin` the operator's
 * SVC_ADMIN_TOKEN (docs/api/operator.md, and "Metrics" in docs/operations.md).
 */
export type Access = 'none' | 'any' | 'full' | 'management' | 'admin';

export interface QueryParameter {
  name: string;
  schema: JsonSchema;
  description?: string;
  required?: boolean;
}

export interface OperationDescription {
  summary: string;
  description?: string;
  tag: string;
  access: Access;
  /** The OpenAPI path, where Fastify's wildcard (`*`) stands for a named parameter. */
  path?: string;
  pathParameters?: Record<string, string>;
  query?: QueryParameter[];
  /** Billed POSTs take Idempotency-Key and the attribution headers (spec 4). */
  billed?: boolean;
  /** The response cache headers (spec 4.2, "Response caching"). */
  cacheable?: boolean;
  body?: { schema: JsonSchema; multipart?: boolean; json?: boolean; required?: boolean };
  ok: { status?: number; description?: string; schema?: JsonSchema; content?: Record<string, JsonSchema>; stream?: boolean; headers?: Record<string, string> };
  /** Error statuses besides those every route of its access level can answer (see document.ts). */
  errors?: number[];
  /** Other answers that are not the error object (readiness's 503). */
  also?: Record<number, { description: string; schema: JsonSchema }>;
  /** Spec 2.1, 4.3: errors in Anthropic's shape. */
  anthropic?: boolean;
  /** Spec 4.16: not an HTTP route but a WebSocket upgrade on the server's `upgrade` event. */
  websocket?: boolean;
}
