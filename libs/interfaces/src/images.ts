/**
 * `POST /v1/images/generations` (spec 4.8): OpenAI's request and its `ImagesResponse`
 * (WIRE-FORMATS 4.1), billed per image where the catalog prices images, else what the provider
 * reports (spec 1: "provider-reported cost for images").
 */
import type { CatalogModel } from '@svc/catalog';
import { type MeterUsage, type Operation, operationOf, pricesOf } from '@svc/metering';
import { DomainError, type Nano, usdToNano } from '@svc/platform';
import { countTextTokens, isRecord, knownParameters } from '@svc/providers';
import { invalid, requireBody, requireString, type Json } from './types';

export const IMAGES_ENDPOINT = '/v1/images/generations';

/** Spec 8: 1 to 4 images per request. */
export const MAX_IMAGES_PER_REQUEST = 4;
/** Input images for an edit: OpenAI's limit for gpt-image models. */
export const MAX_INPUT_IMAGES = 16;
/** No provider offers a side past this; a larger one can only be a mistake. */
export const MAX_IMAGE_SIDE = 4096;
/**
 * The most output tokens one image may report, for the hold of a model billed per token (spec 1
 * rule 1): gpt-image-1's largest, a 1024x1536 or 1536x1024 image at `high` quality (6,240).
 */
export const MAX_IMAGE_OUTPUT_TOKENS = 6240;

export const IMAGE_QUALITIES = ['auto', 'low', 'medium', 'high', 'standard', 'hd'] as const;
export type ImageQuality = (typeof IMAGE_QUALITIES)[number];

/** The fields spec 4.8 lists, plus `user` and the routing preferences; anything else is ignored. */
const KNOWN_FIELDS = knownParameters('image');

export interface ImagesCall {
  model: string;
  prompt: string;
  n: number;
  /** `auto` or `<W>x<H>`; null: the provider's default. */
  size: string | null;
  quality: ImageQuality | null;
  /** What the caller gets; the provider is always asked for `b64_json`. */
  responseFormat: 'b64_json' | 'url';
  /** Images to edit: https or data URLs, forwarded as they are (the provider fetches them). */
  images: string[];
  user: string | null;
  /** Routing preferences, as on chat completions; not forwarded. */
  provider: unknown;
  /** Fields of the request the gateway does not read, for `x-svc-ignored-params`. */
  ignored: string[];
  /** The prompt in tokens: the tokens per minute, and the hold of a model billed per token. */
  promptTokens: number;
}

export function imagesRequest(raw: unknown): ImagesCall {
  const body = requireBody(raw);
  const model = requireString(body, 'model');
  const prompt = body.prompt;
  if (typeof prompt !== 'string' || prompt.trim() === '') throw invalid('prompt is required and must be a non-empty string.', 'prompt');
  return {
    model,
    prompt,
    n: countOf(body.n),
    size: sizeOf(body.size),
    quality: oneOf(body, 'quality', IMAGE_QUALITIES),
    responseFormat: oneOf(body, 'response_format', ['b64_json', 'url'] as const) ?? 'b64_json',
    images: inputImagesOf(body.image),
    user: userOf(body.user),
    provider: body.provider,
    ignored: Object.keys(body).filter((field) => !KNOWN_FIELDS.has(field)),
    promptTokens: countTextTokens(prompt),
  };
}

const present = (value: unknown) => value !== undefined && value !== null;

function countOf(n: unknown): number {
  if (!present(n)) return 1;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_IMAGES_PER_REQUEST) {
    throw invalid(`n must be an integer from 1 to ${MAX_IMAGES_PER_REQUEST}.`, 'n');
  }
  return n;
}

const SIZE = /^([1-9]\d{0,3})x([1-9]\d{0,3})$/;

function sizeOf(size: unknown): string | null {
  if (!present(size)) return null;
  const match = typeof size === 'string' ? SIZE.exec(size) : null;
  if (size !== 'auto' && (!match || Number(match[1]) > MAX_IMAGE_SIDE || Number(match[2]) > MAX_IMAGE_SIDE)) {
    throw invalid(`size must be "auto" or "<width>x<height>" with each side from 1 to ${MAX_IMAGE_SIDE} (such as "1024x1024").`, 'size');
  }
  return size as string;
}

function oneOf<T extends string>(body: Json, field: string, values: readonly T[]): T | null {
  const value = body[field];
  if (!present(value)) return null;
  if (typeof value !== 'string' || !(values as readonly string[]).includes(value)) throw invalid(`${field} must be one of ${values.join(', ')}.`, field);
  return value as T;
}

