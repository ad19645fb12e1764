/**
 * What a catalog is once read: its closed vocabularies, its models with their prices, providers
 * and routes, and the Catalog that looks them up. Reading the file is ./parse's.
 */
import type { TokenPrices } from '@svc/ledger';
import type { Nano } from '@svc/platform';
import type { ADAPTERS } from '@svc/providers';

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
export const ASPECT_RATIO = /^([1-9][0-9]{0,3}):([1-9][0-9]{0,3})$/;

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
