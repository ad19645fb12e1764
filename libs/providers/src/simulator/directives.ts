/**
 * `#sim {json}` directives: a line starting with `#sim ` in the LAST user message (or in an
 * embeddings input string) steers the simulated model. Several directives combine in one object,
 * or over several `#sim` lines. Invalid JSON, an unknown directive or a bad value is a 400, so a
 * typo in a test cannot silently turn into a passing happy path.
 *
 * - `{"fail": 503}`: answer that status (400-599) with an OpenAI error body, before any output,
 *   streamed requests included. Also on embeddings.
 * - `{"fail_models": {"sim/echo": 503}}`: the same, only for requests whose `model` (the upstream
 *   model id) is a key of the map; other models answer normally. The same prompt goes to every
 *   model of a fallback chain, so this is how a test fails the primary and not the fallback.
 *   `fail` wins when both are given. Also on embeddings.
 * - `{"fail_search": 503}`: the same status, only on the search routes (SearXNG's and Tavily's
 *   `/search`); every other route accepts it and ignores it. A chat request's web search sends
 *   the same last user message as its query, so this is how a test fails the search and not the
 *   model.
 * - `{"delay_ms": 200}`: wait before answering (before a `fail` too). Also on embeddings.
 * - `{"completion_tokens": 12}`: content of exactly 12 tokens; 0 gives empty content.
 * - `{"chunk_delay_ms": 50}`: wait before every stream chunk after the first.
 * - `{"cut_after_chunks": 3}`: streamed, destroy the socket after the role chunk and 3 output
 *   chunks (all of them when there are fewer): no finish chunk, no `[DONE]`. Non-streamed,
 *   destroy the socket without answering.
 * - `{"reasoning_tokens": 10}`: `message.reasoning` (`delta.reasoning`) of 10 tokens, counted in
 *   `completion_tokens` and in `completion_tokens_details.reasoning_tokens`, as OpenAI does.
 * - `{"cached_tokens": 8}`: `prompt_tokens_details.cached_tokens` = min(8, prompt_tokens).
 * - `{"tool_call": {"name": "f", "arguments": {...}}}`: one tool call (deterministic id,
 *   arguments as a JSON string), content null, finish_reason `tool_calls`.
 * - `{"malformed_json": true}`: content is JSON cut short, `{"answer": "<echo>", "items": [1, 2,`,
 *   for the response-healing plugin.
 *
 * - `{"fail": true}` (a boolean, not a status): on the video routes (./videos.ts), the job
 *   is accepted and then fails once half done: status `failed`, error `{code:
 *   "video_generation_failed", message}`. Every other route accepts it and ignores it.
 * - `{"stall": true}`: on the video routes, the job stays `in_progress` until it is cancelled
 *   (or deleted); every other route accepts it and ignores it.
 *
 * - `{"empty": true}`: an answer with nothing in it, on the media, rerank and search routes:
 *   images `data: []`, speech audio of no samples, a transcript `text: ""` with no segments,
 *   rerank, moderations and search `results: []`. Chat and embeddings ignore it.
 *
 * The other routes read their directives from `prompt` (images, and the transcription `prompt`
 * field together with `#sim` lines inside the uploaded file), `input` (speech, and every text
 * input of moderations) or the query (rerank's `query`, SearXNG's `q`, Tavily's `query`); there
 * `fail`, `fail_models`, `delay_ms` and `empty` apply (`fail_models` never on search, whose
 * requests name no model), and the chat-only ones are accepted and ignored.
 *
 * Content precedence: tool_call, then malformed_json, then completion_tokens, else the echo.
 * `max_completion_tokens` (or `max_tokens`) caps reasoning plus text content, as OpenAI's cap
 * does, with finish_reason `length` when it cuts; a tool call is never cut.
 */
import { isRecord } from '../json';

export interface SimDirectives {
  /** A status fails the request; `true` fails a video job after it started. */
  fail?: number | true;
  fail_models?: Record<string, number>;
  fail_search?: number;
  delay_ms?: number;
  completion_tokens?: number;
  chunk_delay_ms?: number;
  cut_after_chunks?: number;
  reasoning_tokens?: number;
  cached_tokens?: number;
  tool_call?: { name: string; arguments?: Record<string, unknown> };
  malformed_json?: boolean;
  empty?: boolean;
  stall?: boolean;
}

export class DirectiveError extends Error {}

const isCount = (v: unknown) => Number.isInteger(v) && (v as number) >= 0;
const isFailStatus = (v: unknown) => Number.isInteger(v) && (v as number) >= 400 && (v as number) <= 599;

const VALID: { [K in keyof Required<SimDirectives>]: (value: unknown) => boolean } = {
  fail: (v) => v === true || isFailStatus(v),
  fail_models: (v) => isRecord(v) && Object.values(v).every(isFailStatus),
  fail_search: isFailStatus,
  delay_ms: isCount,
  completion_tokens: isCount,
  chunk_delay_ms: isCount,
  cut_after_chunks: isCount,
  reasoning_tokens: isCount,
  cached_tokens: isCount,
  tool_call: (v) => isRecord(v) && typeof v.name === 'string' && v.name !== '' && (v.arguments === undefined || isRecord(v.arguments)),
  malformed_json: (v) => typeof v === 'boolean',
  empty: (v) => typeof v === 'boolean',
  stall: (v) => typeof v === 'boolean',
};

const PREFIX = '#sim ';

/** Splits `text` into its directives and the remaining text (the `#sim` lines removed). */
export function parseDirectives(text: string): { directives: SimDirectives; text: string } {
  const directives: Record<string, unknown> = {};
  const kept: string[] = [];
  for (const line of text.split(/\r?\n/)) {
    if (!line.startsWith(PREFIX)) {
      kept.push(line);
      continue;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(line.slice(PREFIX.length));
    } catch {
      throw new DirectiveError(`#sim: invalid JSON in "${line}"`);
    }
    if (!isRecord(parsed)) throw new DirectiveError('#sim: expected a JSON object');
    for (const [name, value] of Object.entries(parsed)) {
      if (!Object.hasOwn(VALID, name)) throw new DirectiveError(`#sim: unknown directive "${name}"`);
      if (!VALID[name as keyof SimDirectives](value)) throw new DirectiveError(`#sim: invalid value for "${name}"`);
      directives[name] = value;
    }
  }
  return { directives: directives as SimDirectives, text: kept.join('\n').trim() };
}

/** The status a request for `model` must fail with (`fail` as a status, else `fail_models`), if any. */
export function failureFor(directives: SimDirectives, model: string): number | undefined {
  const perModel = directives.fail_models;
  if (typeof directives.fail === 'number') return directives.fail;
  return perModel && Object.hasOwn(perModel, model) ? perModel[model] : undefined;
}
