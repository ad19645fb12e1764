import 'reflect-metadata';
import { boundHeapGrowth, closeOnSignals, configOrExit, runMain } from '../../../src/process';
import { createRuntime } from '../../../src/runtime';
import { createGatewayApp } from './app';

/**
 * The HTTP edge alone, for production: stateless, scaled out behind a load balancer. The
 * worker process keeps the projections it reads up to date.
 */
boundHeapGrowth();
runMain(async () => {
  const config = configOrExit();
  const runtime = await createRuntime(config);
  const app = await createGatewayApp(runtime);
  // Before it says it listens: a signal from then on must stop it cleanly, not by default.
  closeOnSignals(async () => {
    await app.close();
    await runtime.close();
  }, config.shutdownGraceMs);
  await app.listen({ port: config.port, host: config.host });
  console.log(`svc-gateway listening on ${await app.getUrl()}`);
});
