import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import type { TokenPrices } from '../../ledger/src/pricing';
import { usdToNano } from '../../platform/src/money';

/** A model of the catalog (spec 2.8: type, modalities, context, parameters, prices). */
export interface CatalogModel {
  id: string;
  name: string;
  type: string;
  contextLength: number;
  inputModalities: string[];
  outputModalities: string[];
  supportedParameters: string[];
  prices: TokenPrices;
  /** Tried in order. */
  providers: CatalogRoute[];
}

export interface CatalogProvider {
  name: string;
  adapter: 'openai';
  /** `simulator` resolves to the simulated upstream at start. */
  baseUrl: string;
  apiKey: string;
}

export interface CatalogRoute {
  provider: CatalogProvider;
  upstreamModel: string;
}

export class CatalogError extends Error {
  override readonly name = 'CatalogError';
}

export class Catalog {
  private readonly byId: Map<string, CatalogModel>;

  constructor(readonly models: CatalogModel[]) {
    this.byId = new Map(models.map((m) => [m.id, m]));
  }

  get(id: string): CatalogModel | undefined {
    return this.byId.get(id);
  }

  /** True when some route goes to the simulated upstream, which must then be started. */
  usesSimulator(): boolean {
    return this.models.some((m) => m.providers.some((r) => r.provider.baseUrl === 'simulator'));
  }
}

export const BUILTIN_CATALOG_PATH = join(__dirname, 'builtin-catalog.yaml');

/**
 * Reads a catalog file (YAML, or JSON which is YAML too). `env` resolves `api_key_env`.
 * Every problem is reported with its place in the file.
 */
export function loadCatalog(path: string = BUILTIN_CATALOG_PATH, env: Record<string, string | undefined> = process.env): Catalog {
  let doc: unknown;
  try {
    doc = parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new CatalogError(`${path}: ${(err as Error).message}`);
  }
  return parseCatalog(doc, path, env);
}

export function parseCatalog(doc: unknown, source: string, env: Record<string, string | undefined> = {}): Catalog {
  const fail = (where: string, what: string): never => {
    throw new CatalogError(`${source}: ${where}: ${what}`);
  };
  const obj = (v: unknown, where: string) =>
    typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : fail(where, 'expected a mapping');
  const str = (v: unknown, where: string) => (typeof v === 'string' && v.length > 0 ? v : fail(where, 'expected a non-empty string'));
  const strings = (v: unknown, where: string) =>
    Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : fail(where, 'expected a list of strings');
  const price = (v: unknown, where: string) => {
    try {
      return usdToNano(typeof v === 'number' ? v : str(v, where));
    } catch {
      return fail(where, `expected a USD price per million tokens, got ${JSON.stringify(v)}`);
    }
  };

  const root = obj(doc, 'top level');
  const providers = new Map<string, CatalogProvider>();
  for (const [name, raw] of Object.entries(obj(root.providers, 'providers'))) {
    const p = obj(raw, `providers.${name}`);
    if (p.adapter !== 'openai') fail(`providers.${name}.adapter`, 'supported adapters: openai');
    let apiKey = typeof p.api_key === 'string' ? p.api_key : '';
    if (p.api_key_env !== undefined) {
      const variable = str(p.api_key_env, `providers.${name}.api_key_env`);
      apiKey = env[variable] ?? fail(`providers.${name}.api_key_env`, `environment variable ${variable} is not set`);
    }
    providers.set(name, { name, adapter: 'openai', baseUrl: str(p.base_url, `providers.${name}.base_url`), apiKey });
  }

  if (!Array.isArray(root.models)) fail('models', 'expected a list');
  const models = (root.models as unknown[]).map((raw, i): CatalogModel => {
    const at = `models[${i}]`;
    const m = obj(raw, at);
    const pricing = obj(m.pricing, `${at}.pricing`);
    const context = m.context_length;
    if (!Number.isInteger(context) || (context as number) <= 0) fail(`${at}.context_length`, 'expected a positive integer');
    if (!Array.isArray(m.providers) || m.providers.length === 0) fail(`${at}.providers`, 'expected at least one provider');
    return {
      id: str(m.id, `${at}.id`),
      name: typeof m.name === 'string' ? m.name : str(m.id, `${at}.id`),
      type: str(m.type, `${at}.type`),
      contextLength: context as number,
      inputModalities: strings(m.input_modalities ?? ['text'], `${at}.input_modalities`),
      outputModalities: strings(m.output_modalities ?? ['text'], `${at}.output_modalities`),
      supportedParameters: strings(m.supported_parameters ?? [], `${at}.supported_parameters`),
      prices: {
        inputPerM: price(pricing.input, `${at}.pricing.input`),
        outputPerM: price(pricing.output, `${at}.pricing.output`),
        cachedInputPerM: price(pricing.cached_input ?? pricing.input, `${at}.pricing.cached_input`),
      },
      providers: (m.providers as unknown[]).map((r, j) => {
        const route = obj(r, `${at}.providers[${j}]`);
        const name = str(route.provider, `${at}.providers[${j}].provider`);
        return {
          provider: providers.get(name) ?? fail(`${at}.providers[${j}].provider`, `unknown provider ${name}`),
          upstreamModel: str(route.upstream_model, `${at}.providers[${j}].upstream_model`),
        };
      }),
    };
  });
  const seen = new Set<string>();
  for (const m of models) {
    if (seen.has(m.id)) fail('models', `duplicate id ${m.id}`);
    seen.add(m.id);
  }
  return new Catalog(models);
}
