import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { startBackground } from '../../../src/background';
import { closeOnSignals, configOrExit, runMain } from '../../../src/process';
import { createRuntime } from '../../../src/runtime';
import { WorkerModule } from './worker.module';

/** Background work: projections from the event log, expiry of holds nobody settled, webhooks, and batch lines (which call the models). */
runMain(async () => {
  const runtime = await createRuntime(configOrExit(), { servesRequests: false });
  const context = await NestFactory.createApplicationContext(WorkerModule.forRoot(runtime), { logger: ['error', 'warn'] });
  const background = startBackground(runtime, context);
  closeOnSignals(async () => {
    await background.stop();
    await context.close();
    await runtime.close();
  }, runtime.config.shutdownGraceMs);
  console.log(`svc-worker running projections (${runtime.projections.projections.map((p) => p.name).join(', ')}) and hold expiry`);
});
