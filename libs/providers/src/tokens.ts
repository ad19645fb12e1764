/**
 * Token accounting shared by the simulated upstream (which reports `prompt_tokens` with it) and
 * the gateway (which reserves the worst case with it). Both sides use the same function, so the
 * gateway's estimate for a simulated model is never below what the simulator later reports.
 */
// The specific encoding module: importing the package root would load every encoding's ranks.
import { decode, encode } from 'gpt-tokenizer/encoding/o200k_base';
import { isRecord } from './json';

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

export function countTextTokens(text: string): number {
  return encode(text, AS_PLAIN_TEXT).length;
}

/**
 * Prompt tokens of an OpenAI chat `messages` array: role, name, content (text parts counted, any
 * other part a fixed allowance), tool calls (name and arguments) and tool_call_id of every
 * message, plus the framing tokens. Accepts unvalidated JSON: malformed entries count as empty.
 */
export function countChatPromptTokens(messages: readonly unknown[]): number {
  let total = REPLY_PRIMING_TOKENS;
  for (const message of messages) {
    if (!isRecord(message)) continue;
    total += TOKENS_PER_MESSAGE + textTokens(message.role) + contentTokens(message.content);
    total += textTokens(message.tool_call_id);
    if (typeof message.name === 'string') total += TOKENS_PER_NAME + countTextTokens(message.name);
    if (Array.isArray(message.tool_calls)) {
      for (const call of message.tool_calls) {
        const fn = isRecord(call) && isRecord(call.function) ? call.function : {};
        total += textTokens(fn.name) + textTokens(fn.arguments);
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
  const tokens = encode(text, AS_PLAIN_TEXT);
  if (tokens.length <= maxTokens) return text;
  for (let keep = maxTokens; keep > 0; keep--) {
    const prefix = decode(tokens.slice(0, keep));
    if (text.startsWith(prefix) && countTextTokens(prefix) <= maxTokens) return prefix;
  }
  return '';
}

function contentTokens(content: unknown): number {
  if (!Array.isArray(content)) return textTokens(content);
  let total = 0;
  for (const part of content) {
    total += isRecord(part) && part.type === 'text' ? textTokens(part.text) : NON_TEXT_PART_TOKENS;
  }
  return total;
}

function textTokens(value: unknown): number {
  return typeof value === 'string' ? countTextTokens(value) : 0;
}
