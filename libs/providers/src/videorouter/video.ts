import { isRecord } from '../json';
import { mapParameters, type ParameterConfig } from '../operations';
import type { BinaryResult, Operation, VideoJob, VideoJobRequest, VideoVariant } from '../provider';
import { ProviderError } from '../provider-error';
import type { SingleOperationConnection } from '../single-operation';
import { getBinaryUpstream, sendJsonUpstream } from '../transport';
import { givenFields, videoJobFrom } from '../video';

const greatestCommonDivisor = (a: number, b: number): number => (b === 0 ? a : greatestCommonDivisor(b, a % b));

/** `1280x720` as the router's terms: `16:9` and `720p` (the short side). Not a `WxH`: nothing. */
function ratioAndResolution(size: unknown): { aspect_ratio: string; resolution: string } | undefined {
  const match = typeof size === 'string' ? /^(\d+)x(\d+)$/.exec(size) : null;
  if (!match) return undefined;
  const [width, height] = [Number(match[1]), Number(match[2])];
  const divisor = greatestCommonDivisor(width, height) || 1;
  return { aspect_ratio: `${width / divisor}:${height / divisor}`, resolution: `${Math.min(width, height)}p` };
}

/**
 * The router takes seconds as `duration` (a number) and the picture as `aspect_ratio` and
 * `resolution`; a `size` (`WxH`) fills in whichever of the two was not given.
 */
export const VIDEOROUTER_VIDEO_PARAMETERS: ParameterConfig<'video'> = {
  model: 'model',
  prompt: 'prompt',
  seconds: 'duration',
  size: (value, body) => {
    const derived = ratioAndResolution(value);
    if (!derived) return undefined;
    return { ...(body.aspect_ratio == null && { aspect_ratio: derived.aspect_ratio }), ...(body.resolution == null && { resolution: derived.resolution }) };
  },
  aspect_ratio: 'aspect_ratio',
  resolution: 'resolution',
  image_url: 'image_url',
};

/**
 * A video aggregator's API in the manner of OpenRouter's and fal's, which, unlike OpenAI,
 * reports what each clip cost:
 *
 * - `POST {base}/videos/generations` `{model, prompt, duration, aspect_ratio?, resolution?,
 *   image_url?}` -> the generation object `{id, status, progress, error, usage: {cost} | null,
 *   video_url, thumbnail_url, ...}`, status `queued`, `in_progress`, `completed`, `failed` or
 *   `cancelled`;
 * - `GET {base}/videos/generations/{id}` -> the same object;
 * - `POST {base}/videos/generations/{id}/cancel` -> the same object; a job already finished
 *   stays as it was.
 *
 * `usage.cost` (USD) becomes costNano once the job has completed (spec 3.1 bills the actual
 * provider cost then, and nothing for a failed clip). The clip and its poster are fetched from
 * `video_url` / `thumbnail_url` WITHOUT the key: they point at storage, not at the router, and
 * the key must not travel wherever a provider points (as transport.ts refuses redirects).
 */
type Router = SingleOperationConnection;

function create(upstream: Router, body: VideoJobRequest, signal?: AbortSignal): Promise<VideoJob> {
  const payload = mapParameters(VIDEOROUTER_VIDEO_PARAMETERS, givenFields(body));
  return job(upstream, 'POST', `${upstream.baseUrl}/videos/generations`, payload, signal);
}

function get(upstream: Router, id: string, signal?: AbortSignal): Promise<VideoJob> {
  return job(upstream, 'GET', jobUrl(upstream, id), undefined, signal);
}

async function cancel(upstream: Router, id: string, signal?: AbortSignal): Promise<void> {
  await job(upstream, 'POST', `${jobUrl(upstream, id)}/cancel`, undefined, signal);
}

/** The job's `video_url` or `thumbnail_url`, fetched; a 404 ProviderError until the job has completed. */
async function content(upstream: Router, id: string, variant: VideoVariant, signal?: AbortSignal): Promise<BinaryResult> {
  const started = performance.now();
  const { json } = await sendJsonUpstream('GET', jobUrl(upstream, id), upstream.headers, undefined, upstream.timeoutMs, signal);
  const current = routerVideoJob(json, undefined);
  const url = isRecord(json) ? json[variant === 'video' ? 'video_url' : 'thumbnail_url'] : undefined;
  if (current.status !== 'completed' || typeof url !== 'string' || url === '') {
    throw new ProviderError({ kind: 'http', status: 404, message: `video ${id} has no ${variant} to download (status ${current.status})`, upstreamBody: json });
  }
  const clip = await getBinaryUpstream(url, {}, upstream.timeoutMs, signal);
  return { ...clip, latencyMs: performance.now() - started };
}

async function job(upstream: Router, method: 'GET' | 'POST', url: string, payload: object | undefined, signal: AbortSignal | undefined): Promise<VideoJob> {
  const { json, headers } = await sendJsonUpstream(method, url, upstream.headers, payload, upstream.timeoutMs, signal);
  return routerVideoJob(json, headers);
}

function jobUrl(upstream: Router, id: string): string {
  return `${upstream.baseUrl}/videos/generations/${encodeURIComponent(id)}`;
}

function routerVideoJob(json: unknown, headers: Parameters<typeof videoJobFrom>[1]): VideoJob {
  return videoJobFrom(json, headers, 'video router', (job) => ({
    costUsd: job.status === 'completed' && isRecord(job.usage) ? job.usage.cost : undefined,
    url: job.video_url,
  }));
}

export const video: Operation<'video', SingleOperationConnection> = {
  parameters: VIDEOROUTER_VIDEO_PARAMETERS,
  calls: { video_create: create, video_get: get, video_cancel: cancel, video_content: content },
};
