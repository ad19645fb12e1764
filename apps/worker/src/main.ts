import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { nestLogger, processLog, routeConsoleThrough } from '@svc/platform';
import { startBackground } from '../../../src/background';
import { closeOnSignals, configOrExit, runMain } from '../../../src/process';
import { createRuntime } from '@svc/runtime';
import { WorkerModule } from './worker.module';

/** Background work: projections from the event log, expiry of holds nobody settled, webhooks, and batch lines (which call the models). */
runMain(async () => {
  const config = configOrExit();
  // Issue 22: one format for every line a collector reads (LOG_LEVEL, SVC_LOG_FORMAT).
  const log = processLog(config);
  routeConsoleThrough(log);
  const runtime = await createRuntime(config, { servesRequests: false });
  const context = await NestFactory.createApplicationContext(WorkerModule.forRoot(runtime), { logger: nestLogger(log) });
  const background = startBackground(runtime, context);
  closeOnSignals(async () => {
    await background.stop();
    await context.close();
    await runtime.close();
  }, runtime.config.shutdownGraceMs);
  const metrics = runtime.metricsPort === null ? '' : `; metrics on port ${runtime.metricsPort}`;
  const projections = runtime.projections.projections.map((p) => p.name);
  log.info({ projections, metrics_port: runtime.metricsPort }, `svc-worker running projections (${projections.join(', ')}) and hold expiry${metrics}`);
});
