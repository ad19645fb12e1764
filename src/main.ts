import 'reflect-metadata';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { advertiseToPeers, createGatewayApp } from '../apps/gateway/src/app';
import { prettyLog, processLog, routeConsoleThrough, type Config } from '@svc/platform';
import { devAdminToken, devEncryptionKey, devKeysPath, ensureDevKeys, type DevKeys } from './dev-bootstrap';
import { boundHeapGrowth, closeOnSignals, configOrExit, runMain } from './process';
import { createRuntime, type Runtime, type RuntimeOptions } from '@svc/runtime';
import { startBackground, type Background } from './background';
import type { HoldExpirySweeper } from '@svc/ledger';

export interface Started {
  url: string;
  keys: DevKeys;
  created: boolean;
  runtime: Runtime;
  app: NestFastifyApplication;
  sweeper: HoldExpirySweeper;
  background: Background;
  close(): Promise<void>;
}

/**
 * Gateway and worker in one process on the embedded defaults: what `npm start` runs, and
 * what the end-to-end tests start.
 */
export async function startAll(given: Config, options: RuntimeOptions & { logger?: boolean } = {}): Promise<Started> {
  const config: Config = { ...given, encryptionKey: devEncryptionKey(given) };
  const adminToken = devAdminToken(config);
  const runtime = await createRuntime(config, { ...options, adminToken });
  let app: NestFastifyApplication | undefined;
  try {
    app = await createGatewayApp(runtime, { logger: options.logger ?? true });
    const background = startBackground(runtime, app);
    const { keys, created } = await ensureDevKeys(app, config, adminToken);
    await app.listen({ port: config.port, host: config.host });
    await advertiseToPeers(app, runtime);
    const address = app.getHttpServer().address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    const host = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
    const started = app;
    return {
      url: `${config.tls ? 'https' : 'http'}://${host}:${port}/v1`,
      keys,
      created,
      runtime,
      app,
      sweeper: background.sweeper,
      background,
      close: async () => {
        await started.close();
        await background.stop();
        await runtime.close();
      },
    };
  } catch (err) {
    await app?.close().catch(() => undefined);
    await runtime.close();
    throw err;
  }
}

async function main(): Promise<void> {
  const config = configOrExit();
  // At a terminal a person reads the banner, dev keys included. Otherwise (a collector, a pipe)
  // every line is a JSON log line, and the keys stay in dev-keys.json: a log holds no secret.
  const forPerson = prettyLog(config);
  const where = config.databaseUrl ? 'PostgreSQL' : `embedded PostgreSQL (PGlite) in ${config.dataDir}`;
  if (forPerson) console.log(`svc-gateway starting: ${where}...`);
  else processLog(config).info({ data_dir: config.databaseUrl ? undefined : config.dataDir }, `svc-gateway starting: ${where}...`);
  const started = await startAll(config);
  const log = started.app.getHttpAdapter().getInstance().log;
  // Issue 22: warnings and errors in the logger's format too.
  routeConsoleThrough(log);
  closeOnSignals(() => started.close(), config.shutdownGraceMs);
  const { keys } = started;
  const limits = (environment: 'live' | 'test') => {
    const l = config.rateLimits[environment];
    return `${environment} key: ${l.requests_per_minute} requests/min, ${l.concurrent_requests} at once`;
  };
  const consoleUrl = config.consoleDir !== null ? started.url.replace(/\/v1$/, '/console/') : null;
  const keysFile = devKeysPath(config.dataDir);
  if (!forPerson) {
    log.info(
      { url: started.url, console_url: consoleUrl ?? undefined, dev_keys_file: keysFile, account_id: keys.account_id, created: started.created },
      `svc-gateway is ready on ${started.url}; the dev ${started.created ? 'account ($10.00 of credits) and its keys were created in' : 'keys are in'} ${keysFile} (${limits('live')}; ${limits('test')})`,
    );
    return;
  }
  console.log(
    [
      '',
      `svc-gateway is ready on ${started.url}`,
      ...(consoleUrl !== null ? [`The console: ${consoleUrl} (sign in with the management_key below)`] : []),
      started.created ? `A dev account with $10.00 of credits was created; its keys are in ${keysFile}:` : `Dev keys (from ${keysFile}):`,
      `  account_id      ${keys.account_id}`,
      `  live_api_key    ${keys.live_api_key}   full, ${limits('live')}: use it for scripts`,
      `  api_key         ${keys.api_key}   full, ${limits('test')}`,
      `  management_key  ${keys.management_key}   manages keys (POST /v1/keys), no model calls`,
      `  admin_token     ${keys.admin_token}   the operator API under /admin`,
      '',
    ].join('\n'),
  );
}

if (require.main === module) {
  boundHeapGrowth();
  runMain(main);
}
