import { ApiError, checkIdempotencyKey } from '@svc/platform';

export interface CacheRequest {
  ttlSeconds: number;
  /** `X-Svc-Cache-Clear: true`: answer afresh and replace the entry. */
  clear: boolean;
}

export interface EdgeHeaders {
  idempotencyKey: string | null;
  /** null: caching not asked for (or not offered by the endpoint). */
  cache: CacheRequest | null;
  /** `X-Svc-Cache: false` sent: no cache, even where a preset would turn it on. */
  cacheRefused: boolean;
}

/** Spec 8: a cached answer lives 300 s unless told otherwise. */
export const DEFAULT_CACHE_TTL_SECONDS = 300;
const MAX_TTL_SECONDS = 86_400;
/** The request headers may also carry the upstream router's name instead of ours. */
const CACHE_HEADER_PREFIXES = ['x-svc-cache', 'x-openrouter-cache'];

type Headers = Record<string, string | string[] | undefined>;

/** Spec 4 (optional headers), 4.2 (response caching) and 8: a malformed header is a 400 naming it. */
export function readEdgeHeaders(headers: Headers, cacheable: boolean): EdgeHeaders {
  const idempotencyKey = single(headers, 'idempotency-key', 'Idempotency-Key');
  if (idempotencyKey !== null) {
    try {
      checkIdempotencyKey(idempotencyKey);
    } catch (err) {
      throw ApiError.invalidRequest(`Idempotency-Key: ${(err as Error).message}.`, 'Idempotency-Key');
    }
  }
  const cache = cacheable ? cacheRequest(headers) : null;
  return {
    idempotencyKey,
    cache,
    cacheRefused: cacheable && cache === null && CACHE_HEADER_PREFIXES.some((prefix) => single(headers, prefix, 'X-Svc-Cache')?.toLowerCase() === 'false'),
  };
}

function cacheRequest(headers: Headers): CacheRequest | null {
  const read = (suffix: string, name: string) => {
    for (const prefix of CACHE_HEADER_PREFIXES) {
      const value = single(headers, `${prefix}${suffix}`, name);
      if (value !== null) return value;
    }
    return null;
  };
  const enabled = flag(read('', 'X-Svc-Cache'), 'X-Svc-Cache');
  const ttlText = read('-ttl', 'X-Svc-Cache-TTL');
  const clear = flag(read('-clear', 'X-Svc-Cache-Clear'), 'X-Svc-Cache-Clear');
  if (!enabled) return null;
  let ttlSeconds = DEFAULT_CACHE_TTL_SECONDS;
  if (ttlText !== null) {
    ttlSeconds = /^\d+$/.test(ttlText) ? Number(ttlText) : NaN;
    if (!(ttlSeconds >= 1 && ttlSeconds <= MAX_TTL_SECONDS)) {
      throw ApiError.invalidRequest(
        `X-Svc-Cache-TTL must be a whole number of seconds from 1 to ${MAX_TTL_SECONDS}, got ${JSON.stringify(ttlText)}.`,
        'X-Svc-Cache-TTL',
      );
    }
  }
  return { ttlSeconds, clear };
}

function flag(value: string | null, name: string): boolean {
  if (value === null) return false;
  const v = value.toLowerCase();
  if (v === 'true') return true;
  if (v === 'false') return false;
  throw ApiError.invalidRequest(`${name} must be true or false, got ${JSON.stringify(value)}.`, name);
}

function single(headers: Headers, lower: string, name: string): string | null {
  const value = headers[lower];
  if (value === undefined) return null;
  if (Array.isArray(value)) throw ApiError.invalidRequest(`${name} must be sent once.`, name);
  return value;
}
