/**
 * The catalog document (already parsed from YAML or JSON) -> a Catalog: the top level, the
 * providers, each model and its routes, then the checks across models (ids, replacements).
 */
import { ADAPTERS, operationsOf, servesModelType } from '@svc/providers';
import { CatalogReader } from './reader';
import { parseDeprecation, parsePrices, parseVideo, requirePricesOfType } from './sections';
import {
  Catalog,
  type CatalogModel,
  type CatalogProvider,
  type CatalogRoute,
  DIALECTS,
  MODALITIES,
  type Modality,
  type ModelPrices,
  MODEL_TYPES,
  type ModelType,
  PARAMETER_NAME,
  QUANTIZATIONS,
  type VideoCapabilities,
} from './types';

/**
 * Model ids: no `:` (it starts a suffix such as `:nitro`), no `@` (presets), nothing a URL path
 * would have to escape except `/`, so `GET /v1/models/{id}` takes the id as it is.
 */
const MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*(?:\/[A-Za-z0-9._-]+)*$/;
/** `GET /v1/models/count` is a route of its own. */
const RESERVED_IDS = ['count'];

const TOP_FIELDS = ['providers', 'models', 'batch_discount_percent'];
/** OpenAI bills its Batch API at half price; a catalog may say otherwise. */
export const DEFAULT_BATCH_DISCOUNT_PERCENT = 50;
const PROVIDER_FIELDS = ['adapter', 'dialect', 'base_url', 'api_key', 'api_key_env'];
const MODEL_FIELDS = [
  'id',
  'name',
  'type',
  'created',
  'owned_by',
  'context_length',
  'input_modalities',
  'output_modalities',
  'supported_parameters',
  'pricing',
  'deprecation',
  'uptime',
  'voices',
  'batch_discount_percent',
  'video',
  'providers',
];
const ROUTE_FIELDS = ['provider', 'upstream_model', 'pricing', 'cost', 'quantization', 'tools', 'data_collection', 'zdr'];

type Env = Record<string, string | undefined>;

export function parseCatalog(doc: unknown, source: string, env: Record<string, string | undefined> = {}): Catalog {
  const r = new CatalogReader(source);
  const root = r.fields(doc, 'top level', TOP_FIELDS);
  const batchDiscount =
    root.batch_discount_percent === undefined ? DEFAULT_BATCH_DISCOUNT_PERCENT : r.percent(root.batch_discount_percent, 'batch_discount_percent');
  const providers = parseProviders(r, root.providers, env);
  if (!Array.isArray(root.models)) r.fail('models', 'expected a list');
  const models = (root.models as unknown[]).map((raw, i) => parseModel(r, raw, `models[${i}]`, providers, batchDiscount));
  checkReplacements(r, models, indexById(r, models));
  return new Catalog(models);
}

function parseProviders(r: CatalogReader, raw: unknown, env: Env): Map<string, CatalogProvider> {
  const providers = new Map<string, CatalogProvider>();
  for (const [name, value] of Object.entries(r.obj(raw, 'providers'))) providers.set(name, parseProvider(r, name, value, env));
  return providers;
}

function parseProvider(r: CatalogReader, name: string, raw: unknown, env: Env): CatalogProvider {
  const at = `providers.${name}`;
  const p = r.fields(raw, at, PROVIDER_FIELDS);
  const adapter = r.oneOf(p.adapter, `${at}.adapter`, ADAPTERS);
  let apiKey = p.api_key === undefined ? '' : r.str(p.api_key, `${at}.api_key`);
  if (p.api_key_env !== undefined) {
    const variable = r.str(p.api_key_env, `${at}.api_key_env`);
    apiKey = env[variable] ?? r.fail(`${at}.api_key_env`, `environment variable ${variable} is not set`);
  }
  if (adapter !== 'openai' && p.dialect !== undefined) r.fail(`${at}.dialect`, 'applies to the openai adapter only');
  const dialect = p.dialect === undefined ? 'openai' : r.oneOf(p.dialect, `${at}.dialect`, DIALECTS);
  return { name, adapter, dialect, baseUrl: r.str(p.base_url, `${at}.base_url`), apiKey };
}

