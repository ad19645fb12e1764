/**
 * Spec 4.2 rule 6 and section 7: the order in which a chat request is tried, and what the caller
 * is told when every try failed.
 */
import type { CatalogModel, CatalogRoute } from '../../../../libs/catalog/src/catalog';
import type { TokenPrices } from '../../../../libs/ledger/src/pricing';
import { ApiError } from '../../../../libs/platform/src/errors';
import type { OpenAiCompatibleProvider } from '../../../../libs/providers/src/openai-compatible';
import { ProviderError } from '../../../../libs/providers/src/provider-error';

/** One way to answer: a model of the request through one of the providers that serve it. */
export interface Target {
  model: CatalogModel;
  route: CatalogRoute;
  provider: OpenAiCompatibleProvider;
  /** Fields this model's suffixes add to the upstream request (`:thinking`); empty otherwise. */
  fields: Record<string, unknown>;
}

/** A model of the request with the providers routing chose for it, in the order to try them. */
export interface RoutedModel {
  model: CatalogModel;
  routes: readonly CatalogRoute[];
  fields: Record<string, unknown>;
}

export interface Failure {
  target: Target;
  error: ProviderError;
}

/**
 * The routed providers of the primary model, then those of each fallback model. A provider
 * missing from the runtime is a configuration error, found here, before any hold.
 */
export function targetsOf(models: readonly RoutedModel[], providers: ReadonlyMap<string, OpenAiCompatibleProvider>): Target[] {
  return models.flatMap(({ model, routes, fields }) =>
    routes.map((route) => {
      const provider = providers.get(route.provider.name);
      if (!provider) throw ApiError.internal(`provider ${route.provider.name} is not configured`);
      return { model, route, provider, fields };
    }),
  );
}

/**
 * What a request answered by `target` costs per token: the prices of the provider that
 * answered (spec 4.2 rule 10; the model's own when the catalog gives the provider none). The
 * hold and the charge both come from here.
 */
export function pricesOf(target: Target): TokenPrices {
  return target.route.prices;
}

/**
 * Only a provider-side failure (outage, overload, timeout, 5xx, 429, cut connection) is worth
 * another provider or model; a request the provider refused (400-class) would be refused again.
 */
export function worthAnotherTry(error: unknown): error is ProviderError {
  return error instanceof ProviderError && error.retryable;
}

/**
 * The answer once every target failed provider-side. With one model the provider's own failure
 * is the answer (503 when the model is unavailable, 504 on timeout); when fallback models were
 * tried too, spec 7 says 502 `api_error`, or 504 when the last one timed out.
 */
export function allFailed(failures: readonly Failure[]): unknown {
  const last = failures[failures.length - 1];
  const models = new Set(failures.map((f) => f.target.model.id));
  if (models.size === 1) return last.error;
  const tried = failures.map((f) => `${f.target.model.id} via ${f.target.route.provider.name} (${describe(f.error)})`).join(', ');
  return last.error.kind === 'timeout'
    ? new ApiError(504, 'api_error', `Every model tried timed out or failed: ${tried}. Safe to retry.`, 'upstream_timeout')
    : new ApiError(502, 'api_error', `Every model tried failed: ${tried}. Safe to retry.`, 'upstream_error');
}

function describe(error: ProviderError): string {
  return error.kind === 'http' ? `HTTP ${error.status}` : error.kind;
}
