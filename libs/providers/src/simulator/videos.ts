/**
 * The simulated video model, behind two wire formats that share its jobs and its clips:
 *
 * OpenAI's Videos API (WIRE-FORMATS 2), with OpenAI bodies for errors:
 * - `POST /v1/videos`: JSON `{prompt, model?, seconds?, size?, input_reference?: {image_url} |
 *   {file_id}}`, or multipart/form-data with the same fields and `input_reference` as a file.
 *   As OpenAI: `prompt` required (1-32000 characters); `seconds` the STRING "4", "8" or "12"
 *   (default "4"); `size` one of OPENAI_SIZES (default 720x1280); any other field is a 400
 *   `unknown_parameter`. Answers the Video object, status `queued`.
 * - `GET /v1/videos/{id}`: the Video object, with the header `openai-poll-after-ms` (openai-python's
 *   `videos.poll()` sleeps that long; WIRE-FORMATS 2 recommends it).
 * - `DELETE /v1/videos/{id}`: `{id, object: "video.deleted", deleted: true}`; the job is gone
 *   (404) from then on. OpenAI has no cancel, and WIRE-FORMATS 2 says it deletes only finished
 *   videos; the simulator also deletes a job still running, which stops it, so a gateway that
 *   cancels by DELETE can be tested.
 * - `GET /v1/videos/{id}/content?variant=video|thumbnail`: the MP4 (`video/mp4`) or the poster;
 *   404 `video_not_ready` until the job has completed. OpenAI's poster is WebP; this one is a
 *   JPEG (`image/jpeg`). `spritesheet` is a 400.
 *
 * A router's API, in the manner of OpenRouter's and fal's (the `videorouter` adapter's), under
 * the same `/v1` so that one base URL serves both adapters; errors as OpenAI bodies too:
 * - `POST /v1/videos/generations`: JSON `{model, prompt, duration?, aspect_ratio?, resolution?,
 *   image_url?}`; `duration` a whole number of seconds from 1 to 20 (default 5), `aspect_ratio`
 *   one of ROUTER_ASPECT_RATIOS (default 16:9), `resolution` one of 480p, 720p, 1080p (default
 *   720p); null is taken as absent, any other field is a 400. Answers the generation object:
 *   `{id, object: "video.generation", model, status, progress, created_at, completed_at,
 *   duration, aspect_ratio, resolution, error, usage, video_url, thumbnail_url}`.
 * - `GET /v1/videos/generations/{id}`: the same object.
 * - `POST /v1/videos/generations/{id}/cancel`: the object, `cancelled` unless the job had
 *   already finished (then as it was: a cancel is never an error).
 * - `usage` is null until the job ends; then `{cost}` in USD: duration x the resolution's price a
 *   second (ROUTER_PRICE_MICROS_PER_SECOND: $0.05 at 480p, $0.10 at 720p, $0.30 at 1080p) when
 *   completed, 0 when it failed or was cancelled. `video_url` and `thumbnail_url` are set once
 *   completed: `<simulator>/v1/files/videos/<id>.mp4` and `.jpg`, served without a key, like a
 *   signed CDN link.
 *
 * Timing: a job is `queued` for the first fifth of `videoJobMs` (a simulator option, 2 s by
 * default), then `in_progress` with progress floor(100 x elapsed / videoJobMs), then
 * `completed` at progress 100, all read from the simulator's clock. Directives in the prompt:
 * `fail: true` fails the job once it is half done (status `failed`, error `{code:
 * "video_generation_failed", message}`); `stall: true` keeps it `in_progress` (progress at most
 * 99) until cancelled; `fail: <status>`, `fail_models`, `delay_ms` act on the create request as
 * on every route.
 *
 * Clips are real files: an H.264 MP4 of the duration asked for, at a small picture of the ratio
 * asked for (./mp4.ts), and a JPEG poster (./jpeg.ts). Their colours come from a hash of the
 * request, so the same request gets the same bytes.
 */
import { createHash } from 'node:crypto';
import { isRecord } from '../json';
import { parseDirectives, type SimDirectives } from './directives';
import { SimError } from './http';
import { encodeJpeg, type Rgb } from './jpeg';
import { encodeClip, pictureSize, rgbToYuv601Limited } from './mp4';
import type { MultipartForm } from './multipart';