function parseModel(r: CatalogReader, raw: unknown, at: string, providers: ReadonlyMap<string, CatalogProvider>, batchDiscount: number): CatalogModel {
  const m = r.fields(raw, at, MODEL_FIELDS);
  const id = modelIdOf(r, m.id, `${at}.id`);
  const context = m.context_length;
  if (!Number.isInteger(context) || (context as number) <= 0) r.fail(`${at}.context_length`, 'expected a positive integer');
  const uptime = m.uptime;
  if (uptime !== undefined && (typeof uptime !== 'number' || !(uptime >= 0 && uptime <= 1))) r.fail(`${at}.uptime`, 'expected a fraction from 0 to 1 (0.999)');
  const supportedParameters = r.list(m.supported_parameters ?? [], `${at}.supported_parameters`, (x, w) =>
    typeof x === 'string' && PARAMETER_NAME.test(x) ? x : r.fail(w, 'expected a request parameter name such as max_tokens'),
  );
  const type = r.oneOf(m.type, `${at}.type`, MODEL_TYPES);
  const voices = r.list(m.voices ?? [], `${at}.voices`, (x, w) =>
    typeof x === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(x) ? x : r.fail(w, 'expected a voice name (letters, digits, - and _)'),
  );
  if (voices.length > 0 && type !== 'audio') r.fail(`${at}.voices`, 'only audio (speech) models have voices');
  const modelPrices = parsePrices(r, m.pricing, `${at}.pricing`);
  requirePricesOfType(r, type, modelPrices, `${at}.pricing`);
  const inputModalities = r.list(m.input_modalities ?? ['text'], `${at}.input_modalities`, (x, w) => r.oneOf(x, w, MODALITIES));
  const videoCaps = videoOf(r, m.video, `${at}.video`, type, inputModalities);
  const routes = parseRoutes(r, m.providers, at, { type, supportedParameters, modelPrices, providers });
  return {
    id,
    name: m.name === undefined ? id : r.str(m.name, `${at}.name`),
    type,
    created: m.created === undefined ? 0 : Math.floor(r.date(m.created, `${at}.created`).getTime() / 1000),
    ownedBy: m.owned_by === undefined ? (id.includes('/') ? id.slice(0, id.indexOf('/')) : 'svc') : r.str(m.owned_by, `${at}.owned_by`),
    contextLength: context as number,
    inputModalities,
    outputModalities: r.list(m.output_modalities ?? ['text'], `${at}.output_modalities`, (x, w) => r.oneOf(x, w, MODALITIES)),
    supportedParameters,
    prices: modelPrices,
    deprecation: m.deprecation === undefined ? null : parseDeprecation(r, m.deprecation, `${at}.deprecation`),
    uptime: uptime === undefined ? null : (uptime as number),
    voices,
    batchDiscountPercent: m.batch_discount_percent === undefined ? batchDiscount : r.percent(m.batch_discount_percent, `${at}.batch_discount_percent`),
    video: videoCaps,
    providers: routes,
  };
}

function modelIdOf(r: CatalogReader, v: unknown, where: string): string {
  const id = r.str(v, where);
  if (!MODEL_ID.test(id))
    r.fail(
      where,
      `${JSON.stringify(id)}: use letters, digits, ".", "_", "-", and "/" between non-empty parts (no ":" or "@", which start suffixes and presets)`,
    );
  if (RESERVED_IDS.includes(id)) r.fail(where, `"${id}" is reserved by the API`);
  return id;
}

function videoOf(r: CatalogReader, v: unknown, where: string, type: ModelType, inputModalities: Modality[]): VideoCapabilities | null {
  if (v !== undefined && type !== 'video') r.fail(where, 'only video models have video capabilities');
  if (v === undefined && type === 'video') r.fail(where, 'required for video models: at least video.durations');
  return type === 'video' ? parseVideo(r, v, where, inputModalities) : null;
}

/** What a model's routes are checked against. */
interface RouteContext {
  type: ModelType;
  supportedParameters: string[];
  modelPrices: ModelPrices;
  providers: ReadonlyMap<string, CatalogProvider>;
}

