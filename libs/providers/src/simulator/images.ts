/**
 * The simulated image model (`POST /v1/images/generations`, OpenAI's ImagesResponse). Each image
 * is a real PNG of exactly the requested size: a vertical gradient between two colours taken
 * from a hash of the request (model, prompt without its `#sim` lines, size, quality, input
 * images) and the image's index, so the same request always gets the same bytes and the n
 * images of one request differ. Flat rows keep a 2048x2048 image at a few KB.
 *
 * Usage follows gpt-image-1's published output accounting: 272 / 1056 / 4160 image tokens for a
 * 1024x1024 low / medium / high image, scaled by the pixel count (which gives its 408 / 1584 /
 * 6240 for 1024x1536 too). Input images are only hashed in, so they count no tokens.
 *
 * `response_format: "url"` answers `<simulator>/v1/files/images/<sha256 of the PNG>.png`, served
 * (without auth, like a signed CDN link) from the last IMAGES_KEPT images.
 */
import { createHash } from 'node:crypto';
import { isRecord } from '../json';
import { countTextTokens } from '../tokens';
import { parseDirectives, type SimDirectives } from './directives';
import { SimError } from './http';
import { encodePng, type Rgb } from './png';

export interface ImagesRequest {
  model: string;
  /** The prompt without its `#sim` lines. */
  prompt: string;
  n: number;
  width: number;
  height: number;
  /** The effective quality, as echoed in the response. */
  quality: string;
  responseFormat: 'b64_json' | 'url';
  /** `image`: URLs or data URLs of the images to edit; only hashed in. */
  images: string[];
  directives: SimDirectives;
}

export interface ImageData {
  b64_json?: string;
  url?: string;
  revised_prompt?: string;
}

export interface ImagesResponse {
  created: number;
  data: ImageData[];
  size: string;
  quality: string;
  output_format: 'png';
  usage: {
    input_tokens: number;
    input_tokens_details: { text_tokens: number; image_tokens: number };
    output_tokens: number;
    output_tokens_details: { text_tokens: number; image_tokens: number };
    total_tokens: number;
  };
}

const MAX_N = 10;
/** Larger than any size OpenAI offers (1792), small enough that 10 images stay quick. */
const MAX_SIDE = 2048;
const DEFAULT_SIZE = '1024x1024';
const QUALITIES = ['auto', 'standard', 'hd', 'low', 'medium', 'high'];
/** gpt-image-1 output image tokens of a 1024x1024 image, by quality. */
const SQUARE_TOKENS: Record<string, number> = { low: 272, medium: 1056, high: 4160, standard: 1056, hd: 4160 };
const MEGAPIXEL = 1024 * 1024;

export function parseImagesRequest(body: unknown): ImagesRequest {
  if (!isRecord(body)) throw new SimError(400, 'request body must be a JSON object');
  if (typeof body.model !== 'string' || body.model === '') throw new SimError(400, 'model is required', 'model');
  if (typeof body.prompt !== 'string' || body.prompt.trim() === '') throw new SimError(400, 'prompt must be a non-empty string', 'prompt');
  const n = body.n ?? 1;
  if (!Number.isInteger(n) || (n as number) < 1 || (n as number) > MAX_N) {
    throw new SimError(400, `n must be an integer from 1 to ${MAX_N}`, 'n');
  }
  const { width, height } = parseSize(body.size ?? DEFAULT_SIZE);
  const quality = body.quality ?? 'auto';
  if (typeof quality !== 'string' || !QUALITIES.includes(quality)) {
    throw new SimError(400, `quality must be one of ${QUALITIES.join(', ')}`, 'quality');
  }
  const responseFormat = body.response_format ?? 'b64_json';
  if (responseFormat !== 'b64_json' && responseFormat !== 'url') {
    throw new SimError(400, 'response_format must be url or b64_json', 'response_format');
  }
  const { directives, text } = parseDirectives(body.prompt);
  return {
    model: body.model,
    prompt: text,
    n: n as number,
    width,
    height,
    quality: quality === 'auto' ? 'medium' : quality,
    responseFormat,
    images: imageList(body.image),
    directives,
  };
}

