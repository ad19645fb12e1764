/**
 * Answer: a chat completion -> a `response` object.
 */
import { isRecord, type ChatCompletion } from '@svc/providers';
import type {
  ReasoningItem,
  ItemStatus,
  MessageItem,
  WebSearchCallItem,
  FunctionCallItem,
  ResponseObject,
  ResponseUsage,
  ResponseContext,
  ResponseItem,
  ResponseStatus,
} from './objects';
import { type Json, type CostedUsage, count, cachedTokens, reasoningTokens } from '../types';
import { type WebSearchRun, urlCitations } from '../web-search';

/** Output item ids from the response id and the item's position, so a stream and a replay agree. */
export function itemId(responseId: string, prefix: 'msg' | 'fc' | 'rs', outputIndex: number): string {
  return `${prefix}_${responseId.replace(/^resp_/, '')}_${outputIndex}`;
}

export function reasoningItem(id: string, text: string): ReasoningItem {
  return { type: 'reasoning', id, summary: [{ type: 'summary_text', text }] };
}

export function outputText(text: string, annotations: Json[] = []): Json {
  return { type: 'output_text', text, annotations };
}

export function messageItem(id: string, text: string, status: ItemStatus, annotations: Json[] = []): MessageItem {
  return { type: 'message', id, status, role: 'assistant', content: [outputText(text, annotations)] };
}

/**
 * The search as OpenAI's web_search tool reports it. Its sources are always there: OpenAI sends
 * them only when `include` asks, but they are what clients show and cost nothing to send.
 */
export function webSearchCallItem(run: WebSearchRun, status: 'in_progress' | 'completed'): WebSearchCallItem {
  const sources = status === 'completed' ? { sources: run.hits.map((hit) => ({ type: 'url' as const, url: hit.url })) } : {};
  return { type: 'web_search_call', id: `ws_${run.id}`, status, action: { type: 'search', query: run.query, ...sources } };
}

/** Every result as a flat `url_citation` of the answer (0 and 0 when the answer does not cite it), as chat annotates it. */
export function annotationsOf(text: string, run: WebSearchRun | null | undefined): Json[] {
  if (!run) return [];
  return urlCitations(text, run).map(({ url, title, start_index, end_index }) => ({ type: 'url_citation', url, title, start_index, end_index }));
}

export function functionCallItem(id: string, callId: string, name: string, args: string, status: ItemStatus): FunctionCallItem {
  return { type: 'function_call', id, call_id: callId, name, arguments: args, status };
}

/** Chat finish reason -> the response's status and, when incomplete, why. */
export function outcomeOf(finishReason: string | null | undefined): Pick<ResponseObject, 'status' | 'incomplete_details'> {
  if (finishReason === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (finishReason === 'content_filter') return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

/** OpenAI counts cached tokens inside input_tokens, as chat's prompt_tokens does. */
export function responseUsage(usage: CostedUsage): ResponseUsage {
  const input = count(usage.prompt_tokens);
  const output = count(usage.completion_tokens);
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cachedTokens(usage) },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoningTokens(usage) },
    total_tokens: count(usage.total_tokens) || input + output,
    cost: count(usage.cost),
  };
}

export function buildResponse(
  ctx: ResponseContext,
  state: Pick<ResponseObject, 'status' | 'incomplete_details' | 'output' | 'usage' | 'error'>,
): ResponseObject {
  const req = isRecord(ctx.request) ? ctx.request : {};
  const reasoning = isRecord(req.reasoning) ? req.reasoning : {};
  return {
    id: ctx.id,
    object: 'response',
    created_at: ctx.created,
    status: state.status,
    background: false,
    error: state.error,
    incomplete_details: state.incomplete_details,
    instructions: req.instructions ?? null,
    max_output_tokens: req.max_output_tokens ?? null,
    model: ctx.model,
    provider: ctx.provider ?? null,
    output: state.output,
    parallel_tool_calls: req.parallel_tool_calls ?? true,
    previous_response_id: ctx.previousResponseId ?? null,
    reasoning: { effort: reasoning.effort ?? null, summary: reasoning.summary ?? null },
    store: ctx.store ?? true,
    temperature: req.temperature ?? 1,
    text: isRecord(req.text) ? { format: { type: 'text' }, ...req.text } : { format: { type: 'text' } },
    tool_choice: req.tool_choice ?? 'auto',
    tools: req.tools ?? [],
    top_p: req.top_p ?? 1,
    truncation: req.truncation ?? 'disabled',
    usage: state.usage,
    user: req.user ?? null,
    metadata: req.metadata ?? {},
  };
}

/**
 * Output items in the order a stream produces them: the web search call when one ran, reasoning,
 * the message, function calls. The message is left out when there is no text but there are
 * function calls. When the answer was cut short, the last item is `incomplete`.
 */
export function chatToResponse(completion: ChatCompletion & { usage: CostedUsage }, ctx: ResponseContext): ResponseObject {
  const choice = completion.choices[0];
  const message = choice?.message;
  const outcome = outcomeOf(choice?.finish_reason);
  const output: ResponseItem[] = ctx.webSearch ? [webSearchCallItem(ctx.webSearch, 'completed')] : [];
  if (typeof message?.reasoning === 'string' && message.reasoning !== '') {
    output.push(reasoningItem(itemId(ctx.id, 'rs', output.length), message.reasoning));
  }
  const text = typeof message?.content === 'string' ? message.content : '';
  const calls = message?.tool_calls ?? [];
  if (text !== '' || calls.length === 0) {
    output.push(messageItem(itemId(ctx.id, 'msg', output.length), text, 'completed', annotationsOf(text, ctx.webSearch)));
  }
  for (const call of calls) {
    output.push(functionCallItem(itemId(ctx.id, 'fc', output.length), call.id, call.function.name, call.function.arguments, 'completed'));
  }
  markLastIncomplete(output, outcome.status);
  return buildResponse(ctx, { ...outcome, output, usage: responseUsage(completion.usage), error: null });
}

function markLastIncomplete(output: ResponseItem[], status: ResponseStatus): void {
  const last = output.at(-1);
  if (status === 'incomplete' && last && (last.type === 'message' || last.type === 'function_call')) last.status = 'incomplete';
}
