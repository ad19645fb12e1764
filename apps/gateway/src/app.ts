import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Runtime } from '../../../src/runtime';
import { GatewayModule } from './gateway.module';
import { clientErrorHandler, frameworkErrors, installRequestChecks } from './http/request-checks';

/** Spec section 8: request bodies up to 10 MB. */
export const BODY_LIMIT_BYTES = 10 * 1024 * 1024;

export async function createGatewayApp(runtime: Runtime, { logger = true } = {}): Promise<NestFastifyApplication> {
  const { trustProxy } = runtime.config;
  const adapter = new FastifyAdapter({ bodyLimit: BODY_LIMIT_BYTES, trustProxy: trustProxy.length > 0 ? trustProxy : false, clientErrorHandler, frameworkErrors });
  installRequestChecks(adapter.getInstance());
  const app = await NestFactory.create<NestFastifyApplication>(GatewayModule.forRoot(runtime), adapter, {
    // Route mapping at start is Nest's 'log' level: noise in production logs.
    logger: logger ? ['error', 'warn'] : false,
  });
  await app.init();
  return app;
}
