/**
 * Issue 15.2: a request that failed after its hold was placed (every provider failed, the
 * provider refused the account's own key) has a generation record, `failed`, with the error and
 * the provider; its error answer names it in `x-svc-generation-id`, as a success does.
 */
const failed = new WeakMap<object, string>();

export function markFailedGeneration<E>(err: E, generationId: string): E {
  if (typeof err === 'object' && err !== null) failed.set(err, generationId);
  return err;
}

export function failedGenerationOf(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null ? failed.get(err) : undefined;
}
