import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const ROOT = join(__dirname, '..', '..');
/** The built `npm start` entry point (gateway and worker in one process). */
export const MAIN = join(ROOT, 'dist', 'src', 'main.js');

export interface ServerProcess {
  child: ChildProcess;
  port: number;
  /** Standard output and standard error so far, as they came. */
  output: () => string;
  readyMs: number;
}

/** Every server a suite started: a failed test must not leave one running (jest would wait on it). */
const spawned: { child: ChildProcess; group: boolean }[] = [];

export function killSpawned(): void {
  for (const { child, group } of spawned) {
    try {
      if (group) process.kill(-child.pid!, 'SIGKILL');
      else child.kill('SIGKILL');
    } catch {
      // Already gone.
    }
  }
}

/**
 * The built server on the embedded defaults (no database, event store or Redis), in `dataDir`,
 * on a port of the system's choosing; resolves once it says it is ready.
 */
export function startServer(dataDir: string, { viaNpm = false, env: extra = {} }: { viaNpm?: boolean; env?: NodeJS.ProcessEnv } = {}): Promise<ServerProcess> {
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_DATA_DIR: dataDir, PORT: '0', ...extra };
  delete env.DATABASE_URL;
  delete env.EVENTSTORE_URL;
  delete env.REDIS_URL;
  const started = performance.now();
  const child = viaNpm
    ? spawn('npm', ['start'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    : spawn(process.execPath, [MAIN], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  spawned.push({ child, group: viaNpm });
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 45_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const m = /ready on http:\/\/localhost:(\d+)\/v1/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve({ child, port: Number(m[1]), output: () => output, readyMs: performance.now() - started });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`server exited with ${code}:\n${output}`)));
  });
}

/** SIGTERM, as an orchestrator stops it; resolves with its exit code. */
export function stop(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    child.removeAllListeners('exit');
    child.on('exit', (code) => resolve(code));
    child.kill('SIGTERM');
  });
}

/**
 * `npm start` and the server it runs, stopped as a terminal's Ctrl-C would (the whole process
 * group); resolves once the server itself (its pid is in the data directory) has exited.
 */
export async function stopGroup(child: ChildProcess, dataDir: string): Promise<void> {
  const server = Number(readFileSync(join(dataDir, 'svc.pid'), 'utf8'));
  child.removeAllListeners('exit');
  process.kill(-child.pid!, 'SIGTERM');
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      process.kill(server, 0);
    } catch {
      return;
    }
    if (Date.now() > deadline) throw new Error(`the server (pid ${server}) did not stop`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
