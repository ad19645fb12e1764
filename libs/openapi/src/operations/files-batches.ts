import { bool, constant, cursorList, int, obj, ref, str } from '../json-schema';
import { json, limitQuery, afterQuery, orderQuery } from './shared';
import type { OperationDescription } from './types';

/** Spec 4.11: files and batches. */
export const FILES_AND_BATCHES_OPERATIONS: Record<string, OperationDescription> = {
  'POST /v1/files': {
    summary: 'Upload a batch input file',
    description: 'Spec 4.11 (multipart form).',
    tag: 'Files and batches',
    access: 'full',
    body: {
      schema: obj(
        {
          file: str('JSONL', { contentMediaType: 'application/jsonl' }),
          purpose: constant('batch'),
          'expires_after[anchor]': constant('created_at'),
          'expires_after[seconds]': int(undefined, { minimum: 3600, maximum: 2592000 }),
        },
        { required: ['file', 'purpose'] },
      ),
      multipart: true,
    },
    ok: { schema: ref('File') },
    errors: [403, 413, 415, 503],
  },
  'GET /v1/files': {
    summary: 'List files',
    tag: 'Files and batches',
    access: 'any',
    query: [{ name: 'purpose', schema: str() }, limitQuery(10000, 10000), orderQuery, afterQuery],
    ok: { schema: cursorList(ref('File')) },
  },
  'GET /v1/files/:id': { summary: 'Retrieve a file', tag: 'Files and batches', access: 'any', ok: { schema: ref('File') }, errors: [404] },
  'DELETE /v1/files/:id': {
    summary: 'Delete a file',
    tag: 'Files and batches',
    access: 'full',
    ok: { schema: obj({ id: str(), object: constant('file'), deleted: bool() }) },
    errors: [403, 404],
  },
  'GET /v1/files/:id/content': {
    summary: 'Download file content',
    tag: 'Files and batches',
    access: 'any',
    ok: { content: { 'application/jsonl': str(), 'application/octet-stream': str() } },
    errors: [404, 503],
  },
  'POST /v1/batches': {
    summary: 'Create a batch',
    description: 'Spec 4.11.',
    tag: 'Files and batches',
    access: 'full',
    body: json(ref('BatchRequest')),
    ok: { schema: ref('Batch') },
    errors: [403, 404],
  },
  'GET /v1/batches': {
    summary: 'List batches',
    tag: 'Files and batches',
    access: 'any',
    query: [limitQuery(100, 20), afterQuery],
    ok: { schema: cursorList(ref('Batch')) },
  },
  'GET /v1/batches/:id': { summary: 'Retrieve a batch', tag: 'Files and batches', access: 'any', ok: { schema: ref('Batch') }, errors: [404] },
  'POST /v1/batches/:id/cancel': { summary: 'Cancel a batch', tag: 'Files and batches', access: 'full', ok: { schema: ref('Batch') }, errors: [403, 404, 409] },
};
