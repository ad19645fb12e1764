import type { ChildProcess } from 'node:child_process';
import { createWriteStream, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A directory of its own where each spawned process's output goes to a file of its own: a test
 * that kills processes under load is read afterwards from these, when it fails.
 */
export function processLogs(prefix: string): { dir: string; keep(child: ChildProcess, name: string): void } {
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  return {
    dir,
    keep(child, name) {
      const file = createWriteStream(join(dir, `${name}.log`));
      child.stdout!.on('data', (chunk: Buffer) => file.write(chunk));
      child.stderr!.on('data', (chunk: Buffer) => file.write(chunk));
    },
  };
}
