/** multipart/form-data bodies (OpenAI's audio uploads), read whole with busboy. */
import type { IncomingMessage } from 'node:http';
import busboy from 'busboy';
import { SimError } from './http';

export interface UploadedFile {
  field: string;
  filename: string;
  mimeType: string;
  bytes: Buffer;
}

export interface MultipartForm {
  /** Text fields by name; a name sent several times (`timestamp_granularities[]`) keeps every value. */
  fields: Record<string, string[]>;
  /** The first file part, if any. */
  file: UploadedFile | null;
}

/** OpenAI's upload limit for audio files. */
export const MAX_UPLOAD_BYTES = 25 * 1024 * 1024;

/**
 * Reads the whole body before settling, even after a limit is hit, so an error answer never
 * races a client that is still sending.
 */
export function readMultipart(req: IncomingMessage, maxFileBytes = MAX_UPLOAD_BYTES): Promise<MultipartForm> {
  if (!/^multipart\/form-data\b/i.test(req.headers['content-type'] ?? '')) {
    req.resume();
    return Promise.reject(new SimError(400, 'the body must be multipart/form-data'));
  }
  return new Promise((resolve, reject) => {
    const fields: Record<string, string[]> = {};
    let file: UploadedFile | null = null;
    let tooLarge = false;
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: req.headers, limits: { fileSize: maxFileBytes, fieldSize: 1024 * 1024 } });
    } catch (error) {
      req.resume(); // e.g. no boundary in the content type
      reject(new SimError(400, `malformed multipart body: ${error instanceof Error ? error.message : String(error)}`));
      return;
    }
    parser.on('field', (name, value) => (fields[name] ??= []).push(value));
    parser.on('file', (field, stream, info) => {
      const parts: Buffer[] = [];
      stream.on('data', (part: Buffer) => parts.push(part));
      stream.on('limit', () => (tooLarge = true));
      stream.on('end', () => {
        file ??= { field, filename: info.filename ?? 'upload', mimeType: info.mimeType, bytes: Buffer.concat(parts) };
      });
    });
    parser.on('error', (error: unknown) => {
      req.unpipe(parser);
      req.resume();
      reject(new SimError(400, `malformed multipart body: ${error instanceof Error ? error.message : String(error)}`));
    });
    parser.on('close', () => {
      if (tooLarge) reject(new SimError(413, `file is larger than ${maxFileBytes} bytes`, 'file', 'file_too_large'));
      else resolve({ fields, file });
    });
    req.pipe(parser);
  });
}