/** `WxH` (each side 1 to MAX_SIDE) or `auto`, which renders the default square. */
function parseSize(size: unknown): { width: number; height: number } {
  const match = typeof size === 'string' ? /^(\d{1,5})x(\d{1,5})$/.exec(size === 'auto' ? DEFAULT_SIZE : size) : null;
  const [width, height] = match ? [Number(match[1]), Number(match[2])] : [0, 0];
  if (width < 1 || height < 1 || width > MAX_SIDE || height > MAX_SIDE) {
    throw new SimError(400, `size must be auto or WxH with sides from 1 to ${MAX_SIDE}`, 'size');
  }
  return { width, height };
}

function imageList(image: unknown): string[] {
  if (image === undefined) return [];
  const list = typeof image === 'string' ? [image] : image;
  if (!Array.isArray(list) || !list.every((i): i is string => typeof i === 'string' && i !== '')) {
    throw new SimError(400, 'image must be a URL or data URL, or an array of them', 'image');
  }
  return list;
}

/** The PNG bytes of image `index` of a request; the same request and index give the same bytes. */
export function renderImage(request: ImagesRequest, index: number): Buffer {
  const seed = createHash('sha256')
    .update(JSON.stringify([request.model, request.prompt, request.width, request.height, request.quality, request.images, index]))
    .digest();
  const top: Rgb = [seed[0], seed[1], seed[2]];
  const bottom: Rgb = [seed[3], seed[4], seed[5]];
  const last = Math.max(request.height - 1, 1);
  return encodePng(request.width, request.height, (y) => mix(top, bottom, y / last));
}

function mix(a: Rgb, b: Rgb, t: number): Rgb {
  const at = (i: 0 | 1 | 2) => Math.round(a[i] + (b[i] - a[i]) * t);
  return [at(0), at(1), at(2)];
}

/** The image tokens of one image of this size and quality. */
export function imageTokens(request: Pick<ImagesRequest, 'width' | 'height' | 'quality'>): number {
  return Math.ceil((SQUARE_TOKENS[request.quality] * request.width * request.height) / MEGAPIXEL);
}

export const contentId = (png: Buffer) => createHash('sha256').update(png).digest('hex');

/**
 * The response for images already rendered (`urlOf` names where a stored PNG is served).
 * `revised_prompt` comes only from dall-e-3, as upstream.
 */
export function imagesResponse(request: ImagesRequest, pngs: Buffer[], urlOf: (png: Buffer) => string, created: number): ImagesResponse {
  const revised = request.model.includes('dall-e-3') ? { revised_prompt: request.prompt } : {};
  const data = pngs.map((png) => ({
    ...(request.responseFormat === 'url' ? { url: urlOf(png) } : { b64_json: png.toString('base64') }),
    ...revised,
  }));
  const textTokens = countTextTokens(request.prompt);
  const outputTokens = pngs.length * imageTokens(request);
  return {
    created,
    data,
    size: `${request.width}x${request.height}`,
    quality: request.quality,
    output_format: 'png',
    usage: {
      input_tokens: textTokens,
      input_tokens_details: { text_tokens: textTokens, image_tokens: 0 },
      output_tokens: outputTokens,
      output_tokens_details: { text_tokens: 0, image_tokens: outputTokens },
      total_tokens: textTokens + outputTokens,
    },
  };
}

/** The most recent images by content id, oldest evicted first (a Map keeps insertion order). */
export class ImageStore {
  private readonly images = new Map<string, Buffer>();
  constructor(private readonly capacity: number) {}

  put(png: Buffer): string {
    const id = contentId(png);
    this.images.delete(id);
    this.images.set(id, png);
    if (this.images.size > this.capacity) this.images.delete(this.images.keys().next().value as string);
    return id;
  }

  get(id: string): Buffer | undefined {
    const png = this.images.get(id);
    if (png) this.put(png);
    return png;
  }
}
