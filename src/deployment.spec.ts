import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

const root = join(__dirname, '..');
const read = (file: string) => readFileSync(join(root, file), 'utf8');

/** The gateway's command line as `npm run start:gateway`, the image and compose each write it. */
function gatewayCommands(): Record<string, string[]> {
  const scripts = JSON.parse(read('package.json')).scripts as Record<string, string>;
  const cmd = /^CMD (\[.*\])$/m.exec(read('Dockerfile'));
  const compose = parse(read('docker-compose.yml')) as { services: { gateway: { command: string[] } } };
  return {
    'npm run start:gateway': scripts['start:gateway'].trim().split(/\s+/),
    Dockerfile: cmd ? (JSON.parse(cmd[1]) as string[]) : [],
    'docker-compose.yml': compose.services.gateway.command,
  };
}

describe('how the gateway is started in production', () => {
  // A young generation of 2 x 32 MB: a V8 limit only the command line sets (docs/BENCHMARKS.md,
  // sixth round: about a tenth less of the gateway's CPU per request under load). The bench
  // runs the flags of `start:gateway`, so every other way of starting it must say the same.
  it('runs the gateway with the same node flags everywhere, the young generation raised among them', () => {
    const commands = gatewayCommands();
    for (const argv of Object.values(commands)) {
      expect(argv[0]).toBe('node');
      expect(argv.at(-1)).toBe('dist/apps/gateway/src/main.js');
    }
    expect(commands.Dockerfile).toEqual(commands['npm run start:gateway']);
    expect(commands['docker-compose.yml']).toEqual(commands['npm run start:gateway']);
    expect(commands['npm run start:gateway']).toContain('--max-semi-space-size=32');
  });
});
