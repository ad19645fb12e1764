import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import type { TokenPrices } from '@svc/ledger';
import { usdToNano, type Nano } from '@svc/platform';
import { ADAPTERS, operationsOf, servesModelType } from '@svc/providers';

/*
 * Closed vocabularies: a typo in the catalog file or in a GET /v1/models filter is an error
 * that names the place, never a silently empty result. Extend them here when a new kind of
 * model or modality arrives.
 */
export const MODEL_TYPES = ['chat', 'embedding', 'rerank', 'moderation', 'search', 'image', 'audio', 'video', 'realtime'] as const;
export type ModelType = (typeof MODEL_TYPES)[number];
export const MODALITIES = ['text', 'image', 'audio', 'video', 'file', 'embeddings'] as const;
export type Modality = (typeof MODALITIES)[number];
export const QUANTIZATIONS = ['int4', 'int8', 'fp4', 'fp6', 'fp8', 'fp16', 'bf16', 'fp32', 'unknown'] as const;
export type Quantization = (typeof QUANTIZATIONS)[number];
/** Supported parameters are request-body field names; the set stays open (new parameters need no code). */
export const PARAMETER_NAME = /^[a-z][a-z0-9_]*$/;
/**
 * Model ids: no `:` (it starts a suffix such as `:nitro`), no `@` (presets), nothing a URL path
 * would have to escape except `/`, so `GET /v1/models/{id}` takes the id as it is.
 */
const MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*(?:\/[A-Za-z0-9._-]+)*$/;
/** `GET /v1/models/count` is a route of its own. */
const RESERVED_IDS = ['count'];

/** A model of the catalog (spec 2.8: type, modalities, context, parameters, prices, deprecation, uptime). */
export interface CatalogModel {
  id: string;
  name: string;
  type: ModelType;
  /** Unix seconds, the `created` of /v1/models; 0 when the file does not say. */
  created: number;
  ownedBy: string;
  contextLength: number;
  inputModalities: Modality[];
  outputModalities: Modality[];
  supportedParameters: string[];
  /** The model's list prices; what a request is billed is the answering route's `prices`. */
  prices: ModelPrices;
  /** Scheduled retirement (spec 9); see ./deprecation for what it means at a given time. */
  deprecation: Deprecation | null;
  /** Fraction of successful requests, 0 to 1, as the file states it; null when unknown. */
  uptime: number | null;
  /** Speech models (spec 4.9): the voices a request may name; empty for other models. */
  voices: string[];
  /**
   * Spec 1 rule 6: a batch line is billed this much below the regular price (0-100); the
   * model's own figure, else the catalog's `batch_discount_percent`, else 50, as OpenAI's is.
   */
  batchDiscountPercent: number;
  /** Video models only (spec 4.15): what a request may ask for; null for every other type. */
  video: VideoCapabilities | null;
  /** In preference order. */
  providers: CatalogRoute[];
}

/** Nano-USD. Token prices per million tokens; the others per unit, null where they do not apply. */
export interface ModelPrices extends TokenPrices {
  perQuery: Nano | null;
  perSecond: Nano | null;
  perImage: Nano | null;
  /** Speech (spec 4.9): per million characters of input, as providers list it. */
  perMillionCharacters: Nano | null;
  /** Rerank (spec 4.12): one query with up to 100 documents. */
  perSearchUnit: Nano | null;
  /** Realtime (spec 4.16): audio tokens per million, apart from the text tokens; null where a model takes or makes no audio tokens. */
  audioInputPerM: Nano | null;
  /** Audio input served from the provider's cache; the audio input price when not stated. */
  cachedAudioInputPerM: Nano | null;
  audioOutputPerM: Nano | null;
}

/**
 * What a video model makes (spec 4.15: `seconds`, `aspect_ratio` or `size`, `resolution`,
 * `image_url` "where the model supports them"; GET /models?type=video lists them). An empty list
 * means the caller has no choice there: the request may not set that field.
 */
export interface VideoCapabilities {
  /** Clip lengths in whole seconds, ascending; never empty. The shortest is the default. */
  durations: number[];
  /** `W:H` as the file writes them (`16:9`); the first is the default. */
  aspectRatios: string[];
  /** Free labels such as `720p`; the first is the default. */
  resolutions: string[];
  /** `WxH` pixel sizes a request may name in `size`; empty = any size of a listed aspect ratio. */
  sizes: string[];
  /** Whether a first frame (`image_url`) may be given. */
  imageToVideo: boolean;
}

