/**
 * Provider routing (spec 4.2, the `provider` field and rule 10) and model-id suffixes (spec 1),
 * as pure functions of the catalog, the request and the measured provider speeds.
 *
 * Order of operations: filters (`only`, `ignore`, `quantizations`, `data_collection`, `zdr`,
 * `require_parameters`, `:exacto`), then the sort (`sort`, or a suffix's; catalog order when
 * none), then `order` moves the providers it names to the front, then `allow_fallbacks: false`
 * keeps the first. An explicit `order` wins over any sort: it is the caller naming providers.
 */
import { DomainError } from '@svc/platform';
import { isRecord } from '@svc/providers';
import { QUANTIZATIONS, type CatalogModel, type CatalogRoute, type Quantization } from './catalog';
import { modelNotFound } from './deprecation';
import type { ProviderStatsView } from './provider-stats';

export const SORTS = ['price', 'throughput', 'latency'] as const;
export type Sort = (typeof SORTS)[number];
export const SUFFIXES = ['nitro', 'floor', 'exacto', 'thinking', 'online'] as const;
export type Suffix = (typeof SUFFIXES)[number];

export interface ProviderPreferences {
  order?: string[];
  only?: string[];
  ignore?: string[];
  /** Default true: the other providers of the model are tried when one fails. */
  allow_fallbacks?: boolean;
  sort?: Sort;
  require_parameters?: boolean;
  data_collection?: 'allow' | 'deny';
  quantizations?: Quantization[];
  zdr?: boolean;
}

/** Request fields that only work where the route supports tool calls. */
const TOOL_PARAMETERS = ['tools', 'tool_choice', 'parallel_tool_calls'];
/** Effort `:thinking` asks for when the request does not say. */
const THINKING_REASONING = { effort: 'medium' } as const;

/** Splits `vendor/model:nitro:thinking` into the catalog id and its suffixes. */
export function parseModelId(requested: string): { id: string; suffixes: Suffix[] } {
  const [id, ...rest] = requested.split(':');
  const suffixes: Suffix[] = [];
  for (const s of rest) {
    // An unknown suffix names no model we have: the same 404 as an unknown model.
    if (!(SUFFIXES as readonly string[]).includes(s)) throw modelNotFound(requested);
    if (!suffixes.includes(s as Suffix)) suffixes.push(s as Suffix);
  }
  const sorting = suffixes.filter((s) => s === 'nitro' || s === 'floor');
  if (sorting.length > 1) throw DomainError.invalid(`:nitro and :floor ask for opposite orders; use one of them.`, 'model');
  return { id, suffixes };
}

const PREFERENCE_FIELDS = ['order', 'only', 'ignore', 'allow_fallbacks', 'sort', 'require_parameters', 'data_collection', 'quantizations', 'zdr'];

/**
 * Checks the request's `provider` object. Unknown members are refused rather than ignored: a
 * misspelt `sort` or an unsupported `max_price` silently dropped would route somewhere the
 * caller excluded.
 */