export const OPENAI_SECONDS = ['4', '8', '12'] as const;
export const OPENAI_SIZES = ['720x1280', '1280x720', '1024x1792', '1792x1024'] as const;
export const ROUTER_ASPECT_RATIOS = ['16:9', '9:16', '1:1', '4:3', '3:4', '21:9'] as const;
/** Whole micro-USD, so that a cost is exact before it becomes a JSON number. */
export const ROUTER_PRICE_MICROS_PER_SECOND: Readonly<Record<string, number>> = { '480p': 50_000, '720p': 100_000, '1080p': 300_000 };
const ROUTER_MAX_SECONDS = 20;
const ROUTER_DEFAULT_SECONDS = 5;
const MAX_PROMPT_CHARS = 32_000;
/** How long OpenAI keeps a finished video's assets downloadable (`expires_at`). */
const ASSETS_KEPT_SECONDS = 24 * 3600;
const QUEUED_SHARE = 0.2;
const FAIL_AT_SHARE = 0.5;

export const VIDEO_FILE = /^\/v1\/files\/videos\/([A-Za-z0-9_]+)\.(mp4|jpg)$/;

export type VideoApi = 'openai' | 'router';
export type VideoStatus = 'queued' | 'in_progress' | 'completed' | 'failed' | 'cancelled';

export interface VideoJob {
  id: string;
  api: VideoApi;
  model: string;
  /** As sent, `#sim` lines included: OpenAI echoes it. */
  prompt: string;
  seconds: number;
  /** OpenAI's `size`; null on the router API. */
  size: string | null;
  /** The router's `aspect_ratio` and `resolution`; null on OpenAI's API. */
  aspectRatio: string | null;
  resolution: string | null;
  /** The ratio of the clip's picture. */
  ratio: { width: number; height: number };
  /** What the colours are hashed from: the request without its `#sim` lines. */
  seed: string;
  createdMs: number;
  directives: SimDirectives;
  /** When a cancel (or an OpenAI delete) stopped it while it was running. */
  cancelledMs: number | null;
  media?: { mp4: Buffer; jpeg: Buffer };
}

export interface VideoState {
  status: VideoStatus;
  progress: number;
  /** When it reached a final state, or null. */
  endedMs: number | null;
  error: { code: string; message: string } | null;
}

export const FAILED_ERROR = { code: 'video_generation_failed', message: 'simulated failure (#sim fail): the clip could not be generated' };

/** The job's state at `now`: everything follows from its creation time, its directives and a cancel. */
export function videoState(job: VideoJob, jobMs: number, now: number): VideoState {
  const at = (ms: number): VideoState => {
    const elapsed = ms - job.createdMs;
    if (job.directives.fail === true && elapsed >= jobMs * FAIL_AT_SHARE) {
      return {
        status: 'failed',
        progress: progressAt(jobMs * FAIL_AT_SHARE, jobMs),
        endedMs: job.createdMs + Math.round(jobMs * FAIL_AT_SHARE),
        error: FAILED_ERROR,
      };
    }
    if (!job.directives.stall && elapsed >= jobMs) return { status: 'completed', progress: 100, endedMs: job.createdMs + jobMs, error: null };
    if (elapsed < jobMs * QUEUED_SHARE) return { status: 'queued', progress: 0, endedMs: null, error: null };
    return { status: 'in_progress', progress: progressAt(elapsed, jobMs), endedMs: null, error: null };
  };
  if (job.cancelledMs !== null) {
    const before = at(job.cancelledMs);
    return before.endedMs === null ? { ...before, status: 'cancelled', endedMs: job.cancelledMs } : before;
  }
  return at(now);
}

/** A job of no duration (`videoJobMs: 0`) is as far along as a job can be without completing. */
const progressAt = (elapsed: number, jobMs: number) => (jobMs > 0 ? Math.min(99, Math.max(1, Math.floor((100 * elapsed) / jobMs))) : 99);

/** The jobs of both APIs, the oldest dropped past `capacity` (a Map keeps insertion order). */
export class VideoStore {
  private readonly jobs = new Map<string, VideoJob>();
  constructor(private readonly capacity: number) {}

  add(job: VideoJob): void {
    this.jobs.set(job.id, job);
    if (this.jobs.size > this.capacity) this.jobs.delete(this.jobs.keys().next().value as string);
  }

  /** The job of that API, else a 404 (another API's id is as unknown as a wrong one). */
  get(id: string, api: VideoApi): VideoJob {
    const job = this.jobs.get(id);
    if (!job || job.api !== api) throw new SimError(404, `video ${id} not found`, 'video_id', 'video_not_found');
    return job;
  }