/**
 * Providers round their pixel sizes (OpenAI's 1024x1792 is called 9:16 but is 4:7), so a size
 * belongs to the listed ratio nearest its own within this relative distance.
 */
export const SIZE_RATIO_TOLERANCE = 0.02;
const SIZE = /^([1-9][0-9]{0,4})x([1-9][0-9]{0,4})$/;
const ASPECT_RATIO = /^([1-9][0-9]{0,3}):([1-9][0-9]{0,3})$/;

/** `[width, height]` of a `WxH` size, or null when it is not one. */
export function parseVideoSize(size: string): [number, number] | null {
  const m = SIZE.exec(size);
  return m ? [Number(m[1]), Number(m[2])] : null;
}

/**
 * The aspect ratio a `WxH` size has among `ratios`: the nearest within SIZE_RATIO_TOLERANCE, or
 * null when none is that near; with no ratios listed, the size's own in lowest terms.
 */
export function aspectRatioOfSize(size: string, ratios: readonly string[]): string | null {
  const wh = parseVideoSize(size);
  if (!wh) return null;
  const [w, h] = wh;
  if (ratios.length === 0) {
    const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
    const d = gcd(w, h);
    return `${w / d}:${h / d}`;
  }
  let best: { ratio: string; distance: number } | null = null;
  for (const ratio of ratios) {
    const m = ASPECT_RATIO.exec(ratio);
    if (!m) continue;
    const target = Number(m[1]) / Number(m[2]);
    const distance = Math.abs(w / h - target) / target;
    if (distance <= SIZE_RATIO_TOLERANCE && (best === null || distance < best.distance)) best = { ratio, distance };
  }
  return best?.ratio ?? null;
}

export interface Deprecation {
  /** From this instant the model no longer answers: its replacement does, or 410. */
  sunset: Date;
  replacement: string | null;
  /** When the retirement becomes public; null = as soon as the catalog carries it. */
  announced: Date | null;
}

export { ADAPTERS, type AdapterName } from '@svc/providers';

export const DIALECTS = ['openai', 'router'] as const;

export interface CatalogProvider {
  name: string;
  /** The wire format: OpenAI chat completions, or Anthropic's native Messages API. */
  adapter: (typeof ADAPTERS)[number];
  /**
   * For the openai adapter, which request fields the upstream takes: `openai` (OpenAI's own API,
   * which refuses router fields) or `router` (OpenRouter, vLLM, Ollama, llama.cpp: also `top_k`,
   * `min_p`, `reasoning`, `include_reasoning`...).
   */
  dialect: (typeof DIALECTS)[number];
  /** `simulator` resolves to the simulated upstream at start. */
  baseUrl: string;
  apiKey: string;
}

