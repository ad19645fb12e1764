/**
 * POST /videos (spec 4.15; OpenAI's create-video fields, WIRE-FORMATS 2), checked against the
 * model's catalog capabilities before anything is held or submitted. Pure: no I/O, no clock. The
 * first frame's host is not resolved here; that happens when it is fetched, through the outbound
 * guard, so a name that resolves somewhere private by then is still refused.
 */
import { aspectRatioOfSize, parseVideoSize, type CatalogModel, type ModelPrices, type VideoCapabilities } from '@svc/catalog';
import { checkOutboundUrl, DomainError, OutboundRefused, type Nano } from '@svc/platform';

/** OpenAI's limit on a video prompt (WIRE-FORMATS 2). */
export const MAX_VIDEO_PROMPT_CHARACTERS = 32_000;

/** A create request as the gateway runs it: every choice made, defaults filled in from the model. */
export interface VideoRequest {
  /** The catalog model's id. */
  model: string;
  prompt: string;
  seconds: number;
  /** Null only when the model offers no aspect ratio to choose. */
  aspectRatio: string | null;
  /** Null when the model offers none, or a `size` matches none of its labels. */
  resolution: string | null;
  /** As the caller gave it; null when they chose by aspect ratio. */
  size: string | null;
  /**
   * The size to send the provider as is: one of the model's own `sizes`. Any other size is
   * sent as the aspect ratio and resolution it was matched to, which each adapter turns into
   * its provider's terms (a provider takes only its own sizes).
   */
  exactSize: string | null;
  /** A public https URL of the first frame; null for text-to-video. */
  imageUrl: string | null;
}

export interface VideoRequestOptions {
  /** Development only (as SVC_WEBHOOK_ALLOW_PRIVATE for webhooks): http and private hosts let through. */
  allowPrivateUrls?: boolean;
}

const invalid = (message: string, param: string) => DomainError.invalid(message, param);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const given = (v: unknown) => v !== undefined && v !== null;

/**
 * The request normalized, or a DomainError (invalid) naming the field at fault. `model` is the catalog
 * model the request's `model` resolved to (presets, suffixes and retirement already applied).
 */
export function validateVideoRequest(body: unknown, model: CatalogModel, options: VideoRequestOptions = {}): VideoRequest {
  if (!isObject(body)) throw DomainError.invalid('The request body must be a JSON object.');
  if (model.type !== 'video' || model.video === null) throw invalid(`${model.id} is not a video model; see GET /v1/models?type=video.`, 'model');
  const caps = model.video;
  const prompt = promptOf(body.prompt);
  const seconds = secondsOf(body.seconds, caps);
  const { aspectRatio, resolution, size, exactSize } = shapeOf(body, caps);
  // OpenAI's SDKs send the first frame as `input_reference`; silently ignored, it would turn an
  // image-to-video request into text-to-video at full price.
  if (given(body.input_reference))
    throw invalid('input_reference is not supported here: give the first frame as image_url (a public https URL).', 'input_reference');
  const imageUrl = imageUrlOf(body.image_url, model, options);
  return { model: model.id, prompt, seconds, aspectRatio, resolution, size, exactSize, imageUrl };
}

/**
 * What `seconds` of the model cost at `prices` (the model's list prices unless a route's are
 * given), exact in nano-USD: the hold, and the video object's `usage.estimated_cost`.
 */
export function estimatedCostNano(seconds: number, model: CatalogModel, prices: ModelPrices = model.prices): Nano {
  if (!Number.isInteger(seconds) || seconds <= 0) throw new RangeError(`seconds must be a positive whole number, not ${seconds}`);
  // The catalog refuses a video model without it; anything else reaching here is a bug, not free.
  if (prices.perSecond === null) throw new Error(`${model.id} has no per-second price`);
  return BigInt(seconds) * prices.perSecond;
}

function promptOf(value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '') throw invalid('prompt is required: a non-empty string describing the video.', 'prompt');
  // Characters as people count them (code points), not UTF-16 units.
  const length = [...value].length;
  if (length > MAX_VIDEO_PROMPT_CHARACTERS) throw invalid(`prompt has ${length} characters; at most ${MAX_VIDEO_PROMPT_CHARACTERS}.`, 'prompt');
  return value;
}