  delete(id: string): void {
    this.jobs.delete(id);
  }
}

/** Stops a running job; a finished one stays as it is. */
export function cancelVideo(job: VideoJob, jobMs: number, now: number): void {
  if (job.cancelledMs === null && videoState(job, jobMs, now).endedMs === null) job.cancelledMs = now;
}

/** The clip and its poster, rendered once per job. */
export function videoMedia(job: VideoJob): { mp4: Buffer; jpeg: Buffer } {
  if (job.media) return job.media;
  const hash = createHash('sha256').update(job.seed).digest();
  const top: Rgb = [hash[0], hash[1], hash[2]];
  const bottom: Rgb = [hash[3], hash[4], hash[5]];
  const { width, height } = pictureSize(job.ratio.width, job.ratio.height);
  const colourAt = (y: number): Rgb => {
    const t = y / Math.max(height - 1, 1);
    return [0, 1, 2].map((i) => Math.round(top[i] + (bottom[i] - top[i]) * t)) as unknown as Rgb;
  };
  const mp4 = encodeClip({
    width,
    height,
    seconds: job.seconds,
    background: (y) => rgbToYuv601Limited(...colourAt(y)),
    bar: rgbToYuv601Limited(255, 255, 255),
  });
  const jpeg = encodeJpeg(width, height, (_, by) => colourAt(Math.min(height - 1, by * 8 + 4)));
  job.media = { mp4, jpeg };
  return job.media;
}

/* ------------------------------------------------------------------ OpenAI */

const OPENAI_FIELDS = new Set(['model', 'prompt', 'seconds', 'size', 'input_reference']);
const quoted = (values: readonly string[]) =>
  `${values
    .slice(0, -1)
    .map((v) => `'${v}'`)
    .join(', ')}, and '${values.at(-1)}'`;

/** What an OpenAI-style 400 names a value's JSON type. */
function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'an integer' : 'a decimal';
  if (typeof value === 'object') return 'an object';
  return `a ${typeof value === 'boolean' ? 'boolean' : typeof value}`;
}

function oneOf<T extends string>(value: unknown, allowed: readonly T[], param: string, fallback: T): T {
  if (value === undefined) return fallback;
  if (typeof value !== 'string') {
    throw new SimError(
      400,
      `Invalid type for '${param}': expected one of ${quoted(allowed).replace(', and', ', or')}, but got ${typeName(value)} instead.`,
      param,
      'invalid_type',
    );
  }
  if (!allowed.includes(value as T)) throw new SimError(400, `Invalid value: '${value}'. Supported values are: ${quoted(allowed)}.`, param, 'invalid_value');
  return value as T;
}

export interface OpenAiVideoRequest {
  model: string;
  prompt: string;
  seconds: (typeof OPENAI_SECONDS)[number];
  size: (typeof OPENAI_SIZES)[number];
  /** The reference image's URL, a file id, or the uploaded file's hash: only hashed in. */
  reference: string | null;
  directives: SimDirectives;
}

/** A JSON body, checked in OpenAI's words. */
export function parseOpenAiVideoJson(body: unknown): OpenAiVideoRequest {
  if (!isRecord(body)) badBody();
  const fields = body as Record<string, unknown>;
  checkFields(fields);
  return openAiRequest(fields, referenceOf(fields.input_reference));
}

/** A multipart form: the same fields as text, `input_reference` as a file. */
export function parseOpenAiVideoForm({ fields, file }: MultipartForm): OpenAiVideoRequest {
  const flat: Record<string, unknown> = Object.fromEntries(Object.entries(fields).map(([name, values]) => [name, values.at(-1)]));
  checkFields(flat);
  if (flat.input_reference !== undefined)
    throw new SimError(400, "Invalid 'input_reference': in a multipart body it must be a file.", 'input_reference', 'invalid_type');
  if (file && file.field !== 'input_reference') throw new SimError(400, `Unknown parameter: '${file.field}'.`, file.field, 'unknown_parameter');
  return openAiRequest(flat, file && createHash('sha256').update(file.bytes).digest('hex'));
}

const badBody = (): never => {
  throw new SimError(400, 'request body must be a JSON object');
};

