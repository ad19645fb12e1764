import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';

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
 * Serves the built console (README: Console) at /console/. Its assets have content hashes in
 * their names, so they may be cached for good; index.html names the current ones, so it may not.
 */
export async function serveConsole(app: FastifyInstance, dir: string): Promise<void> {
  await app.register(fastifyStatic, {
    root: dir,
    prefix: '/console/',
    index: 'index.html',
    cacheControl: false,
    setHeaders: (res, path) => {
      res.setHeader('cache-control', /[\\/]assets[\\/]/.test(path) ? 'public, max-age=31536000, immutable' : 'no-cache');
      res.setHeader('content-security-policy', CONSOLE_CSP);
      res.setHeader('x-content-type-options', 'nosniff');
      res.setHeader('referrer-policy', 'no-referrer');
      res.setHeader('x-frame-options', 'DENY');
    },
  });
  app.get('/console', (_request, reply) => reply.redirect('/console/', 301));
}
