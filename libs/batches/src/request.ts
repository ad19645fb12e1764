/**
 * `POST /v1/batches` (spec 4.11; OpenAI's create body, WIRE-FORMATS 1.2), checked before anything
 * is recorded: each mistake invalid (a 400 at the edge) naming its field.
 */
import { DomainError } from '@svc/platform';
import { BATCH_ENDPOINTS, type BatchEndpoint, COMPLETION_WINDOW } from './batch';

export interface CreateBatchRequest {
  inputFileId: string;
  endpoint: BatchEndpoint;
  completionWindow: string;
  metadata: Record<string, string> | null;
}

/** OpenAI's metadata: up to 16 pairs, keys up to 64 characters, values strings up to 512. */
export const MAX_METADATA_KEYS = 16;
const MAX_METADATA_KEY = 64;
const MAX_METADATA_VALUE = 512;
const FIELDS = ['input_file_id', 'endpoint', 'completion_window', 'metadata'];

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function createBatchRequest(body: unknown): CreateBatchRequest {
  if (!isObject(body)) throw DomainError.invalid('The body must be a JSON object.', null);
  for (const field of Object.keys(body)) {
    if (!FIELDS.includes(field))
      throw DomainError.invalid(`Unknown field ${JSON.stringify(field)}: a batch takes ${FIELDS.join(', ')}.`, field, 'unknown_parameter');
  }
  const { input_file_id: inputFileId, endpoint, completion_window: window = COMPLETION_WINDOW, metadata = null } = body;
  if (typeof inputFileId !== 'string' || inputFileId === '')
    throw DomainError.invalid('input_file_id is required: the id of an uploaded file of purpose batch.', 'input_file_id', 'missing_required_parameter');
  if (!BATCH_ENDPOINTS.includes(endpoint as BatchEndpoint)) {
    throw DomainError.invalid(
      `endpoint must be one of ${BATCH_ENDPOINTS.join(', ')}.`,
      'endpoint',
      endpoint === undefined ? 'missing_required_parameter' : 'invalid_value',
    );
  }
  if (window !== COMPLETION_WINDOW)
    throw DomainError.invalid(`completion_window must be "${COMPLETION_WINDOW}", the only window.`, 'completion_window', 'invalid_value');
  return { inputFileId, endpoint: endpoint as BatchEndpoint, completionWindow: window, metadata: metadataOf(metadata) };
}

function metadataOf(metadata: unknown): Record<string, string> | null {
  if (metadata === null) return null;
  const rule = `metadata must be an object of at most ${MAX_METADATA_KEYS} string values (keys up to ${MAX_METADATA_KEY} characters, values up to ${MAX_METADATA_VALUE}).`;
  if (!isObject(metadata)) throw DomainError.invalid(rule, 'metadata', 'invalid_value');
  const entries = Object.entries(metadata);
  if (entries.length > MAX_METADATA_KEYS) throw DomainError.invalid(rule, 'metadata', 'invalid_value');
  for (const [key, value] of entries) {
    if (key.length > MAX_METADATA_KEY || typeof value !== 'string' || value.length > MAX_METADATA_VALUE)
      throw DomainError.invalid(rule, `metadata.${key}`, 'invalid_value');
  }
  return metadata as Record<string, string>;
}
