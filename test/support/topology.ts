import { execFile, execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');

/** `scripts/topology/<name>.sh <args>`; resolves with what it printed. */
export async function topology(name: string, ...args: string[]): Promise<string> {
  return topologyWith({}, name, ...args);
}

/**
 * The same with variables of its own on top of this process's: another instance of a topology
 * (its SVC_TOPOLOGY_DIR and ports), so that a suite that kills its nodes never hits another's.
 */
export async function topologyWith(env: NodeJS.ProcessEnv, name: string, ...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(join(ROOT, 'scripts', 'topology', `${name}.sh`), args, { cwd: ROOT, timeout: 300_000, env: { ...process.env, ...env } });
    return stdout.trim();
  } catch (err) {
    // The script says on stderr why a topology did not come up: a test that fails here shows it.
    const { stderr, stdout } = err as { stderr?: string; stdout?: string };
    throw new Error(`${name}.sh ${args.join(' ')} failed: ${(err as Error).message}\n${stdout ?? ''}\n${stderr ?? ''}`.trim());
  }
}

/**
 * A suite that needs engines this machine may lack: on CI they are installed (.ci/run), so
 * their absence fails there; elsewhere the suite says what is missing and is skipped.
 */
export function describeWithEngines(commands: string[], title: string, body: () => void): void {
  const present = commands.every((c) => {
    try {
      execFileSync('sh', ['-c', `command -v ${c}`], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  });
  if (present || process.env.CI) describe(title, body);
  else describe.skip(`${title} (needs ${commands.join(', ')}: apt-get install them, as .ci/run does)`, body);
}
