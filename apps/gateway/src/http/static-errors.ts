import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, type Clock } from '@svc/platform';
import { toApiError } from './error-mapping';

/**
 * The error handler of the routes registered on Fastify itself (the console, the API reference):
 * Nest's exception filter only covers its own routes, and Fastify's default answer
 * (`{statusCode, code, error, message}`) is not the spec's. A path the request checks refuse (a
 * NUL in it, issue 41 S5) or any fault there leaves as the error object (spec 2.1).
 */
export function staticRouteErrors(clock: Clock) {
  return (err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    let apiError = toApiError(err, clock.now());
    // `*` is the router's name for the rest of the path, which means nothing to a client.
    if (apiError.param === '*')
      apiError = new ApiError(apiError.status, apiError.type, apiError.message.replace("'*'", 'The request path'), apiError.code, null, apiError.headers);
    if (apiError.status >= 500) request.log.error({ err }, `${request.method} ${request.routeOptions.url ?? ''} failed`);
    return reply.code(apiError.status).headers(apiError.headers).type('application/json; charset=utf-8').send(apiError.toBody());
  };
}
