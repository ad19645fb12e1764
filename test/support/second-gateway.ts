import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { api, freshPgSchemaUrl, startGateway, UNLIMITED_TEST_KEYS, type Call } from './gateway';
import { startSideBySide } from './until';

const ROOT = join(__dirname, '..', '..');
const GATEWAY = join(ROOT, 'dist', 'apps', 'gateway', 'src', 'main.js');

/**
 * A second, separate gateway process (the production entry point) on the same PostgreSQL.
 * Like the in-process one, it uses Redis only when `extra` names it.
 */
export function spawnGateway(databaseUrl: string, adminToken: string, extra: Record<string, string> = {}): Promise<{ child: ChildProcess; url: string }> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...UNLIMITED_TEST_KEYS,
    DATABASE_URL: databaseUrl,
    PORT: '0',
    HOST: '127.0.0.1',
    SVC_ADMIN_TOKEN: adminToken,
  };
  delete env.EVENTSTORE_URL;
  delete env.REDIS_URL;
  Object.assign(env, extra);
  if (!existsSync(GATEWAY)) throw new Error('dist is missing: `npm test` builds it first (npm run build)');
  const child = spawn(process.execPath, [GATEWAY], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  return new Promise((resolve, reject) => {
    const fail = (why: string) => {
      child.kill('SIGKILL');
      reject(new Error(`second gateway ${why}:\n${output}`));
    };
    const timer = setTimeout(() => fail('did not start'), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      // The line is JSON (standard output is no terminal): the URL ends at its closing quote.
      const m = /listening on (https?:\/\/[^\s"]+)["\s]/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1] });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`second gateway exited with ${code}:\n${output}`));
    });
  });
}

export interface TwoGateways {
  /** In this process, running the projections; `.url` ends in /v1. */
  first: Awaited<ReturnType<typeof startGateway>>;
  second: { child: ChildProcess; url: string };
  /** Calls on each, from the root (paths start with /v1 or /admin). */
  one: Call;
  two: Call;
  /** The PostgreSQL URL both use (its search_path is their schema). */
  databaseUrl: string;
}

/**
 * Two gateway processes on one fresh PostgreSQL schema, started before and stopped after the
 * enclosing describe block: this process's (with projections) and a spawned production one,
 * both with `env` on top of the test defaults.
 */
export function twoGateways(schemaPrefix: string, adminToken: string, env: Record<string, string> = {}): TwoGateways {
  const both = {} as TwoGateways;
  beforeAll(async () => {
    const databaseUrl = (both.databaseUrl = await freshPgSchemaUrl(schemaPrefix));
    // The schema they both make is made under a lock.
    await startSideBySide(
      [startGateway({ DATABASE_URL: databaseUrl, SVC_ADMIN_TOKEN: adminToken, ...env }), spawnGateway(databaseUrl, adminToken, env)],
      ([first, second]) => {
        if (first) both.first = first;
        if (second) both.second = second;
      },
    );
    both.one = api(both.first.url.replace(/\/v1$/, ''));
    both.two = api(both.second.url);
  }, 60_000);
  afterAll(async () => {
    both.second?.child.removeAllListeners('exit');
    both.second?.child.kill('SIGTERM');
    await both.first?.close();
    both.first?.removeDataDir();
  });
  return both;
}