function parseRoutes(r: CatalogReader, v: unknown, at: string, model: RouteContext): CatalogRoute[] {
  if (!Array.isArray(v) || v.length === 0) r.fail(`${at}.providers`, 'expected a list of at least one provider');
  const routes = (v as unknown[]).map((raw, j) => parseRoute(r, raw, `${at}.providers[${j}]`, model));
  // Provider routing (`order`, `only`, `ignore`) names providers: each may appear once per model.
  if (new Set(routes.map((route) => route.provider.name)).size !== routes.length) r.fail(`${at}.providers`, 'lists a provider twice');
  return routes;
}

function parseRoute(r: CatalogReader, raw: unknown, where: string, { type, supportedParameters, modelPrices, providers }: RouteContext): CatalogRoute {
  const route = r.fields(raw, where, ROUTE_FIELDS);
  const name = r.str(route.provider, `${where}.provider`);
  const tools = route.tools === undefined ? supportedParameters.includes('tools') : r.bool(route.tools, `${where}.tools`);
  if (tools && !supportedParameters.includes('tools')) r.fail(`${where}.tools`, 'the model does not list tools in supported_parameters');
  const provider = providers.get(name) ?? r.fail(`${where}.provider`, `unknown provider ${name} (not under providers:)`);
  const routePrices = route.pricing === undefined ? modelPrices : parsePrices(r, route.pricing, `${where}.pricing`);
  // A route's own prices replace the model's whole, so they must bill seconds too.
  if (route.pricing !== undefined) requirePricesOfType(r, type, routePrices, `${where}.pricing`);
  // Checked as prices are: a cost with a forgotten token price would read as "free to us".
  const cost = route.cost === undefined ? null : parsePrices(r, route.cost, `${where}.cost`);
  if (cost !== null) requirePricesOfType(r, type, cost, `${where}.cost`);
  // A route to a provider that declares none of its model type's operations (ARCHITECTURE 10)
  // is refused here, not found out on every request.
  if (!servesModelType(provider.adapter, type)) {
    r.fail(
      `${where}.provider`,
      `${name} uses the ${provider.adapter} adapter, which declares no ${type} operation (it serves: ${operationsOf(provider.adapter).join(', ')})`,
    );
  }
  return {
    provider,
    upstreamModel: r.str(route.upstream_model, `${where}.upstream_model`),
    prices: routePrices,
    cost,
    quantization: route.quantization === undefined ? 'unknown' : r.oneOf(route.quantization, `${where}.quantization`, QUANTIZATIONS),
    tools,
    dataCollection: route.data_collection === undefined ? 'allow' : r.oneOf(route.data_collection, `${where}.data_collection`, ['allow', 'deny'] as const),
    zdr: route.zdr === undefined ? false : r.bool(route.zdr, `${where}.zdr`),
  };
}

/** Each model's position by id; a second model with the same id is refused. */
function indexById(r: CatalogReader, models: CatalogModel[]): Map<string, number> {
  const index = new Map<string, number>();
  models.forEach((m, i) => {
    if (index.has(m.id)) r.fail(`models[${i}].id`, `duplicate id ${m.id} (also models[${index.get(m.id)}])`);
    index.set(m.id, i);
  });
  return index;
}

function checkReplacements(r: CatalogReader, models: CatalogModel[], index: ReadonlyMap<string, number>): void {
  models.forEach((m, i) => {
    const replacement = m.deprecation?.replacement;
    if (replacement === undefined || replacement === null) return;
    const where = `models[${i}].deprecation.replacement`;
    const target = models[index.get(replacement) ?? -1] ?? r.fail(where, `unknown model ${replacement}`);
    // A redirect answers the same endpoint: an embedding model cannot stand in for a chat model.
    if (target.type !== m.type) r.fail(where, `${replacement} is of type ${target.type}, ${m.id} of type ${m.type}`);
    // After every sunset of a loop nothing would answer: refuse it now rather than 410 later.
    const chain = [m.id];
    for (let next: CatalogModel | undefined = target; next;) {
      if (chain.includes(next.id)) r.fail(where, `replacements loop: ${[...chain, next.id].join(' -> ')}`);
      chain.push(next.id);
      const after: string | null | undefined = next.deprecation?.replacement;
      next = after ? models[index.get(after) ?? -1] : undefined;
    }
  });
}
