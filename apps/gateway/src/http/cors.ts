import fastifyCors, { type FastifyCorsOptions } from '@fastify/cors';
import type { FastifyRequest } from 'fastify';

/**
 * The request headers the official SDKs send from a browser (the OpenAI SDK's `x-stainless-*`
 * and Anthropic's), and the service's own. A preflight is answered with those of them it asks
 * for; a header outside them is left out, and the browser then refuses the request itself.
 */
const ALLOWED_HEADERS = new Set([
  'authorization',
  'x-api-key',
  'content-type',
  'anthropic-version',
  'anthropic-beta',
  'anthropic-dangerous-direct-browser-access',
  'idempotency-key',
  'openai-organization',
  'openai-project',
  'x-openrouter-cache',
  'x-client-request-id',
]);
const ALLOWED_PREFIXES = ['x-svc-', 'x-stainless-', 'x-openrouter-cache-'];

/** Response headers a browser script may read: the ones the service writes for its callers. */
const EXPOSED_HEADERS = [
  'x-svc-generation-id',
  // The USD charged for an answer whose body is not JSON (speech audio, a transcript as text).
  'x-svc-cost',
  'x-svc-cache-status',
  'x-svc-cache-ttl',
  'x-svc-cache-age',
  'x-svc-cache-source-id',
  'x-svc-ignored-params',
  'x-svc-compressed-messages',
  'x-svc-model-redirected-from',
  'x-svc-model-replacement',
  'x-ratelimit-limit-requests',
  'x-ratelimit-remaining-requests',
  'x-ratelimit-reset-requests',
  'x-ratelimit-limit-tokens',
  'x-ratelimit-remaining-tokens',
  'x-ratelimit-reset-tokens',
  'retry-after',
  'idempotent-replayed',
  'deprecation',
  'sunset',
].join(', ');

/** Origin left unanswered: no CORS header but `Vary: Origin`, which a dynamic origin always gets. */
const NO_CORS: FastifyCorsOptions = { origin: false };

export function allowedRequestHeaders(requested: string | undefined): string[] {
  return (requested ?? '')
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter((h) => h !== '' && (ALLOWED_HEADERS.has(h) || ALLOWED_PREFIXES.some((p) => h.startsWith(p))));
}

/**
 * Issue 15.1, spec 5 rule 4 ("for browser use"): `/v1` answers CORS preflights for any origin and
 * marks its answers readable by it. Whether the origin may use a key is the key's
 * `allowed_referrers`, checked on the real request as for any other. The operator API gets no
 * CORS: a browser page can never call it.
 */
export const corsOptions: FastifyCorsOptions = {
  hook: 'onRequest',
  delegator: (request: FastifyRequest, callback: (error: Error | null, options: FastifyCorsOptions) => void) => {
    // A browser sends Origin on every cross-origin call; a call without it (an SDK on a server,
    // curl) would only carry the CORS headers, some 470 bytes, on every answer. `Vary: Origin`
    // stays, so a cache never hands such an answer to a browser. A preflight is answered as ever.
    if (request.headers.origin === undefined && request.method !== 'OPTIONS') return callback(null, NO_CORS);
    const path = request.url.split('?')[0];
    if (!(path === '/v1' || path.startsWith('/v1/'))) return callback(null, NO_CORS);
    callback(null, {
      // The request's own origin, never `*`: a key restricted to a domain is for that domain's pages.
      origin: true,
      methods: ['GET', 'POST', 'PATCH', 'PUT', 'DELETE'],
      allowedHeaders: allowedRequestHeaders(request.headers['access-control-request-headers']),
      exposedHeaders: EXPOSED_HEADERS,
      maxAge: 600,
      strictPreflight: false,
    });
  },
};

export { fastifyCors };
