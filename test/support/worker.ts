import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

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
