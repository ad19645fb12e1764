import { HttpException } from '@nestjs/common';
import { apiErrorOfFailure } from '@svc/billing';
import { ApiError } from '@svc/platform';
import { multipartParseError } from './multipart';

/**
 * Turns whatever a request ended with into the spec's error object (section 2.1) and status
 * (section 7): the billed calls' mapping, with what only this HTTP edge raises (Nest's
 * exceptions, Fastify's and the multipart reader's errors) mapped here. Only errors nobody
 * expected become 500.
 */
export function toApiError(err: unknown, now: Date): ApiError {
  return apiErrorOfFailure(err, now, fromHttpEdge);
}

function fromHttpEdge(err: unknown): ApiError | null {
  if (err instanceof HttpException) return fromHttpException(err);
  const fastify = fromFastify(err);
  if (fastify) return fastify;
  // A form cut short may surface from a file's stream, deep in whatever was reading it.
  return multipartParseError(err);
}

function fromHttpException(err: HttpException): ApiError {
  const status = err.getStatus();
  if (status === 404) return ApiError.notFound(err.message, 'route_not_found');
  if (status === 413) return new ApiError(413, 'invalid_request_error', 'The request body is larger than 10 MB.', 'request_too_large');
  if (status >= 400 && status < 500) return new ApiError(status, 'invalid_request_error', err.message);
  return ApiError.internal();
}

/** Errors Fastify raises before a route runs: bad JSON, wrong content type, body too large. */
function fromFastify(err: unknown): ApiError | null {
  const e = err as { code?: unknown; statusCode?: unknown; message?: unknown };
  if (typeof e?.code !== 'string' || !e.code.startsWith('FST_')) return null;
  switch (e.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError(413, 'invalid_request_error', 'The request body is larger than 10 MB.', 'request_too_large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError(415, 'invalid_request_error', 'Send the request body as application/json.', 'unsupported_media_type');
    // @fastify/multipart's limits (spec 8: audio files up to 25 MB).
    case 'FST_REQ_FILE_TOO_LARGE':
      return new ApiError(
        413,
        'invalid_request_error',
        'The file is larger than 25 MB (spec 8); send a shorter or more compressed recording.',
        'file_too_large',
        'file',
      );
    case 'FST_FILES_LIMIT':
      return new ApiError(413, 'invalid_request_error', 'The form has more than one file; send one audio file, named file.', 'too_many_files', 'file');
    case 'FST_PARTS_LIMIT':
    case 'FST_FIELDS_LIMIT':
      return new ApiError(413, 'invalid_request_error', 'The form has too many fields.', 'too_many_fields', null);
    case 'FST_PROTO_VIOLATION':
      return ApiError.invalidRequest('A form field may not be named __proto__ or constructor.', null, 'invalid_body');
    // The form reader takes JSON-typed fields itself, naming the field (http/multipart.ts): a backstop.
    case 'FST_INVALID_JSON_FIELD_ERROR':
      return ApiError.invalidRequest('A form field declared application/json is not valid JSON.', null, 'invalid_json');
    case 'FST_MP_PREMATURE_CLOSE':
      return ApiError.invalidRequest('The form ended before it was complete.', null, 'malformed_request');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return ApiError.invalidRequest('The request body is empty; send a JSON object.', null, 'invalid_json');
    default:
      if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
        return new ApiError(e.statusCode, 'invalid_request_error', `The request could not be read: ${String(e.message)}`, 'invalid_json');
      }
      return null;
  }
}
