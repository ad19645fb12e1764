/**
 * Request: a Messages body -> a chat-completions body, and the count_tokens answer; the
 * top-level fields (thinking, output format, stop sequences, metadata) are read here.
 */
import { countTextTokens, countChatPromptTokens, isRecord, MIN_THINKING_BUDGET } from '@svc/providers';
import {
  type ChatRequestBody,
  requireBody,
  requireString,
  optionalPositiveInt,
  invalid,
  optionalBoolean,
  defined,
  optionalNumber,
  streamFields,
  type Json,
} from '../types';
import { conversationOf } from './conversation';
import { anthropicToolsOf, toolChoiceOf } from './tools';

/** The request fields this interface reads (Anthropic's Messages API); others are listed as ignored. */
export const MESSAGES_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'max_tokens',
  'messages',
  'system',
  'tools',
  'tool_choice',
  'stream',
  'temperature',
  'top_k',
  'top_p',
  'stop_sequences',
  'metadata',
  'thinking',
  // Structured outputs: `output_config.format`, and the beta's `output_format` before it.
  'output_config',
  'output_format',
  // Ours (spec 4.2): a preset, applied on the chat pipeline.
  'preset',
]);

export function messagesToChat(body: unknown): ChatRequestBody {
  const b = requireBody(body);
  const model = requireString(b, 'model');
  const maxTokens = optionalPositiveInt(b, 'max_tokens');
  if (maxTokens === undefined) throw invalid('max_tokens is required and must be a positive integer.', 'max_tokens');
  const messages = conversationOf(b);
  const { functions: tools, plugins } = anthropicToolsOf(b.tools);
  const stream = optionalBoolean(b, 'stream');
  return {
    model,
    messages,
    max_tokens: maxTokens,
    ...defined({
      temperature: optionalNumber(b, 'temperature'),
      top_p: optionalNumber(b, 'top_p'),
      top_k: optionalNumber(b, 'top_k'),
      stop: stopOf(b.stop_sequences),
      user: userOf(b.metadata),
      reasoning: reasoningOf(b.thinking, maxTokens),
      response_format: responseFormatOf(b),
      preset: b.preset,
    }),
    ...(tools.length > 0 ? { tools, ...toolChoiceOf(b.tool_choice, plugins.length > 0) } : {}),
    ...(plugins.length > 0 ? { plugins } : {}),
    ...streamFields(stream),
  };
}

/**
 * `POST /v1/messages/count_tokens`: the prompt tokens of the translated chat messages (system
 * included, as a system message) plus the tokens of the tools' JSON as the caller sent them.
 */
export function countMessagesTokens(body: unknown): { input_tokens: number } {
  const b = requireBody(body);
  requireString(b, 'model');
  const messages = conversationOf(b);
  const { functions, plugins } = anthropicToolsOf(b.tools);
  const toolTokens = functions.length + plugins.length > 0 ? countTextTokens(JSON.stringify(b.tools)) : 0;
  return { input_tokens: countChatPromptTokens(messages) + toolTokens };
}

/**
 * `enabled` with a budget -> OpenRouter-style `reasoning.max_tokens`; `adaptive` (the model picks
 * its budget) -> reasoning on without a budget; `disabled` -> nothing. As Anthropic requires, the
 * budget is below `max_tokens` (which caps thinking plus text): the Anthropic adapter would
 * otherwise shrink it, or drop thinking altogether, without a word.
 */
function reasoningOf(thinking: unknown, maxTokens: number): Json | undefined {
  if (thinking === undefined || thinking === null) return undefined;
  if (!isRecord(thinking)) throw invalid('thinking must be an object.', 'thinking');
  if (thinking.type === 'disabled') return undefined;
  if (thinking.type === 'adaptive') return { enabled: true };
  if (thinking.type !== 'enabled') throw invalid('thinking.type must be enabled, adaptive or disabled.', 'thinking.type');
  const budget = thinking.budget_tokens;
  if (typeof budget !== 'number' || !Number.isInteger(budget) || budget < MIN_THINKING_BUDGET) {
    throw invalid(`thinking.budget_tokens must be an integer of at least ${MIN_THINKING_BUDGET}.`, 'thinking.budget_tokens');
  }
  if (budget >= maxTokens) {
    throw invalid(
      `thinking.budget_tokens (${budget}) must be less than max_tokens (${maxTokens}), which counts thinking and text together.`,
      'thinking.budget_tokens',
    );
  }
  return { max_tokens: budget };
}

/**
 * Anthropic's structured outputs (`output_config: {format: {type: "json_schema", schema}}`, or
 * the beta's top-level `output_format` of the same shape, which `client.beta.messages.parse`
 * and older AI SDK versions send) as the chat pipeline's `response_format` json_schema: every
 * provider then gets the schema in its own terms (the Anthropic adapter gives it back as
 * output_config). Anthropic's schema has no name; OpenAI's needs one.
 */
function responseFormatOf(b: Json): Json | undefined {
  const config = b.output_config;
  if (config !== undefined && config !== null && !isRecord(config)) throw invalid('output_config must be an object.', 'output_config');
  const [format, param] = isRecord(config) && config.format != null ? [config.format, 'output_config.format'] : [b.output_format, 'output_format'];
  if (format === undefined || format === null) return undefined;
  if (!isRecord(format) || format.type !== 'json_schema') throw invalid(`${param} must be {type: "json_schema", schema}.`, `${param}.type`);
  if (!isRecord(format.schema)) throw invalid(`${param}.schema must be a JSON schema object.`, `${param}.schema`);
  return { type: 'json_schema', json_schema: { name: 'output', schema: format.schema, strict: true } };
}

/**
 * The fields of a Messages request the gateway does not read, for `x-svc-ignored-params`: the
 * unknown top-level ones, and `output_config.effort`, which no provider is given.
 */
export function ignoredMessagesFields(body: unknown): string[] {
  if (!isRecord(body)) return [];
  const ignored = Object.keys(body).filter((field) => !MESSAGES_FIELDS.has(field));
  if (isRecord(body.output_config) && body.output_config.effort != null) ignored.push('output_config.effort');
  return ignored;
}

function stopOf(stop: unknown): string[] | undefined {
  if (stop === undefined || stop === null) return undefined;
  if (!Array.isArray(stop) || !stop.every((s) => typeof s === 'string')) {
    throw invalid('stop_sequences must be an array of strings.', 'stop_sequences');
  }
  return stop.length > 0 ? stop : undefined;
}

function userOf(metadata: unknown): string | undefined {
  if (metadata === undefined || metadata === null) return undefined;
  if (!isRecord(metadata)) throw invalid('metadata must be an object.', 'metadata');
  const id = metadata.user_id;
  if (id === undefined || id === null) return undefined;
  if (typeof id !== 'string') throw invalid('metadata.user_id must be a string.', 'metadata.user_id');
  return id;
}
