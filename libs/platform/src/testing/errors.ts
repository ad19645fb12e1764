import { ApiError } from '../errors';

/** What an ApiError thrown by `fn` says; fails the test when nothing, or something else, is thrown. */
export function errorOf(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError;
  }
  throw new Error('expected an ApiError');
}
