/**
 * Spec 4.15 on OpenAI's Videos API (WIRE-FORMATS 2): `POST /videos` as JSON, the answer's Video
 * object as a VideoJob. OpenAI reports no cost (costNano null) and no URL.
 */
import { mapParameters } from '../operations';
import type { BinaryResult, Operation, VideoJob, VideoJobRequest, VideoVariant } from '../provider';
import { ProviderError } from '../provider-error';
import { getBinaryUpstream, sendJsonUpstream } from '../transport';
import { givenFields, videoJobFrom } from '../video';
import { withoutJsonBody, type OpenAiConnection } from './connection';
import { OPENAI_PARAMETERS } from './parameters';

async function create(upstream: OpenAiConnection, body: VideoJobRequest, signal?: AbortSignal): Promise<VideoJob> {
  const payload = mapParameters(OPENAI_PARAMETERS.video, givenFields(body));
  const { json, headers } = await sendJsonUpstream('POST', `${upstream.baseUrl}/videos`, upstream.headers, payload, upstream.timeoutMs, signal);
  return openAiVideoJob(json, headers);
}

async function get(upstream: OpenAiConnection, id: string, signal?: AbortSignal): Promise<VideoJob> {
  const { json, headers } = await sendJsonUpstream('GET', videoUrl(upstream, id), upstream.headers, undefined, upstream.timeoutMs, signal);
  return openAiVideoJob(json, headers);
}

/**
 * OpenAI has no cancel: DELETE /videos/{id} is the nearest, and it removes the video as well
 * (WIRE-FORMATS 2 says OpenAI deletes only finished ones; an upstream that refuses to delete a
 * running job makes this a ProviderError). A 404 means it is already gone, which is what a
 * repeated cancel finds: not an error.
 */
async function cancel(upstream: OpenAiConnection, id: string, signal?: AbortSignal): Promise<void> {
  try {
    await sendJsonUpstream('DELETE', videoUrl(upstream, id), upstream.headers, undefined, upstream.timeoutMs, signal);
  } catch (error) {
    if (error instanceof ProviderError && error.kind === 'http' && error.status === 404) return;
    throw error;
  }
}

/** `GET /videos/{id}/content?variant=`; OpenAI's SDK asks with `Accept: application/binary`. */
function content(upstream: OpenAiConnection, id: string, variant: VideoVariant, signal?: AbortSignal): Promise<BinaryResult> {
  const headers = { ...withoutJsonBody(upstream), accept: 'application/binary' };
  return getBinaryUpstream(`${videoUrl(upstream, id)}/content?variant=${variant}`, headers, upstream.timeoutMs, signal);
}

function videoUrl(upstream: OpenAiConnection, id: string): string {
  return `${upstream.baseUrl}/videos/${encodeURIComponent(id)}`;
}

/** OpenAI's Video object: `{id, object: "video", status, progress, error: {code, message} | null, ...}`. */
function openAiVideoJob(json: unknown, headers: Parameters<typeof videoJobFrom>[1]): VideoJob {
  return videoJobFrom(json, headers, 'OpenAI', () => ({}));
}

export const video: Operation<'video', OpenAiConnection> = {
  parameters: OPENAI_PARAMETERS.video,
  calls: { video_create: create, video_get: get, video_cancel: cancel, video_content: content },
};
