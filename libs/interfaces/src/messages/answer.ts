/**
 * Answer: a chat completion -> a Messages `message` (stop reason, usage, the web search's blocks
 * and citations).
 */
import { isRecord, type ChatCompletion } from '@svc/providers';
import { type CostedUsage, cachedTokens, cacheWriteTokens, count, type Json } from '../types';
import { type WebSearchRun, urlCitations } from '../web-search';
import { WEB_SEARCH_NAME } from './tools';

export type AnthropicStopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'pause_turn' | 'refusal';

/**
 * The reverse of the FINISH_REASONS table in providers/src/anthropic.ts. A stop sequence hit
 * arrives as plain `stop`; which one matched comes apart, see stopOfAnswer.
 */
const STOP_REASONS: Record<string, AnthropicStopReason> = {
  stop: 'end_turn',
  length: 'max_tokens',
  tool_calls: 'tool_use',
  function_call: 'tool_use',
  content_filter: 'refusal',
};

/** Anthropic ends every turn that calls tools with `tool_use`; some upstreams say `stop` there. */
function stopReasonOf(finishReason: string | null | undefined, calledTools: boolean): AnthropicStopReason {
  const reason = (finishReason ? STOP_REASONS[finishReason] : undefined) ?? 'end_turn';
  return calledTools && reason === 'end_turn' ? 'tool_use' : reason;
}

/**
 * Anthropic's `stop_reason` and `stop_sequence`. OpenAI's finish_reason is "stop" for a natural
 * end and a stop sequence alike, and the text never holds the sequence, so the gateway cannot
 * tell them apart by itself: the upstream says which sequence matched as vLLM's OpenAI server
 * does, in the choice's `stop_reason` (the Anthropic adapter turns Anthropic's `stop_sequence`
 * into it; the simulator reports it). It counts only when it is one of the sequences the request
 * sent, so a token id or an upstream's own stop string is still `end_turn`. An upstream that
 * does not report it (OpenAI itself) gives `end_turn`, as before.
 */
export function stopOfAnswer(
  finishReason: string | null | undefined,
  matched: unknown,
  calledTools: boolean,
  stopSequences: readonly string[],
): { stop_reason: AnthropicStopReason; stop_sequence: string | null } {
  if (finishReason === 'stop' && !calledTools && typeof matched === 'string' && stopSequences.includes(matched)) {
    return { stop_reason: 'stop_sequence', stop_sequence: matched };
  }
  return { stop_reason: stopReasonOf(finishReason, calledTools), stop_sequence: null };
}

export interface AnthropicUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  /** The gateway's price of the call in USD; SDKs ignore it. */
  cost: number;
  /** Only when a search ran; web fetch is not a tool the gateway offers. */
  server_tool_use?: { web_search_requests: number; web_fetch_requests: number };
}

/**
 * Anthropic counts cache reads and cache writes apart from `input_tokens`, whereas OpenAI's
 * prompt_tokens includes them. So input_tokens = prompt_tokens - cached_tokens - cache writes,
 * and the three add up to prompt_tokens again. Cache writes are only known when the upstream was
 * Anthropic (the adapter reports `prompt_tokens_details.cache_write_tokens`); otherwise 0.
 */
export function anthropicUsage(usage: CostedUsage): AnthropicUsage {
  const read = cachedTokens(usage);
  const write = cacheWriteTokens(usage);
  return {
    input_tokens: Math.max(count(usage.prompt_tokens) - read - write, 0),
    output_tokens: count(usage.completion_tokens),
    cache_creation_input_tokens: write,
    cache_read_input_tokens: read,
    cost: count(usage.cost),
    ...(reportsSearches(usage) ? { server_tool_use: { web_search_requests: usage.server_tool_use.web_search_requests, web_fetch_requests: 0 } } : {}),
  };
}