function userOf(user: unknown): string | null {
  if (!present(user)) return null;
  if (typeof user !== 'string') throw invalid('user must be a string.', 'user');
  return user;
}

const DATA_URL = /^data:image\/[a-z0-9.+-]+;base64,/i;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** Spec 4.8 `image`: URLs only. The gateway never fetches them, so it only checks their form. */
function inputImagesOf(image: unknown): string[] {
  if (!present(image)) return [];
  if (!Array.isArray(image)) throw invalid('image must be an array of https URLs or base64 data:image/... URLs.', 'image');
  if (image.length > MAX_INPUT_IMAGES) throw invalid(`image holds ${image.length} items; at most ${MAX_INPUT_IMAGES} per request.`, 'image');
  return image.map((url, i) => {
    const param = `image[${i}]`;
    if (!isImageUrl(url)) throw invalid(`${param} must be an https URL or a base64 data:image/... URL.`, param);
    return url;
  });
}

function isImageUrl(url: unknown): url is string {
  if (typeof url !== 'string') return false;
  const data = DATA_URL.exec(url);
  if (data) return BASE64.test(url.slice(data[0].length));
  try {
    // Plain http could be altered on its way to the provider (as for chat images, spec 4.2 rule 5).
    return new URL(url).protocol === 'https:';
  } catch {
    return false;
  }
}

/**
 * Spec 7: `image` goes only to a model that takes image input (its catalog
 * `input_modalities`); checked before anything is held, so the refusal costs nothing.
 */
export function checkImageInput(call: ImagesCall, model: CatalogModel): void {
  if (call.images.length > 0 && !model.inputModalities.includes('image')) {
    throw DomainError.invalid(
      `Model '${model.id}' does not accept image input; remove image or use a model with image in input_modalities.`,
      'image',
      'unsupported_parameter',
    );
  }
}

/** One image as the caller gets it: its bytes in base64, or a URL to them. */
export interface ImageData {
  b64_json?: string;
  url?: string;
  revised_prompt?: string;
}

/** What a provider answered: its body as it came, and the images to return. */
export interface ImagesResult {
  upstream: Json;
  /** At most `n`, each non-empty: their count is what is returned, and billed per image. */
  data: ImageData[];
}

/**
 * Keeps the bytes of images answered by URL and resolves with their URLs, in order. It runs
 * before the charge, so an image that cannot be kept is an error, and not billed (spec 1 rule 3).
 */
export type KeepImages = (images: Buffer[]) => Promise<string[]>;

/**
 * Spec 4.8 through the metering pipeline. The hold (spec 1 rule 1) covers n images at a price
 * per image, and at prices per token the prompt plus n of the largest images; the charge
 * follows `usageOf`. No image returned, nothing billed (spec 1 rule 3).
 */
export function imagesOperation(keep?: KeepImages): Operation<ImagesCall, ImagesResult> {
  return {
    modelType: 'image',
    endpoint: IMAGES_ENDPOINT,
    promptTokens: (call) => call.promptTokens,
    worstCase: (call) => ({ images: call.n, input: call.promptTokens, output: call.n * maxOutputTokens(call.size) }),
    call: async (target, call) => {
      const { json } = await operationOf(
        target,
        'image',
      )({
        model: target.route.upstreamModel,
        prompt: call.prompt,
        n: call.n,
        ...(call.size === null ? {} : { size: call.size }),
        ...(call.quality === null ? {} : { quality: call.quality }),
        ...(call.images.length === 0 ? {} : { image: call.images }),
        ...(call.user === null ? {} : { user: call.user }),
        // The gateway holds the bytes itself, so that `url` can point at a copy it controls.
        response_format: 'b64_json',
      });
      return { upstream: json, data: await imagesOf(json, call, keep) };
    },
    usageOf: (result, call, target) => imageUsage(result, call, pricesOf(target).perImage),
    returned: (result) => result.data.length,
    // Issue 44: the prompt, read by the guardrails' content filters.
    prompt: { param: 'prompt', texts: (call) => [call.prompt], withTexts: (call, [prompt]) => ({ ...call, prompt }) },
  };
}

/**
 * The images to return. An image without bytes is not an image (OpenRouter bills an image only
 * when its base64 decodes to something), and more than `n` were not asked for: neither is billed.
 * An image the provider gave only as a URL (it ignored `b64_json`) is passed on as it is: the
 * gateway does not fetch it.
 */
interface GivenImage {
  b64: string;
  /** Null for an image given only as a URL. */
  bytes: Buffer | null;
  url: string | null;
  revised: { revised_prompt?: string };
}

