import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/*
 * A throwaway redis-server of a test's own, to kill and bring back mid-run: the shared server
 * of the other suites is never touched.
 */

/*
 * A port below the kernel's ephemeral range, so no outgoing connection takes it while its
 * server is down: a client redialling a dead port of that range can be given it as its own
 * local port, connect to itself (TCP simultaneous open) and keep the server from binding it
 * again. One CI run lost a Redis restart that way ("Address already in use").
 */
export async function freePort(): Promise<number> {
  const ephemeralLow = ephemeralLowPort();
  const low = Math.max(1_024, ephemeralLow - 12_000);
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = low + Math.floor(Math.random() * (ephemeralLow - low));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port between ${low} and ${ephemeralLow - 1}`);
}

/** The lowest port of the kernel's ephemeral range, from which connections take their local ports. */
function ephemeralLowPort(): number {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && low > 2_048) return low;
  } catch {
    // Not Linux: the IANA dynamic range.
  }
  return 49_152;
}

function bindable(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

export function startRedisServer(port: number): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => fail(new Error(`redis-server did not start on ${port}: ${output}`)), 5_000);
    const fail = (err: Error): void => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(err);
    };
    child.once('error', fail);
    child.once('exit', (code) => fail(new Error(`redis-server exited with ${code}: ${output}`)));
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (!output.includes('Ready to accept connections')) return;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      resolve(child);
    });
  });
}

export async function stopRedisServer(child: ChildProcess | null): Promise<void> {
  if (child === null || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}
