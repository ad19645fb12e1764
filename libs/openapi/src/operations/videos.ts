import { bool, constant, cursorList, obj, oneOfValues, ref, str } from '../json-schema';
import { limitQuery, afterQuery, orderQuery, gen } from './shared';
import type { OperationDescription } from './types';

/** Spec 4.15: videos. */
export const VIDEO_OPERATIONS: Record<string, OperationDescription> = {
  'POST /v1/videos': {
    summary: 'Start a video generation',
    description: 'Spec 4.15, 3.1. JSON or a multipart form; answers the video `queued`.',
    tag: 'Videos',
    access: 'full',
    billed: true,
    body: { schema: ref('VideoRequest'), multipart: true, json: true },
    ok: { schema: ref('Video'), headers: gen },
    errors: [402, 403, 404, 409, 422, 429, 502, 503, 504],
  },
  'GET /v1/videos': {
    summary: 'List videos',
    tag: 'Videos',
    access: 'any',
    query: [limitQuery(100, 20), afterQuery, orderQuery],
    ok: { schema: cursorList(ref('Video')) },
  },
  'GET /v1/videos/:id': {
    summary: 'Retrieve a video',
    tag: 'Videos',
    access: 'any',
    ok: { schema: ref('Video'), headers: { 'openai-poll-after-ms': 'while not final', 'retry-after': 'while not final' } },
    errors: [404],
  },
  'DELETE /v1/videos/:id': {
    summary: 'Cancel or delete a video',
    description: 'Queued or in progress: cancels it and answers the video; ended: deletes it and its clip.',
    tag: 'Videos',
    access: 'full',
    ok: { schema: { anyOf: [ref('Video'), obj({ id: str(), object: constant('video.deleted'), deleted: bool() })] } },
    errors: [403, 404],
  },
  'GET /v1/videos/:id/content': {
    summary: 'Redirect to the MP4 (or its poster)',
    description: "Spec 4.15: 302 to the signed URL of the file (the video object's `url`), good for an hour.",
    tag: 'Videos',
    access: 'any',
    query: [{ name: 'variant', schema: oneOfValues(['video', 'thumbnail']) }],
    ok: { status: 302, description: 'Redirect to the signed file URL', headers: { location: 'the signed URL of the file, no key needed, good for an hour' } },
    errors: [404, 409],
  },
  'GET /v1/videos/:id/file': {
    summary: 'The MP4 (or its poster) at a signed URL',
    description: 'No key: the signature (workspace, video, variant, expiry) is the secret; an altered or expired URL is 403. Usable as `<video src>`.',
    tag: 'Videos',
    access: 'none',
    query: [
      { name: 'variant', schema: oneOfValues(['video', 'thumbnail']) },
      { name: 'workspace', schema: str() },
      { name: 'expires', schema: str('unix seconds') },
      { name: 'signature', schema: str() },
    ],
    ok: { content: { 'video/mp4': str(), 'image/jpeg': str(), 'image/png': str(), 'image/webp': str() } },
    errors: [403, 404, 409],
  },
};
