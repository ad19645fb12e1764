import type { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import type { Multipart } from '@fastify/multipart';
import { ApiError } from '@svc/platform';

/**
 * Reading the multipart forms of spec 4.10 (audio), 4.11 (batch input files) and 4.15 (videos),
 * for every route that takes one, so a form the gateway cannot read is refused the same way on
 * each: a 400 (413 when a part is too large) in the spec's error object (section 2.1) naming the
 * field, never a 500, before anything is stored, held or billed (issue 41, item 7).
 */

/** The name every route here gives its upload (spec 4.10, 4.11). */
export const FILE_FIELD = 'file';

export interface FormLimits {
  /** Bytes of a file part; one over is `fileTooLarge`. */
  fileSize: number;
  /** Bytes of a text field; one over is 413 naming the field. */
  fieldSize: number;
  /** Parts in all, text fields and files; one over is 413. */
  parts: number;
}

export interface FormField {
  type: 'field';
  name: string;
  /** The text; a JSON-typed field's JSON string, number or boolean as text. */
  value: string;
}

export interface FormFile {
  type: 'file';
  name: string;
  /** Null when the part named none (curl's `-F file=<path`, a hand-built form). */
  filename: string | null;
  mimetype: string;
  /** The bytes; a file over `fileSize` ends it with 413 `file_too_large`. */
  file: Readable;
  toBuffer(): Promise<Buffer>;
}

export type FormPart = FormField | FormFile;

/**
 * The parts of a multipart form, in the order sent, one at a time (a file streams; fields may
 * come before or after it, WIRE-FORMATS 1.1). What is malformed, or over a limit, is thrown as
 * an ApiError naming the part.
 *
 * Busboy would hand a part named `file` without a filename over as a text field ("Unknown field
 * file"), and parse a field typed `application/json` itself, refusing invalid JSON without saying
 * which field (406): both come here as files instead, and are read as what they are.
 */
export async function* formParts(request: FastifyRequest, limits: FormLimits): AsyncGenerator<FormPart> {
  const parts = request.parts({
    limits: { fileSize: limits.fileSize, fieldSize: limits.fieldSize, parts: limits.parts },
    isPartAFile: (name, contentType, filename) => filename !== undefined || name === FILE_FIELD || isJsonType(contentType),
  });
  for (;;) {
    let next: IteratorResult<Multipart>;
    try {
      next = await parts.next();
    } catch (err) {
      throw multipartParseError(err) ?? err;
    }
    if (next.done) return;
    const part = next.value;
    if (part.type === 'field') {
      if (part.valueTruncated) throw fieldTooLarge(part.fieldname, limits.fieldSize);
      yield { type: 'field', name: part.fieldname, value: String(part.value) };
    } else if (part.fieldname !== FILE_FIELD && isJsonType(part.mimetype) && part.filename === undefined) {
      yield { type: 'field', name: part.fieldname, value: await jsonFieldText(part.fieldname, part.file, limits.fieldSize) };
    } else {
      yield { type: 'file', name: part.fieldname, filename: part.filename || null, mimetype: part.mimetype, file: part.file, toBuffer: () => part.toBuffer() };
    }
  }
}

const isJsonType = (contentType: string | undefined): boolean => /^\s*application\/json\s*(;|$)/i.test(contentType ?? '');

/**
 * A field typed `application/json` as text: every field the forms here read is text, so a JSON
 * string is its text, a number or boolean its JSON text; an object, array or null is no text.
 */
async function jsonFieldText(name: string, stream: Readable, maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > maxBytes) {
      stream.resume();
      throw fieldTooLarge(name, maxBytes);
    }
    chunks.push(chunk);
  }
  let value: unknown;
  try {
    value = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (err) {
    throw ApiError.invalidRequest(
      `Field ${name} is declared application/json but is not valid JSON (${(err as Error).message}); send it as plain text, or as valid JSON.`,
      name,
      'invalid_json',
    );
  }
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return JSON.stringify(value);
  throw ApiError.invalidRequest(
    `Field ${name} must be text; as JSON it may be a string, a number or a boolean, not ${value === null ? 'null' : Array.isArray(value) ? 'an array' : 'an object'}.`,
    name,
    'invalid_type',
  );
}

function fieldTooLarge(name: string, maxBytes: number): ApiError {
  return new ApiError(413, 'invalid_request_error', `Field ${name} is longer than this form takes (${maxBytes} bytes).`, 'field_too_large', name);
}

/**
 * Busboy's own errors for a body that is not the form its Content-Type announces. They carry no
 * code, only these messages (@fastify/multipart tells them apart the same way); they surface from
 * the parts' iterator, or from a file's stream while it is read (the body ended inside it).
 */
const MALFORMED = [
  {
    test: (m: string) => m === 'Multipart: Boundary not found',
    message: 'The Content-Type multipart/form-data has no boundary parameter, so the form cannot be read.',
    param: 'Content-Type',
  },
  {
    test: (m: string) => m === 'Unexpected end of multipart data' || m.endsWith('terminated early due to unexpected end of multipart data'),
    message: 'The multipart body ended before its closing boundary: it was cut short, or its parts are not delimited by the boundary its Content-Type names.',
    param: null,
  },
  { test: (m: string) => m === 'Unsupported Content-Type.', message: 'The body is not a multipart/form-data form.', param: 'Content-Type' },
];

/** The 400 for a multipart body busboy could not read; null for any other error. */
export function multipartParseError(err: unknown): ApiError | null {
  if (!(err instanceof Error) || (err as { code?: unknown }).code !== undefined) return null;
  const malformed = MALFORMED.find((m) => m.test(err.message));
  return malformed ? ApiError.invalidRequest(malformed.message, malformed.param, 'malformed_multipart') : null;
}
