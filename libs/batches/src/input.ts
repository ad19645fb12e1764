/**
 * The input file of a batch, line by line (WIRE-FORMATS 1.2, OpenAI's `BatchRequestInput`):
 * `{"custom_id", "method": "POST", "url": <the batch's endpoint>, "body": {...}}`. Problems are
 * collected with their 1-based line numbers, under the codes OpenAI reports, so a caller sees
 * every bad line at once rather than the first.
 */
import type { BatchEndpoint, BatchError } from './batch';

/** Spec 8: a batch holds up to 5,000 requests. */
export const MAX_BATCH_LINES = 5000;
/** More problems than this are not listed one by one: the first ones say what is wrong. */
export const MAX_REPORTED_ERRORS = 100;

export interface BatchLine {
  /** 1-based, as the errors name it. */
  line: number;
  customId: string;
  body: Record<string, unknown>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Reads one line, or says what is wrong with it. */
export function readBatchLine(text: string, line: number, endpoint: BatchEndpoint): BatchLine | BatchError {
  const problem = (code: string, message: string, param: string | null): BatchError => ({ code, message: `Line ${line}: ${message}`, line, param });
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return problem('invalid_json_line', 'is not valid JSON.', null);
  }
  if (!isObject(parsed)) return problem('invalid_json_line', 'is not a JSON object.', null);
  const { custom_id: customId, method, url, body } = parsed;
  if (typeof customId !== 'string' || customId === '') return problem('missing_custom_id', 'custom_id must be a non-empty string.', 'custom_id');
  if (method !== 'POST') return problem('invalid_method', 'method must be "POST".', 'method');
  if (url !== endpoint) return problem('url_mismatch', `url is ${JSON.stringify(url)}; this batch's endpoint is ${endpoint}.`, 'url');
  if (!isObject(body)) return problem('invalid_body', 'body must be a JSON object: the request as it would be sent to the endpoint.', 'body');
  return { line, customId, body };
}

/**
 * Every line of the file checked: blank lines skipped (a final newline is usual), custom_ids
 * unique, at most MAX_BATCH_LINES requests. The lines are returned only when none is wrong.
 */
export function validateBatchInput(lines: Iterable<string>, endpoint: BatchEndpoint): { lines: BatchLine[]; errors: BatchError[] } {
  const read: BatchLine[] = [];
  const errors: BatchError[] = [];
  const seen = new Set<string>();
  let number = 0;
  for (const text of lines) {
    number++;
    if (text.trim() === '') continue;
    const result = readBatchLine(text, number, endpoint);
    if ('code' in result) {
      errors.push(result);
      continue;
    }
    if (seen.has(result.customId)) errors.push({ code: 'duplicate_custom_id', message: `Line ${number}: custom_id ${JSON.stringify(result.customId)} is used by an earlier line.`, line: number, param: 'custom_id' });
    seen.add(result.customId);
    read.push(result);
  }
  const total = read.length + errors.filter((e) => e.code !== 'duplicate_custom_id').length;
  if (total === 0) errors.push({ code: 'empty_file', message: 'The input file has no requests.', line: null, param: 'input_file_id' });
  if (total > MAX_BATCH_LINES) errors.unshift({ code: 'too_many_tasks', message: `The input file has ${total} requests; a batch takes at most ${MAX_BATCH_LINES}.`, line: null, param: 'input_file_id' });
  return errors.length > 0 ? { lines: [], errors: errors.slice(0, MAX_REPORTED_ERRORS) } : { lines: read, errors: [] };
}
