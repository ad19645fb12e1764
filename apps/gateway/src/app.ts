import type { AddressInfo } from 'node:net';
import fastifyMultipart from '@fastify/multipart';
import { LogController } from 'fastify';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Runtime } from '@svc/runtime';
import { GatewayModule } from './gateway.module';
import { RealtimeUpgrade } from './realtime/realtime-upgrade';
import { corsOptions, fastifyCors } from './http/cors';
import { serveConsole } from './http/console';
import { installApiReference } from './http/openapi';
import { REALTIME_ENDPOINT } from '@svc/realtime';
import { nestLogger, processLog } from '@svc/platform';
import { warmTokenCounting } from '@svc/providers';
import { clientErrorHandler, frameworkErrors, installRequestChecks } from './http/request-checks';
import { installRequestLog } from './http/request-log';
import { staticRouteErrors } from './http/static-errors';
import { installRequestMetrics } from './metrics/request-metrics';
import { installTracing } from './http/tracing';
import { installMethodTable } from './http/methods';
import { installPeerForwarding } from './edge/peer-forwarding';
import { installPeerLedger } from './edge/peer-ledger';

/** Spec section 8: request bodies up to 10 MB. */
export const BODY_LIMIT_BYTES = 10 * 1024 * 1024;

/**
 * How often Node looks for connections past their header or request timeout (its default, 30 s,
 * would let a stalled client hold its socket up to 30 s longer than the timeout says).
 */
export const CONNECTIONS_CHECK_MS = 1_000;

export async function createGatewayApp(runtime: Runtime, { logger = true } = {}): Promise<NestFastifyApplication> {
  const { trustProxy, tls, serverTimeouts } = runtime.config;
  const log = logger ? processLog(runtime.config) : undefined;
  // Issue 41 S3 (slowloris): a client must send its headers, then its whole request, in time.
  // Both clocks stop once the request is received, so a long stream or a slow upstream answer is
  // never cut; there is no socket inactivity timeout for that reason (connectionTimeout stays 0).
  // Requests per socket stay unlimited: a cap frees nothing a slow client holds.
  const serverOptions = {
    headersTimeout: serverTimeouts.headersMs,
    requestTimeout: serverTimeouts.requestMs,
    connectionsCheckingInterval: CONNECTIONS_CHECK_MS,
  };
  const adapter = new FastifyAdapter({
    bodyLimit: BODY_LIMIT_BYTES,
    // Fastify sets these two on the server after creating it; the rest go to Node's constructor.
    requestTimeout: serverTimeouts.requestMs,
    keepAliveTimeout: serverTimeouts.keepAliveMs,
    ...(tls ? {} : { http: serverOptions }),
    trustProxy: trustProxy.length > 0 ? trustProxy : false,
    clientErrorHandler,
    frameworkErrors,
    // SVC_TLS_CERT and SVC_TLS_KEY (read and checked with the configuration): every route, and
    // WebSocket upgrades, over HTTPS on the same port; HTTP/1.1 as without them (no http2).
    // Plain HTTP to that port gets no answer: the handshake fails and the socket is closed.
    // The server is then an https.Server where the types say http.Server; both are net.Servers
    // with the same request and upgrade events, which is all the app and Nest use of it.
    ...(tls ? { https: { cert: tls.cert, key: tls.key, ...serverOptions } } : {}),
    // Issue 22: the process's pino at LOG_LEVEL; Fastify's own two lines per request give way to ours.
    ...(log ? { loggerInstance: log } : {}),
    logController: new LogController({ disableRequestLogging: true }),
  });
  // First: the request's span covers every other hook, and its context is entered before theirs.
  installTracing(adapter.getInstance(), runtime.tracing);
  // Issue 22: before any route is registered, so the OpenAPI document sees every one.
  // Issue 41 S5: the routes Fastify serves itself answer errors in the spec's shape too.
  const staticErrors = staticRouteErrors(runtime.clock);
  const routes = installApiReference(adapter.getInstance(), staticErrors);
  installMethodTable(adapter.getInstance(), routes);
  // Before the request checks: a preflight is answered before anything else looks at it, and
  // every answer (errors included) carries the CORS headers a browser needs to read it.
  await adapter.getInstance().register(fastifyCors, corsOptions);
  // Multipart forms (spec 4.10: audio files) are read by the routes that take them, and refused
  // on every other route by the request checks.
  await adapter.getInstance().register(fastifyMultipart, { throwFileSizeLimit: true });
  installRequestChecks(adapter.getInstance());
  if (runtime.config.consoleDir !== null) serveConsole(adapter.getInstance(), runtime.config.consoleDir, staticErrors);
  if (logger && runtime.config.requestLog) installRequestLog(adapter.getInstance(), runtime.metrics.requests, runtime.catalog);
  installRequestMetrics(adapter.getInstance(), runtime.metrics, runtime.catalog);
  if (runtime.peerLedger) installPeerLedger(adapter.getInstance(), runtime);
  else installPeerForwarding(adapter.getInstance(), runtime, BODY_LIMIT_BYTES);
  const app = await NestFactory.create<NestFastifyApplication>(GatewayModule.forRoot(runtime), adapter, {
    // Fastify's own JSON parser (with the empty-body rule of installRequestChecks), and no form
    // parser: every route takes JSON.
    bodyParser: false,
    // Nest's messages in the same format; its route mapping at start is debug.
    logger: log ? nestLogger(log) : false,
  });
  await app.init();
  // Spec 4.16: GET /v1/realtime is a WebSocket upgrade, which Fastify's routes never see.
  app.get(RealtimeUpgrade).attach(app.getHttpServer(), log && runtime.config.requestLog ? adapter.getInstance().log : null);
  routes.add({ method: 'GET', url: REALTIME_ENDPOINT });
  // Holds count prompt tokens (spec 1 rule 1): the encoding is built before the first request.
  warmTokenCounting();
  return app;
}

/**
 * Issue 45 (SVC_PEER_FORWARDING): once the gateway listens, its lease says where the other
 * gateways forward the requests of the accounts it serves.
 */
export async function advertiseToPeers(app: NestFastifyApplication, runtime: Runtime): Promise<void> {
  const { peerForwarding, host, tls } = runtime.config;
  if (!peerForwarding || !runtime.gatewayLease) return;
  const { port } = app.getHttpServer().address() as AddressInfo;
  const url = peerForwarding.url ?? `${tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`;
  await runtime.gatewayLease.advertise(url);
}
