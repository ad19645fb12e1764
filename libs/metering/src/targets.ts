/**
 * Spec 4.2 rule 6 and section 7: the order in which a billed call is tried, what each target
 * charges, and what the caller is told when every try failed.
 */
import type { CatalogModel, CatalogProvider, CatalogRoute, ModelPrices, PlannedModel } from '@svc/catalog';
import { providerKeyContext } from '@svc/identity';
import { ceilDiv, DomainError, type Nano, openSecret, SecretDecryptionError } from '@svc/platform';
import { createProvider, operationOf as served, ProviderError } from '@svc/providers';
import type { CallName, Calls, Provider } from '@svc/providers';
import { byokUnavailable } from './byok';
import { costOfMeters, type MeterUsage } from './meters';

/** One way to answer: a model of the request through one of the providers that serve it. */
export interface Target {
  model: CatalogModel;
  route: CatalogRoute;
  provider: Provider;
  /** True when `provider` calls the upstream with the billed account's own key (BYOK). */
  byok: boolean;
  /** Fields this model's suffixes add to the upstream request (`:thinking`); empty otherwise. */
  fields: Record<string, unknown>;
  /** Prices of the server tools the gateway runs inside this call (web search, spec 4.2 rule 7). */
  toolPrices?: ToolPrices;
  /** A batch line's discount on the model's price, in percent (spec 1 rule 6; the catalog's `batch_discount_percent`). */
  discountPercent?: number;
}

/**
 * A target as far as its price goes: who answered, on whose key, at which discount, with no
 * client. Enough to charge a call that is long over, in a process that never called it.
 */
export type PricedTarget = Omit<Target, 'provider'>;

/**
 * What the gateway's own tools cost inside a model call: a web search at its engine's price
 * per query (spec 4.2 rule 7), billed on the same generation under the `queries` meter.
 */
export interface ToolPrices {
  perQuery: Nano;
  /** What one query costs the operator (the engine route's catalog `cost`); absent or null: unknown. */
  costPerQuery?: Nano | null;
}

/**
 * The answering provider's `name` call (ARCHITECTURE section 10: a provider declares what it
 * supports). The catalog routes a model only to adapters that serve its type, so a missing one
 * here is a wiring error, not a caller's mistake.
 */
export function operationOf<C extends CallName>(target: Target, name: C): Calls[C] {
  const call = served(target.provider, name);
  if (!call) throw DomainError.internal(`${target.route.provider.name} declares no ${name} operation`);
  return call;
}

/** A model of the request's plan (the catalog's), with the prices of the tools the gateway runs inside the call. */
export interface RoutedModel extends PlannedModel {
  toolPrices?: ToolPrices;
}

export interface Failure {
  target: Target;
  error: ProviderError;
}

/**
 * The routed providers of the primary model, then those of each fallback model. A provider
 * missing from the runtime is a configuration error, found here, before any hold. `own` gives
 * the billed account's BYOK client of a provider, which then replaces the operator's.
 */
export function targetsOf(
  models: readonly RoutedModel[],
  providers: ReadonlyMap<string, Provider>,
  own: (provider: CatalogProvider) => Provider | null = () => null,
): Target[] {
  return models.flatMap(({ model, routes, fields, toolPrices }) =>
    routes.map((route) => {
      const tools = toolPrices ? { toolPrices } : {};
      const byok = own(route.provider);
      if (byok) return { model, route, provider: byok, byok: true, fields, ...tools };
      const provider = providers.get(route.provider.name);
      if (!provider) throw DomainError.internal(`provider ${route.provider.name} is not configured`);
      return { model, route, provider, byok: false, fields, ...tools };
    }),
  );
}

/** Spec 1 rule 6: a batch line's targets, each at its model's batch discount. */
export function discounted(targets: Target[], batchLine: boolean): Target[] {
  return batchLine ? targets.map((t) => ({ ...t, discountPercent: t.model.batchDiscountPercent })) : targets;
}

/**
 * What a BYOK request is billed: `feePercent` (SVC_BYOK_FEE_PERCENT) of what the same request
 * would have cost on the operator's key, rounded up to the nano like every other charge.
 */
const byokFee = (cost: Nano, feePercent: number): Nano => ceilDiv(cost * BigInt(feePercent), 100n);

