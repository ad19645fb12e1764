/**
 * Bodies of POST and PATCH /v1/presets (spec 4.18, 2.5), parsed by hand: the config nests, and
 * an error must name the nested field (`config.models[1]`). Models are checked against the
 * catalog here, since the catalog is not domain state.
 */
import type { Catalog } from '@svc/catalog';
import { SUFFIXES } from '@svc/catalog';
import { DomainError, jsonObjectOf } from '@svc/platform';
import { PRESET_SLUG, type PresetConfig } from './preset';

export interface PresetRequest {
  slug: string;
  name?: string | null;
  description?: string | null;
  config?: PresetConfig;
}

const CONFIG_FIELDS = ['model', 'models', 'system_prompt', 'params', 'provider', 'reasoning', 'plugins', 'tools', 'cache'] as const;
/** Spec 8: the fallbacks of a request are up to 2 models. */
const MAX_FALLBACKS = 2;
/** Spec 8: response cache TTL 1 to 86400 s. */
const MAX_TTL_SECONDS = 86_400;

const bad = (param: string, message: string) => DomainError.invalid(message, param);

function text(value: unknown, param: string, max: number): string | null | undefined {
  if (value === undefined || value === null) return value as null | undefined;
  if (typeof value !== 'string' || value.length > max) throw bad(param, `'${param}' must be a string of at most ${max} characters.`);
  return value;
}

function objects(value: unknown, param: string): Record<string, unknown>[] {
  if (!Array.isArray(value)) throw bad(param, `'${param}' must be an array of objects.`);
  return value.map((v, i) => jsonObjectOf(v, `${param}[${i}]`));
}

/** A model of the catalog, with optional routing suffixes (`:nitro`...), as `model` takes it. */
function model(value: unknown, param: string, catalog: Pick<Catalog, 'get'>): string {
  if (typeof value !== 'string' || value.length === 0) throw bad(param, `'${param}' must be a model id.`);
  const [id, ...suffixes] = value.split(':');
  if (!catalog.get(id) || suffixes.some((s) => !(SUFFIXES as readonly string[]).includes(s)))
    throw bad(param, `'${param}': no model '${value}' in the catalog (see GET /v1/models).`);
  return value;
}

export function parsePresetConfig(value: unknown, catalog: Pick<Catalog, 'get'>): PresetConfig {
  const c = jsonObjectOf(value, 'config', CONFIG_FIELDS);
  const config: PresetConfig = {};
  if (c.model !== undefined) config.model = model(c.model, 'config.model', catalog);
  if (c.models !== undefined) {
    if (!Array.isArray(c.models) || c.models.length > MAX_FALLBACKS)
      throw bad('config.models', `'config.models' must be an array of at most ${MAX_FALLBACKS} model ids.`);
    config.models = c.models.map((m, i) => model(m, `config.models[${i}]`, catalog));
  }
  if (c.system_prompt !== undefined) config.system_prompt = text(c.system_prompt, 'config.system_prompt', 100_000) ?? undefined;
  for (const field of ['params', 'provider', 'reasoning'] as const) if (c[field] !== undefined) config[field] = jsonObjectOf(c[field], `config.${field}`);
  for (const field of ['plugins', 'tools'] as const) if (c[field] !== undefined) config[field] = objects(c[field], `config.${field}`);
  if (c.cache !== undefined) {
    const cache = jsonObjectOf(c.cache, 'config.cache', ['enabled', 'ttl_seconds']);
    if (cache.enabled !== undefined && typeof cache.enabled !== 'boolean') throw bad('config.cache.enabled', "'config.cache.enabled' must be a boolean.");
    const ttl = cache.ttl_seconds;
    if (ttl !== undefined && (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < 1 || ttl > MAX_TTL_SECONDS)) {
      throw bad('config.cache.ttl_seconds', `'config.cache.ttl_seconds' must be an integer from 1 to ${MAX_TTL_SECONDS}.`);
    }
    config.cache = { ...(cache.enabled !== undefined && { enabled: cache.enabled as boolean }), ...(ttl !== undefined && { ttl_seconds: ttl as number }) };
  }
  return config;
}

/** POST /v1/presets, and PATCH with its required `slug` equal to the path's (spec 4.18: the same body). */
export function parsePresetRequest(body: unknown, catalog: Pick<Catalog, 'get'>, pathSlug?: string): PresetRequest {
  const root = jsonObjectOf(body, '', ['slug', 'name', 'description', 'config']);
  if (typeof root.slug !== 'string' || !PRESET_SLUG.test(root.slug)) {
    throw bad('slug', "'slug' is required: 1 to 64 lower-case letters, digits and hyphens, starting with a letter or digit.");
  }
  if (pathSlug !== undefined && root.slug !== pathSlug) throw bad('slug', `'slug' must be the preset's own ('${pathSlug}'); a preset cannot be renamed.`);
  return {
    slug: root.slug,
    name: text(root.name, 'name', 200),
    description: text(root.description, 'description', 2000),
    ...(root.config !== undefined && { config: parsePresetConfig(root.config, catalog) }),
  };
}
