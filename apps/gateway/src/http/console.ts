import send from '@fastify/send';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/**
 * The page may talk to this origin only and run only its own bundled scripts: a console that
 * holds a management key must not be framed, nor load or send anything elsewhere.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  // The chart library sets style attributes on its SVG.
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * Serves the built console (docs/api/console.md) at /console/ with `@fastify/send`, the file sender
 * under `@fastify/static` (whose Node 20 line cannot be installed beside Nest's Fastify
 * adapter). The assets' names carry content hashes, so they may be cached for good; index.html
 * names the current ones, so it may not. A path outside the build, a dotfile or a missing file
 * is the API's 404.
 */
export function serveConsole(
  app: FastifyInstance,
  dir: string,
  errorHandler: (err: FastifyError, request: FastifyRequest, reply: FastifyReply) => unknown,
): void {
  const serve = async (request: FastifyRequest, reply: FastifyReply, path: string) => {
    const result = await send(request.raw, path, { root: dir, index: 'index.html', dotfiles: 'ignore', cacheControl: false });
    if (result.type === 'error') return reply.callNotFound();
    if (result.type === 'directory') return reply.redirect(`${request.url.split('?')[0]}/`, 301);
    return reply
      .code(result.statusCode)
      .headers(result.headers)
      .headers({
        'cache-control': path.startsWith('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache',
        'content-security-policy': CONSOLE_CSP,
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
        'x-frame-options': 'DENY',
      })
      .send(result.stream);
  };
  app.get('/console', { errorHandler }, (_request, reply) => reply.redirect('/console/', 301));
  app.get('/console/*', { errorHandler }, (request, reply) => serve(request, reply, `/${(request.params as { '*': string })['*']}`));
}
