/**
 * OpenAI's legacy completions (`POST /v1/completions`) on top of the chat pipeline: the prompt
 * becomes one user message, the answer a `text_completion`. One prompt, one choice: `n` and
 * `best_of` other than 1 are refused; `logprobs` and `suffix` are not carried over.
 */
import type { ChatChunk, ChatCompletion } from '@svc/providers';
import {
  defined,
  invalid,
  optionalBoolean,
  optionalNumber,
  optionalPositiveInt,
  requireBody,
  requireString,
  SSE_DONE,
  sseFrame,
  streamFields,
  type ChatRequestBody,
  type CostedUsage,
  type GatewayErrorBody,
  type Json,
} from './types';

/** The legacy endpoint's default completion length. */
export const DEFAULT_COMPLETION_MAX_TOKENS = 16;

/** Standard sampling fields carried over unchanged when present. */
const PASSED_THROUGH = ['presence_penalty', 'frequency_penalty', 'seed', 'logit_bias', 'user'] as const;

export function completionsToChat(body: unknown): ChatRequestBody {
  const b = requireBody(body);
  const model = requireString(b, 'model');
  const prompt = promptOf(b);
  // One choice per request: more would silently come back as one.
  for (const field of ['n', 'best_of'] as const) {
    if (b[field] !== undefined && b[field] !== null && b[field] !== 1)
      throw invalid(`${field} must be 1: this endpoint returns one choice per request.`, field);
  }
  // Issue 15.6: typed even where not carried over, so a wrong type is said, not silently dropped.
  optionalBoolean(b, 'echo');
  if (b.suffix !== undefined && b.suffix !== null && typeof b.suffix !== 'string') throw invalid('suffix must be a string.', 'suffix');
  if (b.logprobs !== undefined && b.logprobs !== null && !(Number.isInteger(b.logprobs) && (b.logprobs as number) >= 0 && (b.logprobs as number) <= 5)) {
    throw invalid('logprobs must be an integer from 0 to 5.', 'logprobs');
  }
  const passed: Json = {};
  for (const field of PASSED_THROUGH) if (b[field] !== undefined && b[field] !== null) passed[field] = b[field];
  return {
    model,
    messages: [{ role: 'user', content: prompt }],
    max_tokens: optionalPositiveInt(b, 'max_tokens') ?? DEFAULT_COMPLETION_MAX_TOKENS,
    ...defined({
      temperature: optionalNumber(b, 'temperature'),
      top_p: optionalNumber(b, 'top_p'),
      stop: stopOf(b.stop),
    }),
    ...passed,
    ...streamFields(optionalBoolean(b, 'stream')),
  };
}

/** What the answer needs from the request: the prompt (for echo) and whether usage was asked for. */
export function completionsOptions(body: unknown): { prompt: string; echo: boolean; includeUsage: boolean } {
  const b = requireBody(body);
  const options = b.stream_options;
  return {
    prompt: promptOf(b),
    echo: b.echo === true,
    includeUsage: typeof options === 'object' && options !== null && (options as Json).include_usage === true,
  };
}

/** A string, or an array of exactly one string; token arrays and batches are refused. */
function promptOf(b: Json): string {
  const prompt = b.prompt;
  if (typeof prompt === 'string') return prompt;
  if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string') return prompt[0];
  throw invalid('prompt must be a string (or an array of exactly one string).', 'prompt');
}

function stopOf(stop: unknown): string | string[] | undefined {
  if (stop === undefined || stop === null) return undefined;
  if (typeof stop === 'string' || (Array.isArray(stop) && stop.every((s) => typeof s === 'string'))) return stop;
  throw invalid('stop must be a string or an array of strings.', 'stop');
}

export interface TextCompletion {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: Array<{ text: string; index: number; logprobs: null; finish_reason: string | null }>;
  usage?: CostedUsage;
}

export function chatToCompletion(
  completion: ChatCompletion & { usage: CostedUsage },
  options: { prompt: string; echo: boolean; model?: string },
): TextCompletion {
  const choice = completion.choices[0];
  const content = typeof choice?.message.content === 'string' ? choice.message.content : '';
  return {
    id: completion.id,
    object: 'text_completion',
    created: completion.created,
    model: options.model ?? completion.model,
    choices: [{ text: (options.echo ? options.prompt : '') + content, index: 0, logprobs: null, finish_reason: choice?.finish_reason ?? null }],
    usage: completion.usage,
  };
}

/**
 * Chat chunks -> legacy `text_completion` chunks (data-only SSE). The first frame carries the
 * prompt when echo is on; `finish` adds the usage chunk when the client asked for it, then
 * `[DONE]`.
 */
export class CompletionsStreamEncoder {
  private echoed: boolean;

  constructor(private readonly options: { id: string; created: number; model: string; prompt: string; echo: boolean; includeUsage: boolean }) {
    this.echoed = !options.echo;
  }

  chunk(c: ChatChunk): string[] {
    const choice = c.choices[0];
    if (!choice) return [];
    const content = typeof choice.delta.content === 'string' ? choice.delta.content : '';
    const text = this.echo() + content;
    if (text === '' && !choice.finish_reason) return [];
    return [this.frame(text, choice.finish_reason ?? null)];
  }

  finish(usage: CostedUsage): string[] {
    const frames: string[] = [];
    const pending = this.echo();
    if (pending !== '') frames.push(this.frame(pending, null));
    if (this.options.includeUsage) frames.push(sseFrame({ ...this.base(), choices: [], usage }));
    frames.push(SSE_DONE);
    return frames;
  }

  /** The OpenAI SDK throws on a data frame with an `error` member. */
  error(body: GatewayErrorBody): string[] {
    return [sseFrame({ error: body.error })];
  }

  /** The prompt, the first time only, when echoing. */
  private echo(): string {
    if (this.echoed) return '';
    this.echoed = true;
    return this.options.prompt;
  }

  private base() {
    return { id: this.options.id, object: 'text_completion' as const, created: this.options.created, model: this.options.model };
  }

  private frame(text: string, finishReason: string | null): string {
    return sseFrame({ ...this.base(), choices: [{ text, index: 0, logprobs: null, finish_reason: finishReason }] });
  }
}
