import { SPEECH_FORMATS } from '@svc/interfaces';
import { ref, str } from '../json-schema';
import { json, gen, genCost } from './shared';
import type { OperationDescription } from './types';

/** Spec 4.9: the audio in the `response_format` asked for (mp3 by default), typed as the provider sends it. */
const SPEECH_CONTENT_TYPES: Record<(typeof SPEECH_FORMATS)[number], string> = {
  mp3: 'audio/mpeg',
  opus: 'audio/opus',
  aac: 'audio/aac',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
};
const speechContent = Object.fromEntries(
  Object.entries(SPEECH_CONTENT_TYPES).map(([format, type]) => [type, str(`response_format ${format}`, { contentMediaType: type })]),
);

/** Spec 4.8 to 4.16: the model interfaces for images, audio, rerank, moderation, search and realtime. */
export const MEDIA_OPERATIONS: Record<string, OperationDescription> = {
  'POST /v1/images/generations': {
    summary: 'Image generation',
    description: 'Spec 4.8.',
    tag: 'Models',
    access: 'full',
    billed: true,
    body: json(ref('ImagesRequest')),
    ok: { schema: ref('ImagesResponse'), headers: gen },
    errors: [402, 403, 404, 409, 422, 429, 502, 503, 504],
  },
  'GET /v1/images/content/:file': {
    summary: 'An image answered with response_format "url"',
    description: 'No key: the unguessable id is the secret; kept for an hour.',
    tag: 'Models',
    access: 'none',
    pathParameters: { file: '`<id>.png`' },
    ok: { content: { 'image/png': str(undefined, { contentMediaType: 'image/png' }) } },
    errors: [404],
  },
  'POST /v1/audio/speech': {
    summary: 'Text to speech',
    description: 'Spec 4.9. The body is the audio; the cost is in `x-svc-cost`.',
    tag: 'Models',
    access: 'full',
    billed: true,
    cacheable: true,
    body: json(ref('SpeechRequest')),
    ok: { content: { ...speechContent, 'application/octet-stream': str('when the provider names no type') }, headers: genCost },
    errors: [402, 403, 404, 409, 422, 429, 502, 503, 504],
  },
  'POST /v1/audio/transcriptions': {
    summary: 'Speech to text',
    description: 'Spec 4.10 (multipart form).',
    tag: 'Models',
    access: 'full',
    billed: true,
    body: { schema: ref('TranscriptionForm'), multipart: true },
    ok: { schema: ref('Transcription'), content: { 'text/plain': str() }, headers: genCost },
    errors: [402, 403, 404, 409, 413, 415, 422, 429, 502, 503, 504],
  },
  'POST /v1/audio/translations': {
    summary: 'Speech to English text',
    description: 'Spec 4.10 (multipart form).',
    tag: 'Models',
    access: 'full',
    billed: true,
    body: { schema: ref('TranslationForm'), multipart: true },
    ok: { schema: ref('Transcription'), content: { 'text/plain': str() }, headers: genCost },
    errors: [402, 403, 404, 409, 413, 415, 422, 429, 502, 503, 504],
  },
  'POST /v1/rerank': {
    summary: 'Rerank documents',
    description: 'Spec 4.12. Billed per search unit.',
    tag: 'Models',
    access: 'full',
    billed: true,
    body: json(ref('RerankRequest')),
    ok: { schema: ref('RerankResponse'), headers: gen },
    errors: [402, 403, 404, 409, 422, 429, 502, 503, 504],
  },
  'POST /v1/moderations': {
    summary: 'Moderation (free)',
    description: 'Spec 4.13.',
    tag: 'Models',
    access: 'full',
    body: json(ref('ModerationRequest')),
    ok: { schema: ref('ModerationResponse'), headers: gen },
    errors: [403, 404, 429, 502, 503, 504],
  },
  'POST /v1/search': {
    summary: 'Web search',
    description: 'Spec 4.14. Billed per query.',
    tag: 'Models',
    access: 'full',
    billed: true,
    body: json(ref('SearchRequest')),
    ok: { schema: ref('SearchResponse'), headers: gen },
    errors: [402, 403, 404, 409, 422, 429, 502, 503, 504],
  },
  'POST /v1/search/*': {
    path: '/v1/search/{engine}',
    summary: 'Web search on one engine',
    description: 'Spec 4.14.',
    tag: 'Models',
    access: 'full',
    billed: true,
    pathParameters: { engine: 'search engine model id (keeps its `/`, e.g. `sim/tavily`)' },
    body: json(ref('SearchRequest')),
    ok: { schema: ref('SearchResponse'), headers: gen },
    errors: [402, 403, 404, 409, 422, 429, 502, 503, 504],
  },
  'GET /v1/realtime': {
    summary: 'Realtime session (WebSocket upgrade)',
    description:
      "Spec 4.16: `GET` with `Connection: Upgrade`, `Upgrade: websocket`, answered 101 Switching Protocols; then OpenAI's realtime protocol. Refusals (key, scope, model, rate limits) are plain HTTP answers with the error object, before anything is upgraded. From a browser, the subprotocol `svc-insecure-api-key.<key>` carries the key (spec 5 rule 7).",
    tag: 'Models',
    access: 'full',
    websocket: true,
    query: [{ name: 'model', schema: str(), required: true }],
    ok: { status: 101, description: 'Switching Protocols: the WebSocket session starts.' },
    errors: [402, 403, 404, 429, 502, 504],
  },
};
