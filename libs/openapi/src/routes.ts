import type { FastifyInstance } from 'fastify';
import type { RegisteredRoute } from './document';

/** The routes an app registered, as the OpenAPI document is built from them. */
export class RouteList {
  private readonly routes = new Map<string, RegisteredRoute>();

  add(route: RegisteredRoute): void {
    this.routes.set(`${route.method} ${route.url}`, route);
  }

  all(): RegisteredRoute[] {
    return [...this.routes.values()];
  }
}

/**
 * Records every route registered on `app` from now on (Fastify's onRoute hook), so it must be
 * installed before any plugin or controller adds one. Nest registers its controllers' routes
 * on this same instance, so they are all seen with their full paths.
 */
export function collectRoutes(app: FastifyInstance): RouteList {
  const list = new RouteList();
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) list.add({ method: String(method).toUpperCase(), url: route.url });
  });
  return list;
}
