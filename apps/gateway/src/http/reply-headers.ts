import { ApiError } from '@svc/platform';

/** An event stream's headers; x-accel-buffering: proxies such as nginx would otherwise hold the events back. */
export const SSE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no',
};

/** Spec 4: X-Client-Request-Id, echoed back and stored on the generation; at most 255 characters. */
export function clientRequestIdOf(headers: Record<string, string | string[] | undefined>): string | undefined {
  const value = headers['x-client-request-id'];
  if (value === undefined) return undefined;
  if (Array.isArray(value) || value.length > 255) {
    throw ApiError.invalidRequest('X-Client-Request-Id must be sent once, with at most 255 characters.', 'X-Client-Request-Id');
  }
  return value || undefined;
}
