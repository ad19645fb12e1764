/**
 * The simulated embedding model: a unit vector derived from a hash of each input, so equal
 * inputs always get equal vectors and different inputs (almost surely) different ones.
 */
import { createHash } from 'node:crypto';
import { isRecord } from '../json';
import { countTextTokens } from '../tokens';
import type { EmbeddingsResponse } from '../wire';
import { parseDirectives, type SimDirectives } from './directives';
import { SimError } from './http';

const DEFAULT_DIMENSIONS = 8;
const MAX_DIMENSIONS = 4096;

export interface EmbeddingsRequest {
  model: string;
  /** Strings, or token arrays (counted as their length). */
  inputs: Array<string | number[]>;
  dimensions: number;
  base64: boolean;
  /** Merged from the `#sim` lines of every string input. */
  directives: SimDirectives;
}

export function parseEmbeddingsRequest(body: unknown): EmbeddingsRequest {
  if (!isRecord(body)) throw new SimError(400, 'request body must be a JSON object');
  if (typeof body.model !== 'string' || body.model === '') throw new SimError(400, 'model is required', 'model');
  const inputs = inputList(body.input);
  const dimensions = body.dimensions ?? DEFAULT_DIMENSIONS;
  if (!Number.isInteger(dimensions) || (dimensions as number) < 1 || (dimensions as number) > MAX_DIMENSIONS) {
    throw new SimError(400, `dimensions must be an integer from 1 to ${MAX_DIMENSIONS}`, 'dimensions');
  }
  const format = body.encoding_format ?? 'float';
  if (format !== 'float' && format !== 'base64') {
    throw new SimError(400, 'encoding_format must be float or base64', 'encoding_format');
  }
  const directives: SimDirectives = {};
  for (const input of inputs) if (typeof input === 'string') Object.assign(directives, parseDirectives(input).directives);
  return { model: body.model, inputs, dimensions: dimensions as number, base64: format === 'base64', directives };
}

export function embeddingsResponse(request: EmbeddingsRequest): EmbeddingsResponse {
  let tokens = 0;
  const data = request.inputs.map((input, index) => {
    tokens += typeof input === 'string' ? countTextTokens(input) : input.length;
    const values = Float32Array.from(vector(typeof input === 'string' ? input : JSON.stringify(input), request.dimensions));
    // The official SDKs ask for base64 (little-endian float32) by default and decode it themselves.
    const embedding = request.base64 ? Buffer.from(values.buffer).toString('base64') : Array.from(values);
    return { object: 'embedding' as const, index, embedding };
  });
  return { object: 'list', data, model: request.model, usage: { prompt_tokens: tokens, total_tokens: tokens } };
}

function inputList(input: unknown): Array<string | number[]> {
  if (typeof input === 'string') return [input];
  if (isTokenArray(input)) return [input];
  if (Array.isArray(input) && input.length > 0 && input.every((i) => typeof i === 'string' || isTokenArray(i))) {
    return input as Array<string | number[]>;
  }
  throw new SimError(400, 'input must be a string, an array of strings or token arrays', 'input');
}

function isTokenArray(value: unknown): value is number[] {
  return Array.isArray(value) && value.length > 0 && value.every((t) => Number.isInteger(t));
}

function vector(seed: string, dimensions: number): number[] {
  const values: number[] = [];
  for (let block = 0; values.length < dimensions; block++) {
    const digest = createHash('sha256').update(`${block}:${seed}`).digest();
    for (let i = 0; i < digest.length && values.length < dimensions; i += 2) values.push(digest.readInt16LE(i) / 32768);
  }
  const norm = Math.hypot(...values) || 1;
  return values.map((v) => v / norm);
}
