import 'reflect-metadata';
import { routeConsoleThrough } from '@svc/platform';
import { boundHeapGrowth, closeOnSignals, configOrExit, runMain } from '../../../src/process';
import { createRuntime } from '@svc/runtime';
import { advertiseToPeers, createGatewayApp } from './app';

/**
 * The HTTP edge alone, for production: stateless, scaled out behind a load balancer. The
 * worker process keeps the projections it reads up to date.
 */
boundHeapGrowth();
runMain(async () => {
  const config = configOrExit();
  const runtime = await createRuntime(config);
  const app = await createGatewayApp(runtime);
  // Issue 22: warnings and errors in the logger's format too (LOG_LEVEL, SVC_LOG_FORMAT).
  routeConsoleThrough(app.getHttpAdapter().getInstance().log);
  // Before it says it listens: a signal from then on must stop it cleanly, not by default.
  closeOnSignals(async () => {
    await app.close();
    await runtime.close();
  }, config.shutdownGraceMs);
  await app.listen({ port: config.port, host: config.host });
  await advertiseToPeers(app, runtime);
  const url = await app.getUrl();
  app.getHttpAdapter().getInstance().log.info({ url }, `svc-gateway listening on ${url}`);
});