/** One provider serving a model. */
export interface CatalogRoute {
  provider: CatalogProvider;
  upstreamModel: string;
  /** Billed when this provider answers: its own prices in the file, else the model's. */
  prices: ModelPrices;
  /**
   * What this provider charges the operator (the file's `cost`, same shape and units as
   * `pricing`), recorded with each charge for reconciliation (issue 23); null when the file
   * does not say: the provider cost of its calls is then unknown.
   */
  cost: ModelPrices | null;
  quantization: Quantization;
  /** Whether tool calls work through this provider. */
  tools: boolean;
  /** Whether the provider may keep or train on prompts. */
  dataCollection: 'allow' | 'deny';
  /** Zero data retention. */
  zdr: boolean;
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
const PRICE_FIELDS = [
  'input',
  'output',
  'cached_input',
  'per_query',
  'per_second',
  'per_image',
  'per_million_characters',
  'per_search_unit',
  'audio_input',
  'cached_audio_input',
  'audio_output',
];
const DEPRECATION_FIELDS = ['sunset', 'replacement', 'announced'];
const VIDEO_FIELDS = ['durations', 'aspect_ratios', 'resolutions', 'sizes', 'image_to_video'];
const ROUTE_FIELDS = ['provider', 'upstream_model', 'pricing', 'cost', 'quantization', 'tools', 'data_collection', 'zdr'];
/** A time zone is required: a sunset must mean the same instant on every server. */
const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

export function parseCatalog(doc: unknown, source: string, env: Record<string, string | undefined> = {}): Catalog {
  const fail = (where: string, what: string): never => {
    throw new CatalogError(`${source}: ${where}: ${what}`);
  };
  const obj = (v: unknown, where: string) =>
    typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date) ? (v as Record<string, unknown>) : fail(where, 'expected a mapping');
  // Unknown fields are refused: a misspelt optional field (`deprecaton:`) would otherwise vanish.
  const fields = (v: unknown, where: string, known: string[]) => {
    const o = obj(v, where);
    for (const key of Object.keys(o)) {
      if (!known.includes(key)) fail(`${where}.${key}`, `unknown field (known: ${known.join(', ')})`);
    }
    return o;
  };
  const str = (v: unknown, where: string) => (typeof v === 'string' && v.length > 0 ? v : fail(where, 'expected a non-empty string'));
  const bool = (v: unknown, where: string) => (typeof v === 'boolean' ? v : fail(where, 'expected true or false'));
  const oneOf = <T extends string>(v: unknown, where: string, allowed: readonly T[]): T =>
    allowed.includes(v as T) ? (v as T) : fail(where, `expected one of ${allowed.join(', ')}, got ${JSON.stringify(v)}`);
  const list = <T>(v: unknown, where: string, item: (x: unknown, where: string) => T): T[] => {
    if (!Array.isArray(v)) return fail(where, 'expected a list');
    const items = v.map((x, i) => item(x, `${where}[${i}]`));
    if (new Set(items).size !== items.length) fail(where, 'lists an entry twice');
    return items;
  };
  const date = (v: unknown, where: string): Date => {
    if (v instanceof Date && !Number.isNaN(v.getTime())) return v; // a YAML 1.1 timestamp
    const m = typeof v === 'string' ? ISO_DATE_TIME.exec(v) : null;
    const at = m ? Date.parse(m[0]) : NaN;
    // Date.parse rolls 2026-02-30 over into March: the calendar date must exist as written.
    const day = m ? new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))).toISOString().slice(0, 10) : '';
    if (!m || Number.isNaN(at) || day !== m[0].slice(0, 10)) {
      return fail(where, `expected an ISO 8601 date-time with a time zone such as 2026-12-01T00:00:00Z, got ${JSON.stringify(v)}`);
    }
    return new Date(at);
  };
  const usd = (v: unknown, where: string, unit: string) => {
    try {
      return usdToNano(typeof v === 'number' ? v : str(v, where));
    } catch {
      return fail(where, `expected a USD price ${unit}, got ${JSON.stringify(v)}`);
    }
  };
  const prices = (v: unknown, where: string): ModelPrices => {
    const p = fields(v, where, PRICE_FIELDS);
    const perUnit = (key: string, unit: string) => (p[key] === undefined ? null : usd(p[key], `${where}.${key}`, unit));
    const perQuery = perUnit('per_query', 'per query');
    const perSecond = perUnit('per_second', 'per second');
    const perImage = perUnit('per_image', 'per image');
    const perMillionCharacters = perUnit('per_million_characters', 'per million characters');
    const perSearchUnit = perUnit('per_search_unit', 'per search unit');
    // A forgotten token price must not mean "free"; only a model billed per unit may leave them out.
    const billedPerUnit = [perQuery, perSecond, perImage, perMillionCharacters, perSearchUnit].some((price) => price !== null);
    const perToken = (key: string) =>
      p[key] !== undefined
        ? usd(p[key], `${where}.${key}`, 'per million tokens')
        : billedPerUnit
          ? 0n
          : fail(
              `${where}.${key}`,
              'required (write 0 for free), unless the model is priced per_query, per_second, per_image, per_million_characters or per_search_unit',
            );
    const inputPerM = perToken('input');
    const cachedInputPerM = p.cached_input === undefined ? inputPerM : usd(p.cached_input, `${where}.cached_input`, 'per million tokens');
    if (cachedInputPerM > inputPerM) fail(`${where}.cached_input`, 'must not exceed the input price');
    const audioInputPerM = perUnit('audio_input', 'per million audio tokens');
    const cachedAudioInputPerM =
      p.cached_audio_input === undefined ? audioInputPerM : usd(p.cached_audio_input, `${where}.cached_audio_input`, 'per million audio tokens');
    if (cachedAudioInputPerM !== null && audioInputPerM === null) fail(`${where}.cached_audio_input`, 'needs audio_input, the price it discounts');
    if (cachedAudioInputPerM !== null && audioInputPerM !== null && cachedAudioInputPerM > audioInputPerM)
      fail(`${where}.cached_audio_input`, 'must not exceed the audio_input price');
    return {
      inputPerM,
      outputPerM: perToken('output'),
      cachedInputPerM,
      perQuery,
      perSecond,
      perImage,
      perMillionCharacters,
      perSearchUnit,
      audioInputPerM,
      cachedAudioInputPerM,
      audioOutputPerM: perUnit('audio_output', 'per million audio tokens'),
    };
  };

  const percent = (v: unknown, where: string) =>
    Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 100 ? (v as number) : fail(where, 'expected a whole percentage from 0 to 100');

  const root = fields(doc, 'top level', TOP_FIELDS);
  const batchDiscount =
    root.batch_discount_percent === undefined ? DEFAULT_BATCH_DISCOUNT_PERCENT : percent(root.batch_discount_percent, 'batch_discount_percent');
  const providers = new Map<string, CatalogProvider>();
  for (const [name, raw] of Object.entries(obj(root.providers, 'providers'))) {
    const at = `providers.${name}`;
    const p = fields(raw, at, PROVIDER_FIELDS);
    const adapter = oneOf(p.adapter, `${at}.adapter`, ADAPTERS);
    let apiKey = p.api_key === undefined ? '' : str(p.api_key, `${at}.api_key`);
    if (p.api_key_env !== undefined) {
      const variable = str(p.api_key_env, `${at}.api_key_env`);
      apiKey = env[variable] ?? fail(`${at}.api_key_env`, `environment variable ${variable} is not set`);
    }
    if (adapter !== 'openai' && p.dialect !== undefined) fail(`${at}.dialect`, 'applies to the openai adapter only');
    const dialect = p.dialect === undefined ? 'openai' : oneOf(p.dialect, `${at}.dialect`, DIALECTS);
    providers.set(name, { name, adapter, dialect, baseUrl: str(p.base_url, `${at}.base_url`), apiKey });
  }

  if (!Array.isArray(root.models)) fail('models', 'expected a list');
  const models = (root.models as unknown[]).map((raw, i): CatalogModel => {
    const at = `models[${i}]`;
    const m = fields(raw, at, MODEL_FIELDS);
    const id = str(m.id, `${at}.id`);
    if (!MODEL_ID.test(id))
      fail(
        `${at}.id`,
        `${JSON.stringify(id)}: use letters, digits, ".", "_", "-", and "/" between non-empty parts (no ":" or "@", which start suffixes and presets)`,
      );
    if (RESERVED_IDS.includes(id)) fail(`${at}.id`, `"${id}" is reserved by the API`);
    const context = m.context_length;
    if (!Number.isInteger(context) || (context as number) <= 0) fail(`${at}.context_length`, 'expected a positive integer');
    const uptime = m.uptime;
    if (uptime !== undefined && (typeof uptime !== 'number' || !(uptime >= 0 && uptime <= 1))) fail(`${at}.uptime`, 'expected a fraction from 0 to 1 (0.999)');
    const supportedParameters = list(m.supported_parameters ?? [], `${at}.supported_parameters`, (x, w) =>
      typeof x === 'string' && PARAMETER_NAME.test(x) ? x : fail(w, 'expected a request parameter name such as max_tokens'),
    );
    const type = oneOf(m.type, `${at}.type`, MODEL_TYPES);
    const voices = list(m.voices ?? [], `${at}.voices`, (x, w) =>
      typeof x === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(x) ? x : fail(w, 'expected a voice name (letters, digits, - and _)'),
    );
    if (voices.length > 0 && type !== 'audio') fail(`${at}.voices`, 'only audio (speech) models have voices');
    const modelPrices = prices(m.pricing, `${at}.pricing`);
    // Spec 1: video is billed per second; without the price a clip would be free. Spec 4.16: a
    // realtime model's audio tokens likewise.
    const perSecondRequired = (p: ModelPrices, where: string) => {
      if (type === 'video' && p.perSecond === null) fail(`${where}.per_second`, 'required for video models (billed per second of clip)');
      if (type === 'realtime' && p.audioInputPerM === null)
        fail(`${where}.audio_input`, 'required for realtime models (billed per audio token, apart from text)');
      if (type === 'realtime' && p.audioOutputPerM === null)
        fail(`${where}.audio_output`, 'required for realtime models (billed per audio token, apart from text)');
    };
    perSecondRequired(modelPrices, `${at}.pricing`);
    const inputModalities = list(m.input_modalities ?? ['text'], `${at}.input_modalities`, (x, w) => oneOf(x, w, MODALITIES));
    if (m.video !== undefined && type !== 'video') fail(`${at}.video`, 'only video models have video capabilities');
    if (m.video === undefined && type === 'video') fail(`${at}.video`, 'required for video models: at least video.durations');
    const videoCaps = type === 'video' ? video(m.video, `${at}.video`, inputModalities) : null;
    if (!Array.isArray(m.providers) || m.providers.length === 0) fail(`${at}.providers`, 'expected a list of at least one provider');
    const routes = (m.providers as unknown[]).map((raw, j): CatalogRoute => {
      const where = `${at}.providers[${j}]`;
      const r = fields(raw, where, ROUTE_FIELDS);
      const name = str(r.provider, `${where}.provider`);
      const tools = r.tools === undefined ? supportedParameters.includes('tools') : bool(r.tools, `${where}.tools`);
      if (tools && !supportedParameters.includes('tools')) fail(`${where}.tools`, 'the model does not list tools in supported_parameters');
      const provider = providers.get(name) ?? fail(`${where}.provider`, `unknown provider ${name} (not under providers:)`);
      const routePrices = r.pricing === undefined ? modelPrices : prices(r.pricing, `${where}.pricing`);
      // A route's own prices replace the model's whole, so they must bill seconds too.
      if (r.pricing !== undefined) perSecondRequired(routePrices, `${where}.pricing`);
      // Checked as prices are: a cost with a forgotten token price would read as "free to us".
      const cost = r.cost === undefined ? null : prices(r.cost, `${where}.cost`);
      if (cost !== null) perSecondRequired(cost, `${where}.cost`);
      // A route to a provider that declares none of its model type's operations (ARCHITECTURE 10)
      // is refused here, not found out on every request.
      if (!servesModelType(provider.adapter, type)) {
        fail(
          `${where}.provider`,
          `${name} uses the ${provider.adapter} adapter, which declares no ${type} operation (it serves: ${operationsOf(provider.adapter).join(', ')})`,
        );
      }
      return {
        provider,
        upstreamModel: str(r.upstream_model, `${where}.upstream_model`),
        prices: routePrices,
        cost,
        quantization: r.quantization === undefined ? 'unknown' : oneOf(r.quantization, `${where}.quantization`, QUANTIZATIONS),
        tools,
        dataCollection: r.data_collection === undefined ? 'allow' : oneOf(r.data_collection, `${where}.data_collection`, ['allow', 'deny'] as const),
        zdr: r.zdr === undefined ? false : bool(r.zdr, `${where}.zdr`),
      };
    });
    // Provider routing (`order`, `only`, `ignore`) names providers: each may appear once per model.
    if (new Set(routes.map((r) => r.provider.name)).size !== routes.length) fail(`${at}.providers`, 'lists a provider twice');
    return {
      id,
      name: m.name === undefined ? id : str(m.name, `${at}.name`),
      type,
      created: m.created === undefined ? 0 : Math.floor(date(m.created, `${at}.created`).getTime() / 1000),
      ownedBy: m.owned_by === undefined ? (id.includes('/') ? id.slice(0, id.indexOf('/')) : 'svc') : str(m.owned_by, `${at}.owned_by`),
      contextLength: context as number,
      inputModalities,
      outputModalities: list(m.output_modalities ?? ['text'], `${at}.output_modalities`, (x, w) => oneOf(x, w, MODALITIES)),
      supportedParameters,
      prices: modelPrices,
      deprecation: m.deprecation === undefined ? null : deprecation(m.deprecation, `${at}.deprecation`),
      uptime: uptime === undefined ? null : (uptime as number),
      voices,
      batchDiscountPercent: m.batch_discount_percent === undefined ? batchDiscount : percent(m.batch_discount_percent, `${at}.batch_discount_percent`),
      video: videoCaps,
      providers: routes,
    };
  });

  function video(v: unknown, where: string, inputModalities: Modality[]): VideoCapabilities {
    const d = fields(v, where, VIDEO_FIELDS);
    // Required: a default clip length the file never stated would be a price the operator never saw.
    if (d.durations === undefined) fail(`${where}.durations`, 'required: the clip lengths in seconds, such as [4, 8, 12]');
    const durations = list(d.durations, `${where}.durations`, (x, w) =>
      Number.isInteger(x) && (x as number) > 0 ? (x as number) : fail(w, 'expected a positive whole number of seconds'),
    );
    if (durations.length === 0) fail(`${where}.durations`, 'expected at least one clip length');
    const aspectRatios = list(d.aspect_ratios ?? [], `${where}.aspect_ratios`, (x, w) =>
      typeof x === 'string' && ASPECT_RATIO.test(x) ? x : fail(w, `expected an aspect ratio such as "16:9", got ${JSON.stringify(x)}`),
    );
    const resolutions = list(d.resolutions ?? [], `${where}.resolutions`, (x, w) =>
      typeof x === 'string' && /^[A-Za-z0-9]{1,16}$/.test(x) ? x : fail(w, `expected a resolution label such as "720p", got ${JSON.stringify(x)}`),
    );
    const sizes = list(d.sizes ?? [], `${where}.sizes`, (x, w) => {
      if (typeof x !== 'string' || parseVideoSize(x) === null) return fail(w, `expected a size WxH such as "1280x720", got ${JSON.stringify(x)}`);
      // A listed size no request could be given (its ratio is not offered) is a mistake in the file.
      if (aspectRatioOfSize(x, aspectRatios) === null) fail(w, `${x} has none of the aspect ratios ${aspectRatios.join(', ')}`);
      return x;
    });
    // By default a model takes a first frame exactly when it takes images at all.
    const imageToVideo = d.image_to_video === undefined ? inputModalities.includes('image') : bool(d.image_to_video, `${where}.image_to_video`);
    if (imageToVideo && !inputModalities.includes('image')) fail(`${where}.image_to_video`, 'the model does not list image in input_modalities');
    return { durations: [...durations].sort((a, b) => a - b), aspectRatios, resolutions, sizes, imageToVideo };
  }

  function deprecation(v: unknown, where: string): Deprecation {
    const d = fields(v, where, DEPRECATION_FIELDS);
    const sunset = date(d.sunset, `${where}.sunset`);
    // Required, null included: "no replacement" (410 after the sunset) must be a decision, not an omission.
    if (!('replacement' in d)) fail(`${where}.replacement`, 'required: the id of the model to use instead, or null');
    const replacement = d.replacement === null ? null : str(d.replacement, `${where}.replacement`);
    const announced = d.announced === undefined ? null : date(d.announced, `${where}.announced`);
    if (announced && announced > sunset) fail(`${where}.announced`, 'must not be after the sunset');
    return { sunset, replacement, announced };
  }

  const index = new Map<string, number>();
  models.forEach((m, i) => {
    if (index.has(m.id)) fail(`models[${i}].id`, `duplicate id ${m.id} (also models[${index.get(m.id)}])`);
    index.set(m.id, i);
  });
  models.forEach((m, i) => {
    const replacement = m.deprecation?.replacement;
    if (replacement === undefined || replacement === null) return;
    const where = `models[${i}].deprecation.replacement`;
    const target = models[index.get(replacement) ?? -1] ?? fail(where, `unknown model ${replacement}`);
    // A redirect answers the same endpoint: an embedding model cannot stand in for a chat model.
    if (target.type !== m.type) fail(where, `${replacement} is of type ${target.type}, ${m.id} of type ${m.type}`);
    // After every sunset of a loop nothing would answer: refuse it now rather than 410 later.
    const chain = [m.id];
    for (let next: CatalogModel | undefined = target; next;) {
      if (chain.includes(next.id)) fail(where, `replacements loop: ${[...chain, next.id].join(' -> ')}`);
      chain.push(next.id);
      const after: string | null | undefined = next.deprecation?.replacement;
      next = after ? models[index.get(after) ?? -1] : undefined;
    }
  });
  return new Catalog(models);
}
