/**
 * The chat plugins of spec 4.2 (`plugins`, `transforms`): which are on
 * for a request, and the context-compression step that runs before the call. The algorithms
 * themselves are pure functions in libs/providers/src/plugins.
 */
import type { CatalogModel } from '@svc/catalog';
import { ApiError } from '@svc/platform';
import { compressMessages, isRecord } from '@svc/providers';

export const PLUGIN_IDS = ['web', 'response-healing', 'context-compression'] as const;
type PluginId = (typeof PLUGIN_IDS)[number];

/** Spec section 8: context compression is on by default for models with 8K context or less. */
export const COMPRESSION_DEFAULT_MAX_CONTEXT = 8192;

export interface ChatPlugins {
  healing: boolean;
  /** true or false when the request said so; null leaves it to the model's context size. */
  compression: boolean | null;
}

/**
 * Reads `plugins` and `transforms`. A plugin listed without `enabled: false` is on; `enabled:
 * false` turns it off, as does `transforms: []` for compression (the plugin entry wins when both
 * are given). Web search is not available yet: asking for it is a 400 rather than an answer
 * silently without the search.
 */
export function readPlugins(request: { plugins?: unknown; transforms?: unknown }): ChatPlugins {
  const asked = new Map<PluginId, boolean>();
  if (request.plugins !== undefined) {
    if (!Array.isArray(request.plugins)) throw ApiError.invalidRequest('plugins must be an array of objects with an id.', 'plugins');
    request.plugins.forEach((plugin: unknown, i) => {
      if (!isRecord(plugin) || !PLUGIN_IDS.includes(plugin.id as PluginId)) {
        throw ApiError.invalidRequest(`plugins[${i}].id must be one of ${PLUGIN_IDS.join(', ')}.`, `plugins[${i}].id`);
      }
      if (plugin.enabled !== undefined && typeof plugin.enabled !== 'boolean') {
        throw ApiError.invalidRequest(`plugins[${i}].enabled must be a boolean.`, `plugins[${i}].enabled`);
      }
      asked.set(plugin.id as PluginId, plugin.enabled !== false);
    });
  }
  if (asked.get('web')) throw webUnavailable('plugins');

  let middleOut: boolean | null = null;
  if (request.transforms !== undefined) {
    if (!Array.isArray(request.transforms)) throw ApiError.invalidRequest('transforms must be an array: ["middle-out"] or [].', 'transforms');
    request.transforms.forEach((t: unknown, i) => {
      if (t !== 'middle-out') throw ApiError.invalidRequest(`transforms[${i}] must be "middle-out".`, `transforms[${i}]`);
    });
    middleOut = request.transforms.length > 0;
  }
  return { healing: asked.get('response-healing') ?? false, compression: asked.get('context-compression') ?? middleOut };
}

function webUnavailable(param: string): ApiError {
  return ApiError.invalidRequest(
    "Web search (plugin 'web', model suffix ':online') is not available yet; send the request without it.",
    param,
    'unsupported_parameter',
  );
}

/**
 * Spec 4.2 rule 9: the messages to send, and how many were dropped. With compression on, middle
 * messages go until the prompt plus the output cap fits the model's context window (without a
 * cap, until the prompt does). With it off, the messages go as they are; only a prompt that
 * alone exceeds the window is refused, since no upstream could take it. A cap beyond the room
 * left is the upstream's to judge, as without the gateway. What cannot fit is a 400 here rather
 * than a provider error after a hold.
 */
export function fitContext<M>(messages: readonly M[], model: CatalogModel, maxOutput: number | null, compression: boolean | null): { messages: M[]; dropped: number } {
  const on = compression ?? model.contextLength <= COMPRESSION_DEFAULT_MAX_CONTEXT;
  const budget = on ? model.contextLength - (maxOutput ?? 0) : model.contextLength;
  const fitted = compressMessages(messages, on ? budget : Number.POSITIVE_INFINITY);
  if (fitted.promptTokens <= budget) return { messages: fitted.messages, dropped: fitted.dropped };
  const cap = on && maxOutput !== null ? ` plus max_tokens (${maxOutput})` : '';
  const advice = on
    ? 'even after context compression dropped every message it may; shorten the system prompt or the latest message, or lower max_tokens'
    : 'and context compression is off; shorten the conversation or enable the context-compression plugin';
  throw ApiError.invalidRequest(
    `The prompt (${fitted.promptTokens} tokens)${cap} exceeds the context window of '${model.id}' (${model.contextLength} tokens), ${advice}.`,
    'messages',
  );
}
