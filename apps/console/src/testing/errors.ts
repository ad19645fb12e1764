import { ApiFailure } from '../api';

/** The ApiFailure `run` throws, as the page would show it; anything else thrown, or nothing, fails the test. */
export function refusal(run: () => unknown): ApiFailure {
  try {
    run();
  } catch (err) {
    if (err instanceof ApiFailure) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}