export function parseProviderPreferences(value: unknown): ProviderPreferences {
  if (value === undefined || value === null) return {};
  const bad = (field: string | null, what: string): never => {
    throw DomainError.invalid(`${field === null ? 'provider' : `provider.${field}`} ${what}.`, field === null ? 'provider' : `provider.${field}`);
  };
  if (!isRecord(value)) return bad(null, 'must be an object');
  for (const key of Object.keys(value)) {
    if (!PREFERENCE_FIELDS.includes(key)) bad(key, `is not a known member (known: ${PREFERENCE_FIELDS.join(', ')})`);
  }
  const names = (field: string) => {
    const v = value[field];
    if (v === undefined) return undefined;
    return Array.isArray(v) && v.every((x) => typeof x === 'string' && x !== '') ? (v as string[]) : bad(field, 'must be an array of provider names');
  };
  const flag = (field: string) => {
    const v = value[field];
    return v === undefined || typeof v === 'boolean' ? v : bad(field, 'must be a boolean');
  };
  const oneOf = <T extends string>(field: string, allowed: readonly T[]) => {
    const v = value[field];
    return v === undefined || allowed.includes(v as T) ? (v as T | undefined) : bad(field, `must be one of ${allowed.join(', ')}`);
  };
  const quantizations = value.quantizations;
  if (quantizations !== undefined && !(Array.isArray(quantizations) && quantizations.every((q) => QUANTIZATIONS.includes(q as Quantization)))) {
    bad('quantizations', `must be an array of ${QUANTIZATIONS.join(', ')}`);
  }
  const prefs: ProviderPreferences = {
    order: names('order'),
    only: names('only'),
    ignore: names('ignore'),
    allow_fallbacks: flag('allow_fallbacks'),
    sort: oneOf('sort', SORTS),
    require_parameters: flag('require_parameters'),
    data_collection: oneOf('data_collection', ['allow', 'deny'] as const),
    quantizations: quantizations as Quantization[] | undefined,
    zdr: flag('zdr'),
  };
  return Object.fromEntries(Object.entries(prefs).filter(([, v]) => v !== undefined)) as ProviderPreferences;
}

export interface RoutingRequest {
  preferences: ProviderPreferences;
  suffixes: readonly Suffix[];
  /** Names of the request fields that were given (non-null), for `require_parameters`. */
  parameters: readonly string[];
}

/**
 * The routes of `model` to try, in order. Throws 404 `no_provider_available` when the
 * preferences leave none: answering from a provider the caller excluded is never an option.
 */
export function routeTargets(model: CatalogModel, request: RoutingRequest, stats: ProviderStatsView): CatalogRoute[] {
  const p = request.preferences;
  const exacto = request.suffixes.includes('exacto');
  // Per-route support is only known for tool calls; every other supported parameter is the model's, so every route has it.
  const needsTools =
    (p.require_parameters === true || exacto) && request.parameters.some((name) => TOOL_PARAMETERS.includes(name) && model.supportedParameters.includes(name));

  let routes = model.providers.filter(
    (r) =>
      (p.only === undefined || p.only.includes(r.provider.name)) &&
      !(p.ignore ?? []).includes(r.provider.name) &&
      (p.quantizations === undefined || p.quantizations.includes(r.quantization)) &&
      (p.data_collection !== 'deny' || r.dataCollection === 'deny') &&
      (p.zdr !== true || r.zdr) &&
      (!needsTools || r.tools) &&
      // :exacto asks for the best tool calling: only routes where tool calls work at all.
      (!exacto || r.tools),
  );

  const sort = p.sort ?? suffixSort(request.suffixes);
  if (sort !== undefined) routes = sortRoutes(routes, sort, model.id, stats);
  if (p.order !== undefined) {
    const rank = (r: CatalogRoute) => {
      const i = p.order!.indexOf(r.provider.name);
      return i === -1 ? p.order!.length : i;
    };
    routes = [...routes].sort((a, b) => rank(a) - rank(b)); // stable: the rest keep their order
  }
  if (p.allow_fallbacks === false) routes = routes.slice(0, 1);

  if (routes.length === 0) {
    const why = Object.keys(p).length > 0 ? 'the provider preferences' : `the suffix :${request.suffixes.join(':')}`;
    throw DomainError.notFound(
      `No provider of ${model.id} matches ${why}. GET /v1/models/${model.id} lists its providers.`,
      'no_provider_available',
      Object.keys(p).length > 0 ? 'provider' : 'model',
    );
  }
  return routes;
}

/**
 * Issue 44: what the caller's guardrails allow, as routing applies it. Built from the
 * guardrails that apply to the key (`@svc/guardrails`' accessPolicyOf); the catalog only asks.
 */
