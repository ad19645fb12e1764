/**
 * Spec 4.2 rule 6: trying a billed call's targets in order (fallback models, their providers,
 * the account's own keys) until one answers, each try timed and traced (issue 22).
 */
import { ProviderError } from '@svc/providers';
import { byokKeyRejected } from './byok';
import { providerName } from './charges';
import { upstreamAttributes } from './spans';
import type { MeteringDeps } from './metering-deps';
import { allFailed, type Failure, type Target, worthAnotherTry } from './targets';

/** How trying a call's targets went: the first answer, or the failure to report (`cause` is the last provider's own error). */
export type Tried<T> = { answered: true; target: Target; value: T } | { answered: false; target: Target; cause: unknown; error: unknown; errorCode?: string };

/** What trying targets reports to: the process's metrics, its tracing and its log. */
export type AttemptDeps = Pick<MeteringDeps, 'observer' | 'tracing' | 'warn'>;

/**
 * Spec 4.2 rule 6: each target in turn until one answers. Only a provider-side failure moves
 * on; a refusal of the request, or of the account's own key (spec 7: not retried on the
 * operator's key at full price), ends the search, as does the last failure.
 */
export async function firstAnswer<T>(deps: AttemptDeps, id: string, targets: readonly Target[], call: (target: Target) => Promise<T>): Promise<Tried<T>> {
  const failures: Failure[] = [];
  const { observer, tracing } = deps;
  for (const [i, target] of targets.entries()) {
    // The one place providers are called: each try timed, by provider and operation (the model's type).
    const started = performance.now();
    try {
      const value = await (tracing
        ? tracing.upstream(`upstream ${providerName(target)}`, upstreamAttributes(id, target, i + 1), () => call(target))
        : call(target));
      observer?.upstreamAnswered(id, providerName(target), target.model.type, (performance.now() - started) / 1000);
      return { answered: true, target, value };
    } catch (err) {
      observer?.upstreamFailed(id, providerName(target), target.model.type, (performance.now() - started) / 1000, err);
      if (worthAnotherTry(err)) {
        failures.push({ target, error: err });
        deps.warn(`${id}: ${target.model.id} via ${target.route.provider.name} failed (${err.message}); trying the next`);
        continue;
      }
      if (target.byok && err instanceof ProviderError && err.kind === 'http' && (err.status === 401 || err.status === 403)) {
        return { answered: false, target, cause: err, error: byokKeyRejected(err, target.route.provider.name), errorCode: 'byok_key_rejected' };
      }
      return { answered: false, target, cause: err, error: err };
    }
  }
  const last = failures[failures.length - 1];
  return { answered: false, target: last.target, cause: last.error, error: allFailed(failures) };
}
