/**
 * Model deprecation (spec 9), as pure functions of the catalog and a given instant.
 *
 * A deprecation is in effect from its `announced` instant (or as soon as the catalog carries
 * it) until its `sunset`: the model still answers, marked deprecated, with notice headers.
 * From the sunset on the model is retired: its replacement answers instead, or 410.
 */
import { DomainError } from '@svc/platform';
import type { Catalog, CatalogModel, Deprecation, ModelType } from './catalog';

/** The second notice goes out this long before the sunset (spec 9: "a week before"). */
export const FINAL_NOTICE_MS = 7 * 24 * 60 * 60 * 1000;

/** The deprecation the public may see at `now`: announced (or without an announcement date), else null. */
export function deprecationAt(model: CatalogModel, now: Date): Deprecation | null {
  const d = model.deprecation;
  return d !== null && (d.announced === null || d.announced <= now) ? d : null;
}

/** Past its sunset: the model itself no longer answers. */
export function isRetired(model: CatalogModel, now: Date): boolean {
  return model.deprecation !== null && model.deprecation.sunset <= now;
}

/**
 * Notice headers of a response from `model` at `now`, lower-case names, empty when none apply.
 * `Deprecation` (RFC 9745) carries when the deprecation took effect, i.e. the announcement;
 * without an announcement date it carries the sunset, so it never precedes `Sunset` (RFC 8594,
 * an HTTP date), as RFC 9745 section 4 asks.
 */
export function deprecationHeaders(model: CatalogModel, now: Date): Record<string, string> {
  const d = deprecationAt(model, now);
  if (d === null || d.sunset <= now) return {};
  return {
    deprecation: `@${Math.floor((d.announced ?? d.sunset).getTime() / 1000)}`,
    sunset: d.sunset.toUTCString(),
    ...(d.replacement !== null ? { 'x-svc-model-replacement': d.replacement } : {}),
  };
}

export interface ResolvedModel {
  /** The model that answers: the one asked for, or after its sunset the end of its replacement chain. */
  model: CatalogModel;
  /** The id asked for when a replacement answers; null when the model itself does. */
  redirectedFrom: string | null;
  /** To set on the response: the answering model's notices, and `x-svc-model-redirected-from`. */
  headers: Record<string, string>;
}

export interface ResolveOptions {
  /**
   * The key's `allowed_models` (null or absent: any). A model outside it answers 404 like an
   * unknown one; a redirect to one is refused with 410 naming it, so a key never reaches a
   * model its owner did not allow.
   */
  allowedModels?: readonly string[] | null;
  /** The endpoint's model type ('chat' for chat completions): a model of another type is unknown (404). */
  type?: ModelType;
}

/** Spec 7 (404 row): a model the key may not use answers like a model that does not exist. */
export function modelNotFound(id: string): DomainError {
  return DomainError.notFound(
    `The model '${id}' does not exist or this key may not use it. GET /v1/models lists the models you can use.`,
    'model_not_found',
    'model',
  );
}

/**
 * Which model answers a request for `id` at `now` (spec 9). Throws `model_not_found` (404) for
 * an unknown (or not allowed, or other-type) model, and a domain error of kind `retired`
 * (`model_retired`, 410) when the model is past its sunset and no replacement can answer.
 */
export function resolveModel(catalog: Catalog, id: string, now: Date, options: ResolveOptions = {}): ResolvedModel {
  const allowed = (m: CatalogModel) => !options.allowedModels || options.allowedModels.includes(m.id);
  const usable = (m: CatalogModel) => (options.type === undefined || m.type === options.type) && allowed(m);
  const requested = catalog.get(id);
  if (requested === undefined || !allowed(requested)) throw modelNotFound(id);
  // Issue 15.5: a model that exists, on the wrong endpoint, is the caller's mix-up, not a missing model.
  if (!usable(requested)) throw wrongModelType(requested, options.type!);

  let model = requested;
  const visited = new Set([model.id]);
  while (isRetired(model, now)) {
    const next = model.deprecation!.replacement;
    const replacement = next === null ? undefined : catalog.get(next);
    if (next === null || replacement === undefined) throw modelRetired(requested, model, 'has no replacement');
    // parseCatalog refuses loops, but a Catalog can be built without it: never spin.
    if (visited.has(next)) throw modelRetired(requested, model, `loops back to '${next}'`);
    if (!usable(replacement)) throw modelRetired(requested, model, `is replaced by '${next}', which this key may not use`);
    visited.add(next);
    model = replacement;
  }
  const redirectedFrom = model === requested ? null : id;
  const headers = deprecationHeaders(model, now);
  if (redirectedFrom !== null) headers['x-svc-model-redirected-from'] = redirectedFrom;
  return { model, redirectedFrom, headers };
}

const ENDPOINT_OF_TYPE: Partial<Record<string, string>> = { chat: '/v1/chat/completions', embedding: '/v1/embeddings' };

function wrongModelType(model: CatalogModel, wanted: string): DomainError {
  const endpoint = ENDPOINT_OF_TYPE[model.type];
  return DomainError.invalid(
    `The model '${model.id}' is a ${model.type} model; this endpoint takes ${wanted} models${endpoint ? ` (use ${endpoint} for '${model.id}')` : ''}. GET /v1/models?type=${wanted} lists them.`,
    'model',
    'model_type_mismatch',
  );
}

function modelRetired(requested: CatalogModel, last: CatalogModel, why: string): DomainError {
  const retiredOn = (m: CatalogModel) => m.deprecation!.sunset.toISOString();
  const successor = last === requested ? '' : `; its successor '${last.id}' was retired on ${retiredOn(last)}`;
  const message =
    `The model '${requested.id}' was retired on ${retiredOn(requested)}${successor} and ${why}. ` +
    'Use another model: GET /v1/models lists the models this key can use.';
  return new DomainError('model_retired', message, { param: 'model' }, 'retired');
}

/** A `model.deprecated` notice (spec 6.1, 9) that is due. */
export interface DeprecationNotice {
  /**
   * Stable for a model, kind and sunset: an emitter records each id once. A moved sunset
   * makes new ids, so the changed date is announced again.
   */
  id: string;
  /** `announced`: at once; `final`: one week before the sunset. */
  kind: 'announced' | 'final';
  model: string;
  name: string;
  sunset: Date;
  replacement: string | null;
}

/**
 * The notices due at `now`, for a later emitter of `model.deprecated` webhooks (it decides
 * which accounts used the model and keeps which ids it sent). A notice stays due until the
 * sunset, so an emitter that was down catches up. When the announcement itself falls within
 * the last week, it is the only notice.
 */
export function deprecationNoticesDue(catalog: Catalog, now: Date): DeprecationNotice[] {
  const notices: DeprecationNotice[] = [];
  for (const model of catalog.models) {
    const d = deprecationAt(model, now);
    if (d === null || d.sunset <= now) continue;
    const notice = (kind: DeprecationNotice['kind']): DeprecationNotice => ({
      id: `model.deprecated:${model.id}:${kind}:${d.sunset.toISOString()}`,
      kind,
      model: model.id,
      name: model.name,
      sunset: d.sunset,
      replacement: d.replacement,
    });
    notices.push(notice('announced'));
    const finalAt = d.sunset.getTime() - FINAL_NOTICE_MS;
    if (now.getTime() >= finalAt && !(d.announced !== null && d.announced.getTime() >= finalAt)) notices.push(notice('final'));
  }
  return notices;
}
