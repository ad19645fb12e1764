/**
 * Issue 41 item 6: a method a path does not serve is 405 with `Allow` naming the methods it
 * does (RFC 9110 15.5.6), in the spec's error object (section 2.1), where a 404 would tell a
 * client the path itself does not exist. Fastify only says "no route"; the paths every route
 * registered (the list the OpenAPI document is built from) say which methods a path has.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '@svc/platform';
import type { RouteList } from '@svc/openapi';

/** A route pattern (`/v1/videos/:id/content`, `/console/*`) as a test of a concrete path. */
function patternOf(url: string): RegExp {
  const source = url
    .split('/')
    .map((segment) => {
      if (segment === '*') return '.*';
      // `:id`, or `:id(regex)`: one segment whatever its constraint; a rare mismatch is still a 404.
      if (segment.startsWith(':')) return '[^/]+';
      return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\\\*$/, '.*');
    })
    .join('/');
  return new RegExp(`^${source}$`);
}

interface MethodTable {
  routes: RouteList;
  /** Built on first use, once every route (Nest's included) is registered. */
  patterns?: Array<{ method: string; test: RegExp }>;
}

const TABLES = new WeakMap<FastifyInstance, MethodTable>();

/** Keeps the app's route list for methodNotAllowed; `routes` from installApiReference. */
export function installMethodTable(app: FastifyInstance, routes: RouteList): void {
  TABLES.set(app, { routes });
}

/**
 * The methods `request`'s path is served with, sorted; empty when no route has the path. OPTIONS
 * is left out: the CORS preflight route takes every path, which says nothing of the path.
 */
export function allowedMethods(request: FastifyRequest): string[] {
  const table = TABLES.get(request.server);
  if (!table) return [];
  table.patterns ??= table.routes
    .all()
    .filter((route) => route.method !== 'OPTIONS')
    .map((route) => ({ method: route.method, test: patternOf(route.url) }));
  const path = request.url.split('?')[0];
  return [...new Set(table.patterns.filter((p) => p.test.test(path)).map((p) => p.method))].sort();
}

/** The 405 for a request no route took, when its path has other methods; null when a 404 is right. */
export function methodNotAllowed(request: FastifyRequest): ApiError | null {
  const allowed = allowedMethods(request);
  if (allowed.length === 0 || allowed.includes(request.method)) return null;
  return new ApiError(
    405,
    'invalid_request_error',
    `${request.method} is not served on ${request.url.split('?')[0]}; it takes ${allowed.join(', ')}.`,
    'method_not_allowed',
    null,
    { allow: allowed.join(', ') },
  );
}
