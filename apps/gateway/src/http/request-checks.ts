import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, inspectJson, inspectParameters } from '@svc/platform';
import { toAnthropicError } from '@svc/interfaces';
import { isMessagesPath } from './error.filter';

/**
 * Checks every request gets before routing and validation, whatever its route: what the
 * gateway cannot read without guessing is refused (issue 14, items 5, 6, 11 and 12), so no
 * handler, event or row ever sees it. Errors thrown here reach the application's exception
 * filter (Nest installs it as Fastify's error handler) and leave as the spec's error object.
 */
/**
 * The routes that take a multipart form (spec 4.10: an audio file; 4.11: a batch input file;
 * 4.15: a video, which the openai SDK always sends as a form); every other takes JSON.
 */
const MULTIPART_PATHS = new Set(['/v1/audio/transcriptions', '/v1/audio/translations', '/v1/files', '/v1/videos']);

export function installRequestChecks(fastify: FastifyInstance): void {
  // An empty body labelled JSON (what some clients send with DELETE) is no body, not bad JSON
  // (issue 15.4); anything else goes to Fastify's own parser. A `__proto__` key (or `constructor`
  // holding `prototype`) is valid JSON, which refusing answered "Body is not valid JSON": it is
  // removed instead, wherever it is, so no merge or spread downstream can meet it (issue 41 item 9).
  const parseJson = fastify.getDefaultJsonParser('remove', 'remove');
  fastify.removeContentTypeParser('application/json');
  fastify.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if ((body as string).trim() === '') done(null, undefined);
    else parseJson(request, body as string, done);
  });

  fastify.addHook('onRequest', async (request) => {
    const encoding = request.headers['content-encoding'];
    if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
      // Reading a compressed body as plain JSON would act on garbage; decoding it is not offered.
      throw new ApiError(
        415,
        'invalid_request_error',
        `Content-Encoding ${JSON.stringify(encoding)} is not supported; send the body uncompressed.`,
        'unsupported_content_encoding',
        'Content-Encoding',
      );
    }
    if (/^\s*multipart\/form-data/i.test(request.headers['content-type'] ?? '') && !MULTIPART_PATHS.has(request.url.split('?')[0])) {
      throw new ApiError(415, 'invalid_request_error', 'This route takes a JSON body, not a multipart form.', 'unsupported_media_type', 'Content-Type');
    }
    if (/^\s*application\/x-www-form-urlencoded/i.test(request.headers['content-type'] ?? '')) {
      // Nest's Fastify adapter parses forms, and a form body once created a key: every route
      // here takes JSON.
      throw new ApiError(415, 'invalid_request_error', 'Send the request body as application/json.', 'unsupported_media_type', 'Content-Type');
    }
  });

  fastify.addHook('preValidation', async (request: FastifyRequest) => {
    const parameters = inspectParameters(request.params as Record<string, unknown>) ?? inspectParameters(request.query as Record<string, unknown>);
    if (parameters) throw ApiError.invalidRequest(parameters.message, parameters.param, 'invalid_parameter');
    // A write without a body is one with every field left out: the route's validation says
    // what is missing, instead of a handler meeting `undefined`.
    if (request.body === undefined && (request.method === 'POST' || request.method === 'PUT' || request.method === 'PATCH')) request.body = {};
    const body = request.body;
    if (body === undefined) return;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw ApiError.invalidRequest('The request body must be a JSON object.', null, 'invalid_body');
    }
    const problem = inspectJson(body);
    if (problem) throw ApiError.invalidRequest(problem.message, problem.param, 'invalid_body');
  });
}

/**
 * Fastify's `frameworkErrors`: errors it answers before any route or hook runs (a URL that is
 * not valid percent-encoding), in the spec's error object.
 */
export function frameworkErrors(err: Error & { code?: string }, request: FastifyRequest, reply: FastifyReply): void {
  const apiError =
    err.code === 'FST_ERR_BAD_URL'
      ? ApiError.invalidRequest('The request URL is not valid percent-encoded UTF-8.', null, 'invalid_url')
      : ApiError.invalidRequest(`The request could not be read: ${err.message}`, null, 'malformed_request');
  void reply.status(apiError.status).send(isMessagesPath(request.url) ? toAnthropicError(apiError.status, apiError.toBody()) : apiError.toBody());
}

const CLIENT_ERRORS: Record<string, ApiError> = {
  HPE_HEADER_OVERFLOW: new ApiError(
    431,
    'invalid_request_error',
    'The request line and headers are larger than this server accepts (16 KB).',
    'headers_too_large',
  ),
  HPE_URI_TOO_LONG: new ApiError(414, 'invalid_request_error', 'The request URL is too long.', 'uri_too_long'),
  // Issue 41 S3: headers or body not received within SVC_HEADERS_TIMEOUT_MS / SVC_REQUEST_TIMEOUT_MS.
  ERR_HTTP_REQUEST_TIMEOUT: new ApiError(
    408,
    'invalid_request_error',
    'The request was not received in time; send the headers and the body without pausing.',
    'request_timeout',
  ),
};

/**
 * Fastify's `clientErrorHandler`: a request Node's HTTP parser could not read (malformed, or
 * headers over Node's limit) gets the spec's error object rather than Node's or Fastify's own.
 */
export function clientErrorHandler(err: Error & { code?: string; rawPacket?: unknown }, socket: Socket): void {
  if (!socket.writable) {
    socket.destroy(err);
    return;
  }
  if (err.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  const apiError = CLIENT_ERRORS[err.code ?? ''] ?? ApiError.invalidRequest('The HTTP request could not be parsed.', null, 'malformed_request');
  // The path is only known if the request line was read: a messages client gets its own shape.
  const path = /^[A-Z]+ (\S+)/.exec(Buffer.isBuffer(err.rawPacket) ? err.rawPacket.toString('latin1', 0, 2048) : '')?.[1];
  const body = JSON.stringify(isMessagesPath(path) ? toAnthropicError(apiError.status, apiError.toBody()) : apiError.toBody());
  socket.end(
    `HTTP/1.1 ${apiError.status} ${STATUS_CODES[apiError.status] ?? 'Bad Request'}\r\n` +
      `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
