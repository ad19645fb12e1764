/**
 * Anthropic's Messages API (`POST /v1/messages`, `POST /v1/messages/count_tokens`) on top of the
 * chat pipeline: the request becomes an OpenAI chat-completions body, the answer (a completion
 * or a stream of chunks) becomes a Messages `message` or Anthropic's SSE events. This is the
 * reverse of libs/providers/src/anthropic.ts, which sends OpenAI requests to Anthropic upstreams.
 *
 * The web search server tool maps to the chat pipeline's `web` plugin (spec 4.3): its one search
 * comes back as Anthropic's `server_tool_use` and `web_search_tool_result` blocks, with citations
 * on the text that cites a result.
 *
 * Not carried over: thinking signatures (the gateway cannot verify or produce them, so earlier
 * thinking is dropped and new thinking blocks carry an empty signature), other server tools
 * (web fetch, code execution...), Files API sources, citations of documents, `service_tier`,
 * `container`, `mcp_servers`.
 */
export { MESSAGES_FIELDS, messagesToChat, countMessagesTokens, ignoredMessagesFields } from './messages/request';
export { TOOL_ERROR_PREFIX } from './messages/conversation';
export { type AnthropicStopReason, stopOfAnswer, type AnthropicUsage, anthropicUsage, type AnthropicMessage, chatToMessage } from './messages/answer';
export { MessagesStreamEncoder } from './messages/stream';
export { type AnthropicErrorType, type AnthropicErrorBody, toAnthropicError } from './messages/errors';
