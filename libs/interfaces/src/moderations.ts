/**
 * `POST /v1/moderations` (spec 4.13): OpenAI's request (`input` a string, strings, or text and
 * image parts; optional `model`), free of charge.
 */
import type { JsonResult } from '@svc/providers';
import { operationOf, type Target } from '@svc/metering';
import { invalid, requireBody, type Json } from './types';

/** As many inputs as embeddings take (spec 8 names no bound for moderations; OpenAI's is this order). */
export const MAX_MODERATION_INPUTS = 2048;

export interface ModerationCall {
  /** Absent: the catalog's default moderation model. */
  model: string | null;
  input: string | string[] | Json[];
}

export function moderationRequest(raw: unknown): ModerationCall {
  const body = requireBody(raw);
  if (body.model !== undefined && body.model !== null && (typeof body.model !== 'string' || body.model === ''))
    throw invalid('model must be a non-empty string.', 'model');
  return { model: (body.model as string | undefined) ?? null, input: inputOf(body.input) };
}

function inputOf(input: unknown): ModerationCall['input'] {
  if (typeof input === 'string') {
    if (input === '') throw invalid('input must not be empty.', 'input');
    return input;
  }
  if (!Array.isArray(input) || input.length === 0)
    throw invalid('input is required: a string, an array of strings, or an array of text and image_url parts.', 'input');
  if (input.length > MAX_MODERATION_INPUTS) throw invalid(`input holds ${input.length} items; at most ${MAX_MODERATION_INPUTS} per request.`, 'input');
  if (input.every((item) => typeof item === 'string')) return input as string[];
  return input.map((part, i) => checkPart(part, `input[${i}]`));
}

/** OpenAI's multimodal parts: `{type: "text", text}` or `{type: "image_url", image_url: {url}}`. */
function checkPart(part: unknown, param: string): Json {
  if (typeof part !== 'object' || part === null || Array.isArray(part))
    throw invalid(`${param} must be a text or image_url part (or every item a string).`, param);
  const p = part as Json;
  if (p.type === 'text') {
    if (typeof p.text !== 'string') throw invalid(`${param}.text must be a string.`, `${param}.text`);
    return { type: 'text', text: p.text };
  }
  if (p.type === 'image_url') {
    const image = p.image_url as { url?: unknown } | undefined;
    if (typeof image !== 'object' || image === null || typeof image.url !== 'string' || !/^(https:\/\/|data:image\/)/.test(image.url)) {
      throw invalid(`${param}.image_url.url must be an https URL or a base64 data URL of an image.`, `${param}.image_url.url`);
    }
    return { type: 'image_url', image_url: { url: image.url } };
  }
  throw invalid(`${param}.type must be "text" or "image_url".`, `${param}.type`);
}

/** One provider call, under its own model id. */
export function moderate(target: Target, call: ModerationCall): Promise<JsonResult> {
  return operationOf(target, 'moderation')({ model: target.route.upstreamModel, input: call.input });
}
