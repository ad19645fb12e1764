/**
 * Which models may answer a request, and through which providers, decided once per request
 * (spec 1 suffixes, spec 4.2 `models` and `provider`, spec 9 retirements): the rules, the
 * capability checks and the hold all read the same plan.
 */
import { DomainError, renamingParam } from '@svc/platform';
import type { Catalog, CatalogModel, CatalogRoute, ModelType } from './catalog';
import { resolveModel } from './deprecation';
import type { ProviderStatsView } from './provider-stats';
import { parseModelId, parseProviderPreferences, requestParameters, routeTargetsWithin, suffixFields, type RoutingAccess } from './routing';

/** A model of the request with the providers routing chose for it, in the order to try them. */
export interface PlannedModel {
  model: CatalogModel;
  routes: readonly CatalogRoute[];
  /** Fields this model's suffixes add to the upstream request (`:thinking`); empty otherwise. */
  fields: Record<string, unknown>;
}

export interface ModelPlan {
  /** The primary model, then each fallback that has a provider left. */
  models: PlannedModel[];
  /** Headers of the requested model (deprecation notices, redirect, spec 9). */
  headers: Record<string, string>;
}

/** The parts of a request body that decide its models: their ids, the fallbacks, routing preferences, and the fields given. */
export interface PlanRequest {
  model: string;
  models?: readonly string[];
  provider?: unknown;
}

export interface PlanContext {
  now: Date;
  /** The key's `allowed_models` (null or absent: any). */
  allowedModels?: readonly string[] | null;
  type: ModelType;
  stats: ProviderStatsView;
  /** Issue 44: what the caller's guardrails allow; absent or null when none narrows anything. */
  access?: RoutingAccess | null;
}

/**
 * The primary model, then the fallbacks of `models` (spec 4.2 rule 6), each known, allowed and
 * not retired (spec 9: a retired model answers through its replacement, or 410), with its
 * suffixes (spec 1) and the providers that `provider` (spec 4.2) leaves, in routing order.
 * The primary must have a matching provider (404 otherwise); a fallback model without one is
 * left out, since it could not answer under the caller's constraints anyway. `request` is the
 * whole body: its fields decide `require_parameters` and `:thinking`.
 */
export function planModels(catalog: Catalog, request: PlanRequest, context: PlanContext): ModelPlan {
  const body = request as unknown as Record<string, unknown>;
  const preferences = parseProviderPreferences(request.provider);
  const parameters = requestParameters(body);
  const route = (requested: string, primary: boolean) => {
    const { id, suffixes } = parseModelId(requested);
    const resolved = resolveModel(catalog, id, context.now, { allowedModels: context.allowedModels, type: context.type });
    const fields = suffixFields(resolved.model, suffixes, body);
    let routes: readonly CatalogRoute[];
    try {
      routes = routeTargetsWithin(resolved.model, { preferences, suffixes, parameters }, context.stats, context.access);
    } catch (err) {
      // A fallback the guardrails leave no endpoint of is left out, as one the preferences leave none of.
      if (primary || !(err instanceof DomainError && (err.code === 'no_provider_available' || err.code === 'no_endpoint_allowed'))) throw err;
      routes = [];
    }
    return { planned: { model: resolved.model, routes, fields }, headers: resolved.headers };
  };
  const primary = route(request.model, true);
  const models = [primary.planned];
  (request.models ?? []).forEach((id, i) => {
    let planned: PlannedModel;
    try {
      planned = route(id, false).planned;
    } catch (err) {
      // The same answer as for `model`, naming the entry of `models` at fault.
      throw renamingParam(err, 'model', `models[${i}]`);
    }
    // Naming a model twice would only try the same providers again.
    if (planned.routes.length > 0 && !models.some((m) => m.model === planned.model)) models.push(planned);
  });
  return { models, headers: primary.headers };
}

/**
 * The model a call of `type` that names none gets: the catalog's first of that type the key
 * may use (moderation; search without an engine, spec 4.14).
 */
export function defaultModelOf(catalog: Catalog, type: ModelType, allowedModels?: readonly string[] | null): string {
  const model = catalog.models.find((m) => m.type === type && (!allowedModels || allowedModels.includes(m.id)));
  if (!model) throw DomainError.notFound(`No ${type} model is available to this key; name one in model.`, 'model_not_found', 'model');
  return model.id;
}