function checkFields(body: Record<string, unknown>): void {
  for (const field of Object.keys(body)) {
    if (!OPENAI_FIELDS.has(field)) throw new SimError(400, `Unknown parameter: '${field}'.`, field, 'unknown_parameter');
  }
}

function openAiRequest(body: Record<string, unknown>, reference: string | null): OpenAiVideoRequest {
  if (body.prompt === undefined) throw new SimError(400, "Missing required parameter: 'prompt'.", 'prompt', 'missing_required_parameter');
  if (typeof body.prompt !== 'string')
    throw new SimError(400, `Invalid type for 'prompt': expected a string, but got ${typeName(body.prompt)} instead.`, 'prompt', 'invalid_type');
  if (body.prompt.length < 1 || body.prompt.length > MAX_PROMPT_CHARS) {
    throw new SimError(400, `Invalid 'prompt': string length must be between 1 and ${MAX_PROMPT_CHARS}.`, 'prompt', 'invalid_value');
  }
  const model = body.model ?? 'sora-2';
  if (typeof model !== 'string')
    throw new SimError(400, `Invalid type for 'model': expected a string, but got ${typeName(model)} instead.`, 'model', 'invalid_type');
  if (model === '') throw new SimError(400, "Invalid 'model': empty string.", 'model', 'invalid_value');
  const seconds = oneOf(body.seconds, OPENAI_SECONDS, 'seconds', '4');
  const size = oneOf(body.size, OPENAI_SIZES, 'size', '720x1280');
  return { model, prompt: body.prompt, seconds, size, reference, directives: parseDirectives(body.prompt).directives };
}

/** `{image_url}` or `{file_id}`, exactly one (WIRE-FORMATS 2). */
function referenceOf(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  const keys = isRecord(value) ? Object.keys(value) : [];
  const key = keys.length === 1 && (keys[0] === 'image_url' || keys[0] === 'file_id') ? keys[0] : null;
  const reference = key && (value as Record<string, unknown>)[key];
  if (typeof reference !== 'string' || reference === '') {
    throw new SimError(400, "Invalid 'input_reference': expected an object with exactly one of 'image_url' or 'file_id'.", 'input_reference', 'invalid_value');
  }
  return reference;
}

export function openAiVideoJob(request: OpenAiVideoRequest, id: string, createdMs: number): VideoJob {
  const [width, height] = request.size.split('x').map(Number);
  const text = parseDirectives(request.prompt).text;
  return {
    id,
    api: 'openai',
    model: request.model,
    prompt: request.prompt,
    seconds: Number(request.seconds),
    size: request.size,
    aspectRatio: null,
    resolution: null,
    ratio: { width, height },
    seed: JSON.stringify([request.model, text, request.seconds, request.size, request.reference]),
    createdMs,
    directives: request.directives,
    cancelledMs: null,
  };
}

const unixSeconds = (ms: number) => Math.floor(ms / 1000);

/** OpenAI's Video object (WIRE-FORMATS 2). A cancelled job is deleted at once, so OpenAI's statuses suffice. */
export function openAiVideoObject(job: VideoJob, state: VideoState) {
  const completed = state.status === 'completed' ? unixSeconds(state.endedMs!) : null;
  return {
    id: job.id,
    object: 'video',
    model: job.model,
    status: state.status,
    progress: state.progress,
    created_at: unixSeconds(job.createdMs),
    completed_at: state.endedMs === null ? null : unixSeconds(state.endedMs),
    expires_at: completed === null ? null : completed + ASSETS_KEPT_SECONDS,
    prompt: job.prompt,
    seconds: String(job.seconds),
    size: job.size,
    remixed_from_video_id: null,
    error: state.error,
  };
}

/** The `variant` query parameter of GET /videos/{id}/content. */
export function contentVariant(query: Record<string, string>): 'video' | 'thumbnail' {
  const variant = query.variant ?? 'video';
  if (variant !== 'video' && variant !== 'thumbnail') {
    throw new SimError(400, `Invalid value: '${variant}'. The simulator serves 'video' and 'thumbnail'.`, 'variant', 'invalid_value');
  }
  return variant;
}

export function notReady(job: VideoJob, state: VideoState): SimError {
  return new SimError(404, `video ${job.id} has no content: its status is ${state.status}`, null, 'video_not_ready');
}

/* ------------------------------------------------------------------ router */

const ROUTER_FIELDS = new Set(['model', 'prompt', 'duration', 'aspect_ratio', 'resolution', 'image_url']);