function secondsOf(value: unknown, caps: VideoCapabilities): number {
  const durations = caps.durations;
  if (!given(value)) return Math.min(...durations);
  const choices = durations.join(', ');
  // OpenAI's wire sends "4" (a string enum); other SDKs send 4.
  const seconds = typeof value === 'number' ? value : typeof value === 'string' && /^[0-9]{1,6}$/.test(value.trim()) ? Number(value.trim()) : NaN;
  if (!Number.isInteger(seconds)) throw invalid(`seconds must be a whole number of seconds (a number or a numeric string), one of ${choices}.`, 'seconds');
  if (!durations.includes(seconds)) throw invalid(`This model makes clips of ${choices} seconds, not ${seconds}.`, 'seconds');
  return seconds;
}

/**
 * The clip's shape: `aspect_ratio` (with `resolution`), or `size` (which fixes both), never
 * both. A size maps to the model's nearest aspect ratio; its resolution is the model's label
 * `<shorter side>p` when it has one.
 */
function shapeOf(body: Record<string, unknown>, caps: VideoCapabilities): Pick<VideoRequest, 'aspectRatio' | 'resolution' | 'size' | 'exactSize'> {
  const ratioGiven = given(body.aspect_ratio);
  const sizeGiven = given(body.size);
  const resolutionGiven = given(body.resolution);
  if (ratioGiven && sizeGiven) throw invalid('Give aspect_ratio or size, not both: a size fixes the aspect ratio.', 'size');

  let resolution = caps.resolutions[0] ?? null;
  if (resolutionGiven) {
    if (caps.resolutions.length === 0) throw invalid('This model takes no resolution.', 'resolution');
    if (typeof body.resolution !== 'string' || !caps.resolutions.includes(body.resolution)) {
      throw invalid(`resolution must be one of ${caps.resolutions.join(', ')}.`, 'resolution');
    }
    resolution = body.resolution;
  }

  if (sizeGiven) {
    const size = body.size;
    const takesSize = caps.sizes.length > 0 || caps.aspectRatios.length > 0;
    if (!takesSize) throw invalid('This model takes no size or aspect ratio.', 'size');
    if (typeof size !== 'string' || parseVideoSize(size) === null) throw invalid('size must be <width>x<height> in pixels, such as "1280x720".', 'size');
    if (caps.sizes.length > 0 && !caps.sizes.includes(size)) throw invalid(`size must be one of ${caps.sizes.join(', ')}.`, 'size');
    const aspectRatio = aspectRatioOfSize(size, caps.aspectRatios);
    if (aspectRatio === null) throw invalid(`size ${size} has none of this model's aspect ratios (${caps.aspectRatios.join(', ')}).`, 'size');
    const [w, h] = parseVideoSize(size)!;
    const implied = `${Math.min(w, h)}p`;
    if (resolutionGiven && resolution !== implied)
      throw invalid(`resolution ${resolution} contradicts size ${size} (${implied}); give one of them.`, 'resolution');
    return { aspectRatio, resolution: caps.resolutions.includes(implied) ? implied : null, size, exactSize: caps.sizes.includes(size) ? size : null };
  }

  if (ratioGiven) {
    if (caps.aspectRatios.length === 0) throw invalid('This model takes no aspect_ratio.', 'aspect_ratio');
    if (typeof body.aspect_ratio !== 'string' || !caps.aspectRatios.includes(body.aspect_ratio)) {
      throw invalid(`aspect_ratio must be one of ${caps.aspectRatios.join(', ')}.`, 'aspect_ratio');
    }
    return { aspectRatio: body.aspect_ratio, resolution, size: null, exactSize: null };
  }
  return { aspectRatio: caps.aspectRatios[0] ?? null, resolution, size: null, exactSize: null };
}

function imageUrlOf(value: unknown, model: CatalogModel, options: VideoRequestOptions): string | null {
  if (!given(value)) return null;
  if (!model.video!.imageToVideo) throw invalid(`${model.id} makes videos from text only: it takes no image_url.`, 'image_url');
  try {
    return checkOutboundUrl(value, { allowPrivate: options.allowPrivateUrls ?? false }).href;
  } catch (err) {
    if (err instanceof OutboundRefused) throw invalid(`image_url must be a public https URL of the first frame: ${err.message}.`, 'image_url');
    throw err;
  }
}
