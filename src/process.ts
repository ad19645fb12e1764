import { ConfigError, loadConfig, type Config } from '../libs/platform/src/config';
import { ApiError } from '../libs/platform/src/errors';

/** Reads the configuration, or stops the process naming the variable that is wrong. */
export function configOrExit(): Config {
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`Invalid configuration: ${err.message}`);
      process.exit(1);
    }
    throw err;
  }
}

/** Runs `close` once on SIGINT or SIGTERM, then exits. */
export function closeOnSignals(close: () => Promise<void>): void {
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await close().catch((err) => console.error(err));
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
}

export function runMain(main: () => Promise<void>): void {
  main().catch((err) => {
    // A refusal the API would answer with an error object is a message, not a crash.
    console.error(err instanceof ApiError ? `${err.type}${err.code ? ` (${err.code})` : ''}: ${err.message}` : err);
    process.exit(1);
  });
}
