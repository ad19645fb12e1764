import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import type { Client } from 'pg';
import { JOBS_TABLE } from '@svc/jobs';
import { until } from './until';

const ROOT = join(__dirname, '..', '..');
const WORKER = join(ROOT, 'dist', 'apps', 'worker', 'src', 'main.js');

/**
 * A worker process (the production entry point), resolved once it says it runs; with
 * SVC_METRICS_PORT in `env`, `metricsPort` is the port it serves /metrics on.
 */
export function spawnWorker(env: NodeJS.ProcessEnv): Promise<ChildProcess & { metricsPort: number | null }> {
  const child = spawn(process.execPath, [WORKER], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker did not start:\n${output}`)), 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const running = /svc-worker running.*\n/.exec(output);
      if (running) {
        clearTimeout(timer);
        const port = /metrics on port (\d+)/.exec(running[0]);
        resolve(Object.assign(child, { metricsPort: port ? Number(port[1]) : null }));
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
  });
}

/** `env` whose DATABASE_URL names the worker's statement connections `name` in pg_stat_activity. */
export function withSessionName(env: NodeJS.ProcessEnv, name: string): NodeJS.ProcessEnv {
  const url = new URL(env.DATABASE_URL!);
  url.searchParams.set('application_name', name);
  return { ...env, DATABASE_URL: url.toString() };
}

/**
 * Ends the leases of a worker killed with kill -9 (started with `withSessionName(env, name)`)
 * as their time running out would: once none of its statements runs any more in PostgreSQL (a
 * dead client's statement still runs to its end), every job it held is free for the next
 * claim, which takes it over under a new epoch. Resolves with how many jobs it held.
 */
export async function endLeasesOf(db: Pick<Client, 'query'>, worker: ChildProcess, name: string): Promise<number> {
  if (worker.exitCode === null && worker.signalCode === null) await once(worker, 'exit');
  await until(
    `the statements of ${name} ended`,
    async () => (await db.query(`SELECT 1 FROM pg_stat_activity WHERE application_name = $1`, [name])).rows.length === 0,
    15_000,
    50,
  );
  // Each worker's lease owner starts with its pid (src/background.ts).
  const ended = await db.query(`UPDATE ${JOBS_TABLE} SET lease_until = now() WHERE owner LIKE $1 AND lease_until > now()`, [`worker-${worker.pid}-%`]);
  return ended.rowCount ?? 0;
}
