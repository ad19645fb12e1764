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

/** Reads one line's request (its JSON already parsed), or says what is wrong with it. */
export function readBatchRequest(parsed: unknown, line: number, endpoint: BatchEndpoint): BatchLine | BatchError {
  const problem = (code: string, message: string, param: string | null): BatchError => ({ code, message: `Line ${line}: ${message}`, line, param });
  if (!isObject(parsed)) return problem('invalid_json_line', 'is not a JSON object.', null);
  const { custom_id: customId, method, url, body } = parsed;
  if (typeof customId !== 'string' || customId === '') return problem('missing_custom_id', 'custom_id must be a non-empty string.', 'custom_id');
  if (method !== 'POST') return problem('invalid_method', 'method must be "POST".', 'method');
  if (url !== endpoint) return problem('url_mismatch', `url is ${JSON.stringify(url)}; this batch's endpoint is ${endpoint}.`, 'url');
  if (!isObject(body)) return problem('invalid_body', 'body must be a JSON object: the request as it would be sent to the endpoint.', 'body');
  return { line, customId, body };
}

/** Reads one line of text, or says what is wrong with it. */
export function readBatchLine(text: string, line: number, endpoint: BatchEndpoint): BatchLine | BatchError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { code: 'invalid_json_line', message: `Line ${line}: is not valid JSON.`, line, param: null };
  }
  return readBatchRequest(parsed, line, endpoint);
}

/**
 * The lines of an input file as they are read: custom_ids unique, at most MAX_BATCH_LINES
 * requests. Memory stays bounded whatever the file: past the limit lines are only counted, and
 * `keepLines: false` (a check before the batch is created) keeps none.
 */
export class BatchInput {
  private readonly read: BatchLine[] = [];
  private readonly errors: BatchError[] = [];
  private readonly seen = new Set<string>();
  private requests = 0;

  constructor(
    private readonly endpoint: BatchEndpoint,
    private readonly keepLines = true,
  ) {}

  /** A line of text; blank lines are skipped (a final newline is usual). */
  addText(text: string, line: number): void {
    if (text.trim() === '') return;
    this.add(readBatchLine(text, line, this.endpoint));
  }

  /** A line whose JSON is parsed already (a stored file, checked as JSONL when it was uploaded). */
  addParsed(value: unknown, line: number): void {
    this.add(readBatchRequest(value, line, this.endpoint));
  }

  /** The lines to run, or (when any is wrong) none and the problems, the first MAX_REPORTED_ERRORS of them. */
  result(): { lines: BatchLine[]; errors: BatchError[] } {
    const errors = [...this.errors];
    if (this.requests === 0) errors.push({ code: 'empty_file', message: 'The input file has no requests.', line: null, param: 'input_file_id' });
    if (this.requests > MAX_BATCH_LINES)
      errors.unshift({
        code: 'too_many_tasks',
        message: `The input file has ${this.requests} requests; a batch takes at most ${MAX_BATCH_LINES}.`,
        line: null,
        param: 'input_file_id',
      });
    return errors.length > 0 ? { lines: [], errors: errors.slice(0, MAX_REPORTED_ERRORS) } : { lines: this.read, errors: [] };
  }

  private add(result: BatchLine | BatchError): void {
    this.requests++;
    if ('code' in result) {
      this.note(result);
      return;
    }
    if (this.seen.has(result.customId)) {
      this.note({
        code: 'duplicate_custom_id',
        message: `Line ${result.line}: custom_id ${JSON.stringify(result.customId)} is used by an earlier line.`,
        line: result.line,
        param: 'custom_id',
      });
      return;
    }
    this.seen.add(result.customId);
    if (this.keepLines && this.errors.length === 0 && this.requests <= MAX_BATCH_LINES) this.read.push(result);
  }

  private note(error: BatchError): void {
    // One more than reported, so the result still knows there were problems once the rest is cut.
    if (this.errors.length <= MAX_REPORTED_ERRORS) this.errors.push(error);
  }
}

/** Every line of a text file checked (see BatchInput). */
export function validateBatchInput(lines: Iterable<string>, endpoint: BatchEndpoint): { lines: BatchLine[]; errors: BatchError[] } {
  const input = new BatchInput(endpoint);
  let number = 0;
  for (const text of lines) input.addText(text, ++number);
  return input.result();
}
