import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Runtime } from '../../../src/runtime';
import { GatewayModule } from './gateway.module';

/** Spec section 8: request bodies up to 10 MB. */
export const BODY_LIMIT_BYTES = 10 * 1024 * 1024;

export async function createGatewayApp(runtime: Runtime, { logger = true } = {}): Promise<NestFastifyApplication> {
  const adapter = new FastifyAdapter({ bodyLimit: BODY_LIMIT_BYTES, trustProxy: true });
  const app = await NestFactory.create<NestFastifyApplication>(GatewayModule.forRoot(runtime), adapter, {
    logger: logger ? ['error', 'warn', 'log'] : false,
  });
  await app.init();
  return app;
}
