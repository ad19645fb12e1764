import type { INestApplicationContext } from '@nestjs/common';
import { Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { CqrsModule } from '@nestjs/cqrs';
import { ManagementModule } from '@svc/management';
import { createRuntime, RuntimeModule, type Runtime } from '@svc/runtime';
import { configOrExit } from './process';

/**
 * What the operator CLI's commands run on: the runtime, and for the management use cases the
 * gateway's services without its HTTP edge. ./cli.ts loads this module only once a command's
 * arguments have been accepted, since loading it (NestJS, every context) takes most of a second.
 */

export async function withRuntime<T>(fn: (runtime: Runtime) => Promise<T>): Promise<T> {
  const runtime = await createRuntime(configOrExit(), { withProviders: false });
  try {
    return await fn(runtime);
  } finally {
    await runtime.close();
  }
}

/** The management use cases on this process's runtime, without the HTTP edge. */
@Module({})
class CliModule {
  static forRoot(runtime: Runtime): DynamicModule {
    return { module: CliModule, imports: [RuntimeModule.forRoot(runtime), CqrsModule.forRoot(), ManagementModule] };
  }
}

/**
 * The gateway's services without its HTTP server. This process projects too (safe beside a
 * worker), so what a command writes is readable when it prints.
 */
export function withServices<T>(fn: (context: INestApplicationContext, runtime: Runtime) => Promise<T>): Promise<T> {
  return withRuntime(async (runtime) => {
    runtime.projections.start();
    const context = await NestFactory.createApplicationContext(CliModule.forRoot(runtime), { logger: false });
    try {
      return await fn(context, runtime);
    } finally {
      await context.close();
    }
  });
}