/** The chat pipeline's usage counts the searches it ran, outside the ChatUsage type. */
function reportsSearches(usage: CostedUsage): usage is CostedUsage & { server_tool_use: { web_search_requests: number } } {
  return 'server_tool_use' in usage && isRecord(usage.server_tool_use) && typeof usage.server_tool_use.web_search_requests === 'number';
}

export interface AnthropicMessage {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: Json[];
  stop_reason: AnthropicStopReason;
  stop_sequence: string | null;
  usage: AnthropicUsage;
}

/**
 * With `webSearch`, the search the chat pipeline ran comes first, as Anthropic's server tool
 * blocks. `stopSequences` are the request's, for telling which one ended the text.
 */
export function chatToMessage(
  completion: ChatCompletion & { usage: CostedUsage },
  requestedModel: string,
  webSearch?: WebSearchRun | null,
  stopSequences: readonly string[] = [],
): AnthropicMessage {
  const choice = completion.choices[0];
  const message = choice?.message;
  const content: Json[] = [];
  if (webSearch) {
    const { call, result } = searchBlocks(webSearch);
    content.push(call, result);
  }
  if (typeof message?.reasoning === 'string' && message.reasoning !== '') {
    content.push({ type: 'thinking', thinking: message.reasoning, signature: '' });
  }
  const text = typeof message?.content === 'string' && message.content !== '' ? message.content : message?.refusal;
  if (typeof text === 'string' && text !== '') {
    const citations = webSearch ? citationsOf(text, webSearch) : [];
    content.push({ type: 'text', text, ...(citations.length > 0 ? { citations } : {}) });
  }
  const calls = message?.tool_calls ?? [];
  for (const call of calls) {
    content.push({ type: 'tool_use', id: call.id, name: call.function.name, input: parseInput(call.function.arguments) });
  }
  return {
    id: completion.id,
    type: 'message',
    role: 'assistant',
    model: requestedModel,
    content,
    ...stopOfAnswer(choice?.finish_reason, choice?.stop_reason, calls.length > 0, stopSequences),
    usage: anthropicUsage(completion.usage),
  };
}

/** Anthropic marks the server tools it ran itself (rather than code execution) with this caller. */
const DIRECT_CALLER = { type: 'direct' };

/**
 * The search as Anthropic's web search tool reports it: the call, then its results. Anthropic
 * encrypts each result for its own later turns; we have no encryption contract with the client,
 * so `encrypted_content` is the page text in base64url, as opaque to SDKs as Anthropic's.
 */
export function searchBlocks(run: WebSearchRun): { call: Json & { input: Json }; result: Json } {
  const id = `srvtoolu_${run.id}`;
  const results = run.hits.map((hit) => ({
    type: 'web_search_result',
    url: hit.url,
    title: hit.title,
    encrypted_content: base64url(hit.content),
    page_age: hit.date ?? null,
  }));
  return {
    call: { type: 'server_tool_use', id, name: WEB_SEARCH_NAME, input: { query: run.query }, caller: DIRECT_CALLER },
    result: { type: 'web_search_tool_result', tool_use_id: id, caller: DIRECT_CALLER, content: results },
  };
}

/** Anthropic quotes at most this much of a cited result. */
const CITED_TEXT_CHARS = 150;

/**
 * Citations of the results the text cites (their markdown link or bare URL); `encrypted_index`
 * names the result by its position, in base64url for the reason encrypted_content is.
 */
export function citationsOf(text: string, run: WebSearchRun): Json[] {
  return urlCitations(text, run).flatMap((citation, i) =>
    citation.end_index > 0
      ? [
          {
            type: 'web_search_result_location',
            url: citation.url,
            title: citation.title,
            cited_text: citation.content.slice(0, CITED_TEXT_CHARS),
            encrypted_index: base64url(String(i)),
          },
        ]
      : [],
  );
}

function base64url(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64url');
}

/** Tool arguments as the `input` object; arguments that are not a JSON object give `{}`. */
function parseInput(args: string): Json {
  try {
    const input: unknown = JSON.parse(args);
    return isRecord(input) ? input : {};
  } catch {
    return {};
  }
}