export interface RouterVideoRequest {
  model: string;
  prompt: string;
  duration: number;
  aspectRatio: (typeof ROUTER_ASPECT_RATIOS)[number];
  resolution: string;
  imageUrl: string | null;
  directives: SimDirectives;
}

export function parseRouterVideoRequest(body: unknown): RouterVideoRequest {
  if (!isRecord(body)) badBody();
  const given = Object.fromEntries(Object.entries(body as Record<string, unknown>).filter(([, v]) => v !== null));
  for (const field of Object.keys(given)) if (!ROUTER_FIELDS.has(field)) throw new SimError(400, `unknown field ${field}`, field, 'unknown_parameter');
  if (typeof given.model !== 'string' || given.model === '') throw new SimError(400, 'model is required', 'model', 'missing_required_parameter');
  if (typeof given.prompt !== 'string' || given.prompt.trim() === '') throw new SimError(400, 'prompt must be a non-empty string', 'prompt', 'invalid_value');
  const duration = given.duration ?? ROUTER_DEFAULT_SECONDS;
  if (!Number.isInteger(duration) || (duration as number) < 1 || (duration as number) > ROUTER_MAX_SECONDS) {
    throw new SimError(400, `duration must be a whole number of seconds from 1 to ${ROUTER_MAX_SECONDS}`, 'duration', 'invalid_value');
  }
  const aspectRatio = given.aspect_ratio ?? '16:9';
  if (!ROUTER_ASPECT_RATIOS.includes(aspectRatio as never)) {
    throw new SimError(400, `aspect_ratio must be one of ${ROUTER_ASPECT_RATIOS.join(', ')}`, 'aspect_ratio', 'invalid_value');
  }
  const resolution = given.resolution ?? '720p';
  if (typeof resolution !== 'string' || !Object.hasOwn(ROUTER_PRICE_MICROS_PER_SECOND, resolution)) {
    throw new SimError(400, `resolution must be one of ${Object.keys(ROUTER_PRICE_MICROS_PER_SECOND).join(', ')}`, 'resolution', 'invalid_value');
  }
  const imageUrl = given.image_url ?? null;
  if (imageUrl !== null && (typeof imageUrl !== 'string' || !/^(https?:|data:image\/)/.test(imageUrl))) {
    throw new SimError(400, 'image_url must be an http(s) or data URL', 'image_url', 'invalid_value');
  }
  return {
    model: given.model,
    prompt: given.prompt,
    duration: duration as number,
    aspectRatio: aspectRatio as RouterVideoRequest['aspectRatio'],
    resolution,
    imageUrl: imageUrl as string | null,
    directives: parseDirectives(given.prompt).directives,
  };
}

export function routerVideoJob(request: RouterVideoRequest, id: string, createdMs: number): VideoJob {
  const [width, height] = request.aspectRatio.split(':').map(Number);
  const text = parseDirectives(request.prompt).text;
  return {
    id,
    api: 'router',
    model: request.model,
    prompt: request.prompt,
    seconds: request.duration,
    size: null,
    aspectRatio: request.aspectRatio,
    resolution: request.resolution,
    ratio: { width, height },
    seed: JSON.stringify([request.model, text, request.duration, request.aspectRatio, request.resolution, request.imageUrl]),
    createdMs,
    directives: request.directives,
    cancelledMs: null,
  };
}

/** What a completed clip costs: duration x the resolution's price a second, exact (whole micro-USD, then one division). */
export function routerCost(job: VideoJob): number {
  return (job.seconds * ROUTER_PRICE_MICROS_PER_SECOND[job.resolution!]) / 1_000_000;
}

export function routerVideoObject(job: VideoJob, state: VideoState, origin: string) {
  const done = state.status === 'completed';
  return {
    id: job.id,
    object: 'video.generation',
    model: job.model,
    status: state.status,
    progress: state.progress,
    created_at: unixSeconds(job.createdMs),
    completed_at: state.endedMs === null ? null : unixSeconds(state.endedMs),
    duration: job.seconds,
    aspect_ratio: job.aspectRatio,
    resolution: job.resolution,
    error: state.error,
    usage: state.endedMs === null ? null : { cost: done ? routerCost(job) : 0 },
    video_url: done ? `${origin}/v1/files/videos/${job.id}.mp4` : null,
    thumbnail_url: done ? `${origin}/v1/files/videos/${job.id}.jpg` : null,
  };
}