export interface RoutingAccess {
  /** The refusal (403 `model_not_allowed`) when a guardrail keeps this catalog model from the caller, or null. */
  refuseModel(modelId: string): Error | null;
  /** The request's preferences with the guardrails' rules added: never wider than the request's own. */
  narrow(preferences: ProviderPreferences): ProviderPreferences;
  /** The refusal (403 `no_endpoint_allowed`) when only the guardrails leave no route. */
  noEndpoint(modelId: string): Error;
}

/**
 * routeTargets under the caller's guardrails. When the request's own preferences leave routes
 * and only the guardrails' narrowing removes them all, the answer names the guardrails (403),
 * not the request's preferences (404 `no_provider_available`, which stays the answer when the
 * request's own preferences already leave none).
 */
export function routeTargetsWithin(
  model: CatalogModel,
  request: RoutingRequest,
  stats: ProviderStatsView,
  access: RoutingAccess | null | undefined,
): CatalogRoute[] {
  if (!access) return routeTargets(model, request, stats);
  const refusal = access.refuseModel(model.id);
  if (refusal) throw refusal;
  try {
    return routeTargets(model, { ...request, preferences: access.narrow(request.preferences) }, stats);
  } catch (err) {
    if (!(err instanceof DomainError && err.code === 'no_provider_available')) throw err;
    routeTargets(model, request, stats);
    throw access.noEndpoint(model.id);
  }
}

/** `:nitro` is the fastest provider, `:floor` and `:exacto` (among tool-capable routes) the cheapest first. */
function suffixSort(suffixes: readonly Suffix[]): Sort | undefined {
  if (suffixes.includes('nitro')) return 'throughput';
  if (suffixes.includes('floor') || suffixes.includes('exacto')) return 'price';
  return undefined;
}

/**
 * Stable sort. Price: input plus output list price of the route. Throughput (highest first) and
 * latency (lowest first) come from the measured figures; routes not measured yet go after the
 * measured ones, in catalog order: an unknown provider is not assumed to be fast.
 */
function sortRoutes(routes: CatalogRoute[], sort: Sort, modelId: string, stats: ProviderStatsView): CatalogRoute[] {
  if (sort === 'price') {
    const price = (r: CatalogRoute) => r.prices.inputPerM + r.prices.outputPerM;
    return [...routes].sort((a, b) => (price(a) < price(b) ? -1 : price(a) > price(b) ? 1 : 0));
  }
  // Lower is better for both keys; latency uses time to first token when streams measured it.
  const key = (r: CatalogRoute): number | null => {
    const f = stats.figures(modelId, r.provider.name);
    if (f === undefined) return null;
    if (sort === 'throughput') return f.tokensPerSecond === null ? null : -f.tokensPerSecond;
    return f.ttftMs ?? f.latencyMs;
  };
  return [...routes].sort((a, b) => {
    const ka = key(a);
    const kb = key(b);
    if (ka === null || kb === null) return ka === kb ? 0 : ka === null ? 1 : -1;
    return ka - kb;
  });
}

/**
 * Fields the suffixes add to the upstream request. `:thinking` turns reasoning on, unless the
 * request already says how (`reasoning` or `reasoning_effort`); a model that cannot reason is a
 * 400 rather than a silent answer without it.
 */
export function suffixFields(model: CatalogModel, suffixes: readonly Suffix[], request: Record<string, unknown>): Record<string, unknown> {
  if (!suffixes.includes('thinking')) return {};
  if (!model.supportedParameters.includes('reasoning')) {
    throw DomainError.invalid(`${model.id} does not support reasoning, so :thinking cannot turn it on.`, 'model', 'unsupported_parameter');
  }
  const given = (v: unknown) => v !== undefined && v !== null;
  return given(request.reasoning) || given(request.reasoning_effort) ? {} : { reasoning: { ...THINKING_REASONING } };
}

/** The request fields given, for `require_parameters`. */
export function requestParameters(request: Record<string, unknown>): string[] {
  return Object.keys(request).filter(
    (k) => request[k] !== undefined && request[k] !== null && !(Array.isArray(request[k]) && (request[k] as unknown[]).length === 0),
  );
}
