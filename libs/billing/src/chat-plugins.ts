/**
 * The chat plugins of spec 4.2 (`plugins`, `transforms`, the `:online` suffix): which are on
 * for a request, with their options, and the context-compression step that runs before the
 * call. The algorithms themselves are pure functions in libs/providers/src/plugins and
 * libs/interfaces (web search).
 */
import type { CatalogModel } from '@svc/catalog';
import { DEFAULT_WEB_RESULTS, searchOptionsOf, type SearchOptions } from '@svc/interfaces';
import { DomainError } from '@svc/platform';
import { compressMessages, isRecord } from '@svc/providers';

export const PLUGIN_IDS = ['web', 'response-healing', 'context-compression'] as const;
type PluginId = (typeof PLUGIN_IDS)[number];

/** Spec section 8: context compression is on by default for models with 8K context or less. */
export const COMPRESSION_DEFAULT_MAX_CONTEXT = 8192;

/** The web plugin's fields: OpenRouter's (`max_results`, `engine`, `search_prompt`), /v1/search's filters, and ours. */
const WEB_FIELDS = ['id', 'enabled', 'max_results', 'engine', 'search_prompt', 'search_domain_filter', 'country', 'on_failure'];

/** Spec 4.2 rule 7: how the web search of a generation runs. */
export interface WebPlugin extends SearchOptions {
  /** A search engine's catalog id; null for the catalog's default. */
  engine: string | null;
  /** The request field an engine error names: the plugin's `engine`, or `model` for `:online`. */
  engineParam: string;
  /** Replaces the instructions given with the results. */
  searchPrompt: string | undefined;
  /**
   * A failed search fails the request, unbilled (the default: an answer without the search
   * the caller asked for would look grounded and is not); `continue` answers without it.
   */
  onFailure: 'fail' | 'continue';
}

export interface ChatPlugins {
  healing: boolean;
  /** true or false when the request said so; null leaves it to the model's context size. */
  compression: boolean | null;
  web: WebPlugin | null;
}

/**
 * Reads `plugins` and `transforms`. A plugin listed without `enabled: false` is on; `enabled:
 * false` turns it off, as does `transforms: []` for compression (the plugin entry wins when both
 * are given). `online` (the model's `:online` suffix) turns web search on with its defaults,
 * unless a web plugin entry says `enabled: false`.
 */
export function readPlugins(request: { plugins?: unknown; transforms?: unknown }, online = false): ChatPlugins {
  const asked = new Map<PluginId, boolean>();
  let web: WebPlugin | null = online ? { ...webPluginOf({}, ''), engineParam: 'model' } : null;
  if (request.plugins !== undefined) {
    if (!Array.isArray(request.plugins)) throw DomainError.invalid('plugins must be an array of objects with an id.', 'plugins');
    request.plugins.forEach((plugin: unknown, i) => {
      if (!isRecord(plugin) || !PLUGIN_IDS.includes(plugin.id as PluginId)) {
        throw DomainError.invalid(`plugins[${i}].id must be one of ${PLUGIN_IDS.join(', ')}.`, `plugins[${i}].id`);
      }
      if (plugin.enabled !== undefined && typeof plugin.enabled !== 'boolean') {
        throw DomainError.invalid(`plugins[${i}].enabled must be a boolean.`, `plugins[${i}].enabled`);
      }
      asked.set(plugin.id as PluginId, plugin.enabled !== false);
      if (plugin.id === 'web') web = plugin.enabled === false ? null : webPluginOf(plugin, `plugins[${i}].`);
    });
  }

  let middleOut: boolean | null = null;
  if (request.transforms !== undefined) {
    if (!Array.isArray(request.transforms)) throw DomainError.invalid('transforms must be an array: ["middle-out"] or [].', 'transforms');
    request.transforms.forEach((t: unknown, i) => {
      if (t !== 'middle-out') throw DomainError.invalid(`transforms[${i}] must be "middle-out".`, `transforms[${i}]`);
    });
    middleOut = request.transforms.length > 0;
  }
  return { healing: asked.get('response-healing') ?? false, compression: asked.get('context-compression') ?? middleOut, web };
}

/** A web plugin entry's options; `at` prefixes the params its errors name (`plugins[0].`). */
function webPluginOf(entry: Record<string, unknown>, at: string): WebPlugin {
  for (const field of Object.keys(entry)) {
    if (!WEB_FIELDS.includes(field))
      throw DomainError.invalid(`${at}${field} is not an option of the web plugin (options: ${WEB_FIELDS.slice(1).join(', ')}).`, `${at}${field}`);
  }
  const text = (field: string): string | undefined => {
    const value = entry[field];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'string' || value.trim() === '') throw DomainError.invalid(`${at}${field} must be a non-empty string.`, `${at}${field}`);
    return value;
  };
  const onFailure = text('on_failure') ?? 'fail';
  if (onFailure !== 'fail' && onFailure !== 'continue') throw DomainError.invalid(`${at}on_failure must be "fail" or "continue".`, `${at}on_failure`);
  return {
    ...searchOptionsOf(entry, DEFAULT_WEB_RESULTS, at),
    engine: text('engine') ?? null,
    engineParam: `${at}engine`,
    searchPrompt: text('search_prompt'),
    onFailure,
  };
}

/**
 * Spec 4.2 rule 9: the messages to send, and how many were dropped. With compression on, middle
 * messages go until the prompt plus the output cap fits the model's context window (without a
 * cap, until the prompt does). With it off, the messages go as they are; only a prompt that
 * alone exceeds the window is refused, since no upstream could take it. A cap beyond the room
 * left is the upstream's to judge, as without the gateway. What cannot fit is a 400 here rather
 * than a provider error after a hold.
 */
export function fitContext<M>(
  messages: readonly M[],
  model: CatalogModel,
  maxOutput: number | null,
  compression: boolean | null,
): { messages: M[]; dropped: number } {
  const on = compression ?? model.contextLength <= COMPRESSION_DEFAULT_MAX_CONTEXT;
  const budget = on ? model.contextLength - (maxOutput ?? 0) : model.contextLength;
  const fitted = compressMessages(messages, on ? budget : Number.POSITIVE_INFINITY);
  if (fitted.promptTokens <= budget) return { messages: fitted.messages, dropped: fitted.dropped };
  const cap = on && maxOutput !== null ? ` plus max_tokens (${maxOutput})` : '';
  const advice = on
    ? 'even after context compression dropped every message it may; shorten the system prompt or the latest message, or lower max_tokens'
    : 'and context compression is off; shorten the conversation or enable the context-compression plugin';
  throw DomainError.invalid(
    `The prompt (${fitted.promptTokens} tokens)${cap} exceeds the context window of '${model.id}' (${model.contextLength} tokens), ${advice}.`,
    'messages',
  );
}
