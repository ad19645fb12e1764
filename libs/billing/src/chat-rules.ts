/**
 * Spec 4.2 rules 1, 4 and 5: what the gateway checks in a chat request before any money is held
 * or any upstream is called, so a request that cannot succeed is refused, unbilled, with a 400
 * naming the field at fault.
 */
import type { CatalogModel } from '@svc/catalog';
import { DomainError } from '@svc/platform';
import { isRecord, knownParameters } from '@svc/providers';

/** The request fields of spec 4.2's table: everything else is ignored (rule 1). */
const KNOWN_CHAT_FIELDS = knownParameters('chat');

/** Spec 4.2 rule 5 and section 8. */
export const MAX_IMAGES = 20;
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024;

/**
 * Rule 1: the request without the fields the gateway does not know, and their names. They are
 * dropped rather than passed on: an upstream might act on them, or refuse the whole request.
 */
export function withoutUnknownFields<T extends object>(body: T): { known: T; ignored: string[] } {
  const known: Record<string, unknown> = {};
  const ignored: string[] = [];
  for (const [field, value] of Object.entries(body)) {
    if (KNOWN_CHAT_FIELDS.has(field)) known[field] = value;
    else ignored.push(field);
  }
  return { known: known as T, ignored };
}

/** How many ignored field names `x-svc-ignored-params` lists; a body may carry thousands. */
export const MAX_IGNORED_LISTED = 32;

/**
 * The `x-svc-ignored-params` value: field names percent-encoded, so a name with a comma, a
 * control or a non-ASCII character cannot break the header (Node refuses such a value, after
 * the request was billed), and at most MAX_IGNORED_LISTED of them, then `...`.
 */
export function ignoredParamsHeader(ignored: readonly string[]): string {
  const listed = ignored.slice(0, MAX_IGNORED_LISTED).map((name) => encodeURIComponent(name.slice(0, 64)));
  return ignored.length > MAX_IGNORED_LISTED ? `${listed.join(',')},...` : listed.join(',');
}

interface ImagePart {
  /** `messages[i].content[j]`, the way `param` names it. */
  param: string;
  url: unknown;
}

/** Every `image_url` part of the messages, in order. */
export function imagePartsOf(messages: readonly unknown[]): ImagePart[] {
  const parts: ImagePart[] = [];
  messages.forEach((message, i) => {
    if (!isRecord(message) || !Array.isArray(message.content)) return;
    message.content.forEach((part: unknown, j) => {
      if (!isRecord(part) || part.type !== 'image_url') return;
      const image = part.image_url;
      parts.push({ param: `messages[${i}].content[${j}]`, url: isRecord(image) ? image.url : image });
    });
  });
  return parts;
}

/**
 * Rule 4: tools and images only go to models that take them. Every model of the chain is
 * checked, since any of them may answer.
 */
export function checkCapabilities(request: { tools?: unknown; tool_choice?: unknown; messages: readonly unknown[] }, models: readonly CatalogModel[]): void {
  const toolField = request.tools != null ? 'tools' : request.tool_choice != null ? 'tool_choice' : null;
  const firstImage = imagePartsOf(request.messages)[0];
  for (const model of models) {
    if (toolField && !model.supportedParameters.includes('tools')) {
      throw DomainError.invalid(
        `Model '${model.id}' does not support tool calling; remove '${toolField}' or use a model that lists tools in supported_parameters.`,
        toolField,
        'unsupported_parameter',
      );
    }
    if (firstImage && !model.inputModalities.includes('image')) {
      throw DomainError.invalid(
        `Model '${model.id}' does not accept image input; remove the image parts or use a model with image in input_modalities.`,
        firstImage.param,
        'unsupported_parameter',
      );
    }
  }
}

/** Rule 5: at most 20 images, each an https URL or a base64 `data:image/...` URL of at most 20 MB. */
export function checkImages(messages: readonly unknown[]): void {
  const images = imagePartsOf(messages);
  if (images.length > MAX_IMAGES) {
    throw DomainError.invalid(`At most ${MAX_IMAGES} images per request; this one has ${images.length}.`, images[MAX_IMAGES].param);
  }
  for (const { param, url } of images) {
    const problem = imageUrlProblem(url);
    if (problem) throw DomainError.invalid(`'${param}': ${problem}`, param);
  }
}

const DATA_URL = /^data:image\/[a-z0-9.+-]+;base64,/i;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function imageUrlProblem(url: unknown): string | null {
  if (typeof url !== 'string' || url === '') return 'image_url.url must be an https URL or a base64 data:image/... URL.';
  const data = DATA_URL.exec(url);
  if (data) {
    const payload = url.slice(data[0].length);
    if (!BASE64.test(payload)) return 'the data URL is not valid base64.';
    const bytes = Math.floor((payload.length * 3) / 4) - (payload.endsWith('==') ? 2 : payload.endsWith('=') ? 1 : 0);
    return bytes > MAX_IMAGE_BYTES ? `the image is ${bytes} bytes; at most ${MAX_IMAGE_BYTES} (20 MB) per image.` : null;
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'image_url.url must be an https URL or a base64 data:image/... URL.';
  }
  // Spec 4.2 rule 5: the upstream fetches the image, and plain http can be altered on the way.
  return parsed.protocol === 'https:' ? null : `only https URLs or base64 data:image/... URLs are accepted, not ${parsed.protocol}.`;
}
