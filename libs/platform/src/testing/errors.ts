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

/** `errorOf` for a promise: the error object the edge answers for what `promise` rejects with. */
export async function rejectionOf(promise: Promise<unknown>): Promise<ApiError> {
  const thrown = await promise.then(
    () => null,
    (err: unknown) => err,
  );
  const refusal = refusalOf(thrown);
  if (refusal === null) throw new Error(`expected an ApiError or a DomainError, got ${String(thrown)}`);
  return refusal;
}
