import { buildCli } from '../../src/cli';
import { freshPgSchemaUrl } from './gateway';

export interface CliHarness {
  /** The fresh schema's DATABASE_URL, set for the enclosing describe block. */
  url: string;
  /** What the last run printed with console.log, line by line. */
  output: string[];
  /** Runs `svc <args>` in this process; rejects as the command would fail. */
  run(...args: string[]): Promise<string>;
}

/**
 * The operator CLI in this process, against PostgreSQL in a schema of its own for the
 * enclosing describe block, with its console output captured.
 */
export function cliHarness(schemaPrefix: string): CliHarness {
  const saved = { ...process.env };
  let log: jest.SpyInstance | undefined;
  const harness: CliHarness = {
    url: '',
    output: [],
    async run(...args) {
      harness.output.length = 0;
      await buildCli()
        .exitOverride()
        .parseAsync(['node', 'cli', ...args]);
      return harness.output.join('\n');
    },
  };
  beforeAll(async () => {
    harness.url = await freshPgSchemaUrl(schemaPrefix);
    process.env = { ...saved, DATABASE_URL: harness.url };
    delete process.env.EVENTSTORE_URL;
    log = jest.spyOn(console, 'log').mockImplementation((...args: unknown[]) => void harness.output.push(args.join(' ')));
  });
  afterAll(() => {
    log?.mockRestore();
    process.env = saved;
  });
  return harness;
}
