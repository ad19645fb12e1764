import send from '@fastify/send';
import { dirname } from 'node:path';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { buildOpenApiDocument, collectRoutes, type OpenApiDocument, type RouteList } from '@svc/openapi';
import { CONSOLE_CSP } from './console';

/** Swagger UI's prebuilt files, served from node_modules: the page loads nothing from elsewhere. */
const SWAGGER_UI_DIR = dirname(require.resolve('swagger-ui-dist/package.json'));
const ASSETS = new Set(['swagger-ui.css', 'swagger-ui-bundle.js', 'favicon-32x32.png', 'favicon-16x16.png']);

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>svc-gateway API reference</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

/**
 * A file rather than an inline script, so the CSP can forbid inline scripts. No validator badge:
 * Swagger UI would send the document to validator.swagger.io for it.
 */
const INIT = `window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true, validatorUrl: null, presets: [SwaggerUIBundle.presets.apis], layout: 'BaseLayout' });\n`;

const PAGE_HEADERS = {
  // The console's policy: this origin's own scripts only, no framing.
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

/**
 * Issue 22: `GET /openapi.json`, the OpenAPI 3.1 document of the routes this app registers, and
 * `GET /docs`, Swagger UI on it; neither needs a key. Call it before any route is registered:
 * it records them all (the returned list), and the document is built from that list on the
 * first request, when every route, Nest's included, is known.
 */
export function installApiReference(
  app: FastifyInstance,
  errorHandler: (err: FastifyError, request: FastifyRequest, reply: FastifyReply) => unknown,
): RouteList {
  const routes = collectRoutes(app);
  let document: OpenApiDocument | undefined;
  app.get('/openapi.json', { errorHandler }, (_request, reply) => {
    document ??= buildOpenApiDocument(routes.all()).document;
    return reply.header('cache-control', 'no-cache').type('application/json; charset=utf-8').send(document);
  });
  app.get('/docs', { errorHandler }, (_request, reply) =>
    reply
      .headers({ ...PAGE_HEADERS, 'cache-control': 'no-cache' })
      .type('text/html; charset=utf-8')
      .send(PAGE),
  );
  app.get('/docs/*', { errorHandler }, async (request, reply) => {
    const file = (request.params as { '*': string })['*'];
    if (file === 'init.js')
      return reply
        .headers({ ...PAGE_HEADERS, 'cache-control': 'no-cache' })
        .type('text/javascript; charset=utf-8')
        .send(INIT);
    if (!ASSETS.has(file)) return reply.callNotFound();
    const result = await send(request.raw, `/${file}`, { root: SWAGGER_UI_DIR, dotfiles: 'deny', cacheControl: false });
    if (result.type !== 'file') return reply.callNotFound();
    return reply
      .code(result.statusCode)
      .headers(result.headers)
      .headers({ ...PAGE_HEADERS, 'cache-control': 'public, max-age=3600' })
      .send(result.stream);
  });
  return routes;
}
