import { ApiError, refusalOf } from '../errors';

/**
 * The error object the edge answers for what `fn` throws (an ApiError, or a DomainError mapped
 * by its kind); fails the test when nothing, or something else, is thrown.
 */
export function errorOf(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    const refusal = refusalOf(err);
    expect(refusal).toBeInstanceOf(ApiError);
    return refusal as ApiError;
  }
  throw new Error('expected an ApiError or a DomainError');
}
