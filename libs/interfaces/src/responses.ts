/**
 * OpenAI's Responses API (`POST /v1/responses`) on top of the chat pipeline: the request (with
 * the conversation of `previous_response_id`, which the caller loads) becomes a chat-completions
 * body; the completion, or the stream of chunks, becomes a `response` object or the Responses
 * stream events.
 *
 * The web_search tool maps to the chat pipeline's `web` plugin (spec 4.5): its one search comes
 * back as a `web_search_call` item, and the answer's citations as `url_citation` annotations.
 *
 * Not carried over: the other hosted tools (file search, code interpreter, computer use, MCP,
 * image generation), `background`, `conversation`, `prompt` templates, item references, file
 * ids, refusal parts in answers, logprobs. Reasoning comes back as a `reasoning` item whose
 * summary is the upstream's reasoning text; reasoning items sent back as input are dropped (the
 * upstream cannot use them).
 */
export type {
  ItemStatus,
  MessageItem,
  FunctionCallItem,
  FunctionCallOutputItem,
  ReasoningItem,
  WebSearchCallItem,
  ResponseItem,
  StoredConversation,
  ResponseUsage,
  ResponseStatus,
  ResponseObject,
  ResponseContext,
  ItemIdGenerator,
} from './responses/objects';
export { RESPONSES_FIELDS, responsesToChat } from './responses/request';
export { responseUsage, chatToResponse } from './responses/answer';
export { ResponsesStreamEncoder } from './responses/stream';
