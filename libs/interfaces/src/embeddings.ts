/**
 * `POST /v1/embeddings` (spec 4.7): the request as the gateway accepts it, validated before
 * anything is held, and the input counted the way it is billed (spec 1: on input tokens).
 */
import { operationOf, type Operation } from '@svc/metering';
import type { EmbeddingsResult } from '@svc/providers';
import { countTextTokens, PARAMETERS } from '@svc/providers';
import { invalid, optionalPositiveInt, requireBody, requireString, type Json } from './types';

/** Spec 8: up to 2,048 inputs per request. */
export const MAX_EMBEDDING_INPUTS = 2048;
const ENCODINGS = ['float', 'base64'];
/** The known fields (spec 4.7) but `provider`, which routes here and is not forwarded. */
const FORWARDED = PARAMETERS.embed.filter((f) => f !== 'provider');

export interface EmbeddingsCall {
  model: string;
  /** The body for the upstream (its `model` is replaced by the provider's own id). */
  body: Json;
  /** What is billed when the upstream reports no usage: strings tokenized, token arrays by length. */
  promptTokens: number;
  /** Routing preferences, as on chat completions. */
  provider: unknown;
  inputs: number;
}

export function embeddingsRequest(raw: unknown): EmbeddingsCall {
  const body = requireBody(raw);
  const model = requireString(body, 'model');
  const inputs = inputList(body.input);
  optionalPositiveInt(body, 'dimensions');
  if (body.encoding_format !== undefined && body.encoding_format !== null && !ENCODINGS.includes(body.encoding_format as string)) {
    throw invalid('encoding_format must be "float" or "base64".', 'encoding_format');
  }
  if (body.user !== undefined && typeof body.user !== 'string') throw invalid('user must be a string.', 'user');
  const promptTokens = inputs.reduce<number>((sum, input) => sum + (typeof input === 'string' ? countTextTokens(input) : input.length), 0);
  const forwarded = Object.fromEntries(FORWARDED.filter((f) => body[f] !== undefined && body[f] !== null).map((f) => [f, body[f]]));
  return { model, body: forwarded, promptTokens, provider: body.provider, inputs: inputs.length };
}

/** A string, up to 2,048 strings, a token array, or up to 2,048 token arrays; nothing empty. */
function inputList(input: unknown): Array<string | number[]> {
  if (input === undefined || input === null) throw invalid('input is required: a string, an array of strings, or token arrays.', 'input');
  if (typeof input === 'string') return [nonEmpty(input, 'input')];
  if (!Array.isArray(input) || input.length === 0) throw invalid('input must be a string, a non-empty array of strings, or token arrays.', 'input');
  if (input.every((t) => typeof t === 'number')) return [tokens(input, 'input')];
  if (input.length > MAX_EMBEDDING_INPUTS) {
    throw invalid(`input holds ${input.length} items; at most ${MAX_EMBEDDING_INPUTS} per request.`, 'input');
  }
  return input.map((item, i) => (typeof item === 'string' ? nonEmpty(item, `input[${i}]`) : tokens(item, `input[${i}]`)));
}

function nonEmpty(text: string, param: string): string {
  if (text === '') throw invalid(`${param} must not be empty.`, param);
  return text;
}

function tokens(value: unknown, param: string): number[] {
  if (!Array.isArray(value) || value.length === 0 || !value.every((t) => Number.isSafeInteger(t) && t >= 0)) {
    throw invalid(`${param} must be a string or a non-empty array of token ids (non-negative integers).`, param);
  }
  return value as number[];
}

/**
 * Spec 4.7 through the metering pipeline: billed on input tokens (spec 1), the provider's count
 * when it reports one, else the gateway's; no vector returned, nothing billed (rule 3).
 */
export const embedOperation: Operation<EmbeddingsCall, EmbeddingsResult> = {
  modelType: 'embedding',
  endpoint: '/v1/embeddings',
  promptTokens: (call) => call.promptTokens,
  worstCase: (call) => ({ input: call.promptTokens }),
  call: (target, call) => operationOf(target, 'embed')({ ...call.body, model: target.route.upstreamModel }),
  usageOf: (result, call) => ({ input: result.usage.promptTokens > 0 ? result.usage.promptTokens : call.promptTokens }),
  // Issue 44: the text inputs (token id arrays carry no text a filter could read).
  prompt: {
    param: 'input',
    texts: (call) => {
      const input = (call.body as { input?: unknown }).input;
      return (Array.isArray(input) ? input : [input]).filter((x): x is string => typeof x === 'string');
    },
    withTexts: (call, texts) => {
      const input = (call.body as { input?: unknown }).input;
      let i = 0;
      const next = (x: unknown) => (typeof x === 'string' ? texts[i++] : x);
      return { ...call, body: { ...(call.body as object), input: Array.isArray(input) ? input.map(next) : next(input) } as EmbeddingsCall['body'] };
    },
  },
  returned: (result) => result.response.data.length,
};