export async function imagesOf(json: Json, call: ImagesCall, keep: KeepImages | undefined): Promise<ImageData[]> {
  const usable = (json.data as unknown[])
    .filter(isRecord)
    .flatMap((image): GivenImage[] => {
      const revised = typeof image.revised_prompt === 'string' ? { revised_prompt: image.revised_prompt } : {};
      const b64 = typeof image.b64_json === 'string' ? image.b64_json : '';
      const bytes = Buffer.from(b64, 'base64');
      if (bytes.length > 0) return [{ b64, bytes, url: null, revised }];
      if (typeof image.url === 'string' && image.url !== '') return [{ b64, bytes: null, url: image.url, revised }];
      return [];
    })
    .slice(0, call.n);
  const toKeep = call.responseFormat === 'url' ? usable.flatMap((image) => (image.bytes === null ? [] : [image.bytes])) : [];
  if (toKeep.length > 0 && !keep) throw new Error('images answered by URL need somewhere to be kept');
  const kept = toKeep.length > 0 ? await (keep as KeepImages)(toKeep) : [];
  return usable.map(({ b64, bytes, url, revised }) => {
    if (bytes === null) return { url: url as string, ...revised };
    return call.responseFormat === 'url' ? { url: kept.shift() as string, ...revised } : { b64_json: b64, ...revised };
  });
}

/**
 * Spec 1 ("provider-reported cost for images") and the catalog: a model priced per image is
 * billed the images returned; otherwise the provider's own `usage.cost` when it reports one
 * (OpenRouter's, in USD), else its token counts at the catalog's token prices.
 */
export function imageUsage(result: ImagesResult, call: Pick<ImagesCall, 'promptTokens'>, perImage: Nano | null): MeterUsage {
  if (perImage !== null) return { images: result.data.length };
  const usage = isRecord(result.upstream.usage) ? result.upstream.usage : {};
  const cost = providerCostOf(usage.cost);
  if (cost !== null) return { provider_cost: Number(cost) };
  return { input: tokensOf(usage.input_tokens) ?? call.promptTokens, output: tokensOf(usage.output_tokens) ?? 0 };
}

/**
 * `usage.cost` in nano-USD, exact. A figure finer than a nano is rounded up to the next one, as
 * every price is; one that is not a non-negative amount is no figure at all (the tokens decide).
 */
export function providerCostOf(cost: unknown): Nano | null {
  if (typeof cost !== 'number' && typeof cost !== 'string') return null;
  try {
    return usdToNano(cost);
  } catch {
    const text = typeof cost === 'number' ? (Number.isFinite(cost) && cost >= 0 ? cost.toFixed(20) : '') : cost.trim();
    const m = /^(\d+)\.(\d{9})(\d*)$/.exec(text);
    if (!m) return null;
    return usdToNano(`${m[1]}.${m[2]}`) + (/[1-9]/.test(m[3]) ? 1n : 0n);
  }
}

const tokensOf = (value: unknown): number | null => (typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : null);

/** What the provider echoes of the effective request (WIRE-FORMATS 4.1), passed on when present. */
const ECHOED = ['background', 'output_format', 'quality', 'size'] as const;

/**
 * OpenAI's `ImagesResponse` with the service's id, the model that answered and what the caller
 * was charged (spec 1 rule 2): `usage` is the provider's with `cost` in USD.
 */
export function imagesAnswer(id: string, model: string, created: number, result: ImagesResult, cost: number) {
  const { upstream } = result;
  const echoed: Json = {};
  for (const field of ECHOED) if (typeof upstream[field] === 'string') echoed[field] = upstream[field];
  const { cost: _providerCost, ...reported } = isRecord(upstream.usage) ? upstream.usage : {};
  return { id, created, model, data: result.data, ...echoed, usage: { ...reported, cost } };
}

/**
 * The most one image may report, for the hold: gpt-image-1 reports 4,160 output tokens for a
 * 1024x1024 image at high quality and scales with the pixels (6,240 at 1536x1024), so a larger
 * size holds proportionally more; `auto` and the default hold the largest standard size.
 */
export function maxOutputTokens(size: string | null): number {
  const match = size === null ? null : SIZE.exec(size);
  if (!match) return MAX_IMAGE_OUTPUT_TOKENS;
  return Math.max(MAX_IMAGE_OUTPUT_TOKENS, Math.ceil((Number(match[1]) * Number(match[2]) * 4160) / (1024 * 1024)));
}