/**
 * The charge for `usage` answered by `target`: the cost at its prices, or the BYOK fee on that
 * cost. The hold uses it too, on the worst case (spec 1 rule 1): the price is monotone in every
 * meter and the fee in the cost, so the worst case's charge bounds every actual one.
 */
export function costOf(target: PricedTarget, usage: MeterUsage, byokFeePercent: number): Nano {
  if (target.toolPrices) {
    // The tools run on the operator's engines: full price, whoever's key the model used.
    const { queries, ...model } = usage;
    return costOf({ ...target, toolPrices: undefined }, model, byokFeePercent) + BigInt(queries ?? 0) * target.toolPrices.perQuery;
  }
  const listed = costOfMeters(usage, pricesOf(target));
  // Rounded up like every charge, and never above the listed price (100 - percent is at most 100).
  const cost = target.discountPercent ? ceilDiv(listed * BigInt(100 - target.discountPercent), 100n) : listed;
  return target.byok ? byokFee(cost, byokFeePercent) : cost;
}

/** Most BYOK clients kept; past it the oldest is dropped (it is rebuilt on its next use). */
const MAX_OWN_CLIENTS = 1000;

/**
 * The BYOK clients of accounts: one per account, provider and sealed key, so the key is opened
 * once, and a key saved again (a new ciphertext) gets a new client without any invalidation.
 */
export class OwnProviders {
  private readonly clients = new Map<string, Provider>();

  constructor(private readonly options: { encryptionKey: Buffer | null; simulatorUrl: string | null; timeoutMs: number }) {}

  /** `sealed`: the account's sealed keys by provider name, as the provider_keys read model has them. */
  resolver(accountId: string, sealed: ReadonlyMap<string, string>): (provider: CatalogProvider) => Provider | null {
    return (provider) => {
      const key = sealed.get(provider.name);
      if (key === undefined) return null;
      const cacheKey = `${accountId}\u0000${provider.name}\u0000${key}`;
      const cached = this.clients.get(cacheKey);
      if (cached) return cached;
      const client = createProvider(provider.adapter, {
        baseUrl: this.baseUrlOf(provider),
        apiKey: this.open(accountId, provider.name, key),
        timeoutMs: this.options.timeoutMs,
        dialect: provider.dialect,
      });
      if (this.clients.size >= MAX_OWN_CLIENTS) this.clients.delete(this.clients.keys().next().value as string);
      this.clients.set(cacheKey, client);
      return client;
    };
  }

  /**
   * A saved key that cannot be opened is refused rather than quietly replaced by the operator's
   * key: the account asked for its own provider account to be used, and billed the fee.
   */
  private open(accountId: string, provider: string, sealed: string): string {
    if (this.options.encryptionKey === null) throw byokUnavailable(`a ${provider} key is saved for this account, but this gateway has no SVC_ENCRYPTION_KEY`);
    try {
      return openSecret(this.options.encryptionKey, sealed, providerKeyContext(accountId, provider));
    } catch (err) {
      if (err instanceof SecretDecryptionError)
        throw byokUnavailable(`the ${provider} key saved for this account does not open with this gateway's SVC_ENCRYPTION_KEY; save it again`);
      throw err;
    }
  }

  /** The upstream of the route, as src/runtime.ts resolves it for the operator's clients. */
  private baseUrlOf(provider: CatalogProvider): string {
    if (provider.baseUrl !== 'simulator') return provider.baseUrl;
    if (this.options.simulatorUrl === null) throw DomainError.internal('the simulated upstream is not running');
    return this.options.simulatorUrl;
  }
}

/**
 * What a request answered by `target` costs per token: the prices of the provider that
 * answered (spec 4.2 rule 10; the model's own when the catalog gives the provider none). The
 * hold and the charge both come from here.
 */
export function pricesOf(target: PricedTarget): ModelPrices {
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
    ? new DomainError('upstream_timeout', `Every model tried timed out or failed: ${tried}. Safe to retry.`, {}, 'upstream_timeout')
    : new DomainError('upstream_error', `Every model tried failed: ${tried}. Safe to retry.`, {}, 'upstream_failed');
}

function describe(error: ProviderError): string {
  return error.kind === 'http' ? `HTTP ${error.status}` : error.kind;
}
