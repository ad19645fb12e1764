/**
 * Token accounting shared by the simulated upstream (which reports `prompt_tokens` with it) and
 * the gateway (which reserves the worst case with it). Both sides use the same function, so the
 * gateway's estimate for a simulated model is never below what the simulator later reports.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { GptEncoding } from 'gpt-tokenizer/GptEncoding';
import { isRecord } from './json';

/**
 * The encoding's ranks as JSON, written beside this file by the build (scripts/tokenizer-ranks.js).
 * gpt-tokenizer ships them as a 2.2 MB JavaScript module: compiling it left a process 65-75 MB
 * more resident memory once the encoding was built, parsing the same array as JSON 46 MB. Run
 * from the sources (the tests) there is no such file, and the module is required instead.
 */
const O200K_RANKS_JSON = join(__dirname, 'o200k_base.ranks.json');

/** The o200k_base encoding, its ranks read from `ranksJson` when that file is there. */
export function loadO200k(ranksJson = O200K_RANKS_JSON): GptEncoding {
  // The specific modules: the package root would load every encoding's ranks.
  const { GptEncoding } = require('gpt-tokenizer/GptEncoding') as typeof import('gpt-tokenizer/GptEncoding');
  return GptEncoding.getEncodingApi('o200k_base', () => {
    let text: string;
    try {
      text = readFileSync(ranksJson, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      return (require('gpt-tokenizer/bpeRanks/o200k_base') as typeof import('gpt-tokenizer/bpeRanks/o200k_base')).default;
    }
    return JSON.parse(text) as (string | number[])[];
  });
}

// Its ranks take half a second of CPU to build, so it is built by the first count: the CLI, the
// video and webhook workers never count, and a gateway warms it before it listens.
let encoding: GptEncoding | undefined;
const o200k = () => (encoding ??= loadO200k());

/** Builds the encoding now, so that the first request does not wait for it. */
export function warmTokenCounting(): void {
  o200k();
}

/** User text may contain `<|endoftext|>` and the like; it is text to count, not a control token. */
const AS_PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

/** OpenAI's published accounting: every message is wrapped in 3 framing tokens... */
const TOKENS_PER_MESSAGE = 3;
/** ...a `name` costs one more... */
const TOKENS_PER_NAME = 1;
/** ...and the reply is primed with `<|start|>assistant<|message|>`. */
const REPLY_PRIMING_TOKENS = 3;
/**
 * Fixed allowance per non-text content part (image, audio, file). Their real cost depends on the
 * upstream (image detail and size, page count), which is unknown before the call.
 */
export const NON_TEXT_PART_TOKENS = 85;

/**
 * BPE on one piece of text costs time quadratic in the piece's length (a 100,000-letter run took
 * minutes), so text is encoded in pieces of at most this many characters, cut before a white
 * space where one is near: linear, and the same count give or take a token per cut (a cut only
 * prevents merges, so the count can only grow).
 */
const PIECE_CHARS = 1_000;
/** How far back from a piece's end a white space is looked for to cut at. */
const CUT_LOOKBACK = 64;

/**
 * How long one count (one request's prompt) may spend encoding exactly. Even in pieces, BPE
 * costs 0.2 us a character on prose and up to 5 us on base64-like text, so a 10 MB body could
 * hold a process for most of a minute. Past the budget the rest counts as its UTF-8 bytes: a
 * byte-level BPE never makes more tokens than bytes, so the count stays an upper bound (spec 1
 * rule 1: the hold is a true worst case), only a looser one. Prose (~1 MB in 75 ms here) is
 * counted exactly far beyond any context window; only hostile text meets the budget. A CPU
 * budget, not a time rule: it reads the monotonic clock, and its only effect is a looser bound.
 */
export const EXACT_COUNT_MS = 250;

/** What is left of one count's budget; shared by every string of one request. */
export class TokenBudget {
  private readonly until: number;
  constructor(ms = EXACT_COUNT_MS) {
    // The budget is for encoding: building the encoding on a process's first count must not spend it.
    o200k();
    this.until = performance.now() + ms;
  }
  spent(): boolean {
    return performance.now() >= this.until;
  }
}

/** The o200k token ids of `text` (whisper's segments list theirs). */
export function encodeText(text: string): number[] {
  return o200k().encode(text);
}

export function countTextTokens(text: string, budget = new TokenBudget()): number {
  let total = 0;
  for (let start = 0; start < text.length;) {
    if (budget.spent()) return total + Buffer.byteLength(start === 0 ? text : text.slice(start), 'utf8');
    const end = pieceEnd(text, start);
    total += o200k().encode(text.slice(start, end), AS_PLAIN_TEXT).length;
    start = end;
  }
  return total;
}

/** Where the piece starting at `start` ends: before a white space near PIECE_CHARS, never inside a surrogate pair. */
export function pieceEnd(text: string, start: number): number {
  const limit = start + PIECE_CHARS;
  if (limit >= text.length) return text.length;
  for (let i = limit; i > limit - CUT_LOOKBACK; i--) {
    if (/\s/.test(text[i])) return i;
  }
  const code = text.charCodeAt(limit - 1);
  return code >= 0xd800 && code <= 0xdbff ? limit - 1 : limit;
}

/**
 * Prompt tokens of an OpenAI chat `messages` array: role, name, content (text parts counted, any
 * other part a fixed allowance), tool calls (name and arguments) and tool_call_id of every
 * message, plus the framing tokens. Accepts unvalidated JSON: malformed entries count as empty.
 */
export function countChatPromptTokens(messages: readonly unknown[], budget = new TokenBudget()): number {
  let total = REPLY_PRIMING_TOKENS;
  for (const message of messages) {
    if (!isRecord(message)) continue;
    total += TOKENS_PER_MESSAGE + textTokens(message.role, budget) + contentTokens(message.content, budget);
    total += textTokens(message.tool_call_id, budget);
    if (typeof message.name === 'string') total += TOKENS_PER_NAME + countTextTokens(message.name, budget);
    if (Array.isArray(message.tool_calls)) {
      for (const call of message.tool_calls) {
        const fn = isRecord(call) && isRecord(call.function) ? call.function : {};
        total += textTokens(fn.name, budget) + textTokens(fn.arguments, budget);
      }
    }
  }
  return total;
}

/**
 * The longest prefix of `text` that is at most `maxTokens` tokens when counted on its own.
 * Cutting the token array can split a multi-byte character or re-tokenise differently, so the
 * candidate is checked against the original text and recounted.
 */
export function truncateToTokens(text: string, maxTokens: number): string {
  // No token is anywhere near this long: what lies beyond cannot be in the prefix, and is not encoded.
  text = text.slice(0, pieceEnd(text, 0) + maxTokens * 64);
  const tokens: number[] = [];
  for (let start = 0; start < text.length && tokens.length <= maxTokens;) {
    const end = pieceEnd(text, start);
    tokens.push(...o200k().encode(text.slice(start, end), AS_PLAIN_TEXT));
    start = end;
  }
  if (tokens.length <= maxTokens) return text;
  for (let keep = maxTokens; keep > 0; keep--) {
    const prefix = o200k().decode(tokens.slice(0, keep));
    if (text.startsWith(prefix) && countTextTokens(prefix) <= maxTokens) return prefix;
  }
  return '';
}

function contentTokens(content: unknown, budget: TokenBudget): number {
  if (!Array.isArray(content)) return textTokens(content, budget);
  let total = 0;
  for (const part of content) {
    total += isRecord(part) && part.type === 'text' ? textTokens(part.text, budget) : NON_TEXT_PART_TOKENS;
  }
  return total;
}

function textTokens(value: unknown, budget: TokenBudget): number {
  return typeof value === 'string' ? countTextTokens(value, budget) : 0;
}
