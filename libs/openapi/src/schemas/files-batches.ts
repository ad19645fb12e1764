/** Files and batches (spec 4.11). */
import { arr, constant, int, nullable, obj, oneOfValues, str, unixSeconds } from '../json-schema';

/** OpenAI's file object (spec 2.8 leaves it open). */
export const File = obj(
  {
    id: str(),
    object: constant('file'),
    bytes: int(),
    created_at: unixSeconds(),
    filename: str(),
    purpose: str(),
    status: str(),
    expires_at: nullable(unixSeconds()),
    status_details: nullable(str()),
  },
  { required: ['id', 'object', 'bytes', 'created_at', 'filename', 'purpose'], open: true },
);

/** OpenAI's batch object (spec 2.8 leaves it open; docs/api/files-batches.md "Batches"). */
const ts = nullable(unixSeconds());
export const Batch = obj(
  {
    id: str(),
    object: constant('batch'),
    endpoint: oneOfValues(['/v1/chat/completions', '/v1/embeddings']),
    errors: nullable(
      obj({
        object: constant('list'),
        data: arr(obj({ code: str(), message: str(), param: nullable(str()), line: nullable(int()) }, { required: ['message'], open: true })),
      }),
    ),
    input_file_id: str(),
    completion_window: constant('24h'),
    status: oneOfValues(['validating', 'failed', 'in_progress', 'finalizing', 'completed', 'expired', 'cancelling', 'cancelled']),
    output_file_id: nullable(str()),
    error_file_id: nullable(str()),
    created_at: unixSeconds(),
    in_progress_at: ts,
    expires_at: ts,
    finalizing_at: ts,
    completed_at: ts,
    failed_at: ts,
    expired_at: ts,
    cancelling_at: ts,
    cancelled_at: ts,
    request_counts: obj({ total: int(), completed: int(), failed: int() }),
    metadata: nullable({ type: 'object', additionalProperties: str() }),
  },
  { required: ['id', 'object', 'endpoint', 'input_file_id', 'completion_window', 'status', 'created_at', 'request_counts'], open: true },
);

export const BatchRequest = obj(
  {
    input_file_id: str(),
    endpoint: oneOfValues(['/v1/chat/completions', '/v1/embeddings']),
    completion_window: constant('24h'),
    metadata: { type: 'object', additionalProperties: str() },
  },
  { required: ['input_file_id', 'endpoint'], open: true, description: 'Spec 4.11.' },
);
