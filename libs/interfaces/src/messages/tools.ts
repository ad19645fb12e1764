/**
 * Request: Anthropic's tools and tool_choice -> function tools, the `web` plugin and OpenAI's tool_choice.
 */
import { isRecord } from '@svc/providers';
import { type Json, toolsOf, invalid } from '../types';

/**
 * Client tools (`custom` or untyped) -> function tools; the web search server tool (every version,
 * `web_search_20250305` and later) -> the `web` plugin; the other server tools are not served.
 */
export function anthropicToolsOf(tools: unknown): { functions: Json[]; plugins: Json[] } {
  return toolsOf(
    tools,
    (tool, param) => {
      if (tool.type !== undefined && tool.type !== null && tool.type !== 'custom') {
        throw invalid(`tools of type ${JSON.stringify(tool.type)} are not supported; only client tools are.`, `${param}.type`);
      }
      if (typeof tool.name !== 'string' || tool.name === '') throw invalid('tools need a name.', `${param}.name`);
      if (!isRecord(tool.input_schema)) throw invalid('tools need an input_schema object.', `${param}.input_schema`);
      return {
        type: 'function',
        function: {
          name: tool.name,
          ...(typeof tool.description === 'string' ? { description: tool.description } : {}),
          parameters: tool.input_schema,
        },
      };
    },
    { is: (type) => typeof type === 'string' && type.startsWith('web_search_'), options: webSearchOptionsOf },
  );
}

/** The name Anthropic gives its web search tool, in requests and in `server_tool_use` blocks. */
export const WEB_SEARCH_NAME = 'web_search';

/**
 * The web search tool's own fields as `web` plugin options: its allowed or blocked domains (never
 * both, which Anthropic refuses) as one `search_domain_filter`. `max_uses` is checked and needs
 * nothing more: the gateway runs one search per request, within any max_uses of 1 or more. The
 * other fields (cache_control, allowed_callers, defer_loading...) do not change the search.
 */
function webSearchOptionsOf(tool: Json, param: string): Json {
  const maxUses = tool.max_uses;
  if (maxUses !== undefined && maxUses !== null && (typeof maxUses !== 'number' || !Number.isInteger(maxUses) || maxUses < 1)) {
    throw invalid('max_uses must be a positive integer.', `${param}.max_uses`);
  }
  const [allowed, blocked] = (['allowed_domains', 'blocked_domains'] as const).map((field) => {
    const domains = tool[field];
    if (domains === undefined || domains === null) return undefined;
    if (!Array.isArray(domains) || !domains.every((d) => typeof d === 'string')) throw invalid(`${field} must be an array of domains.`, `${param}.${field}`);
    return domains;
  });
  if (allowed && blocked) throw invalid('allowed_domains and blocked_domains cannot be used together.', param);
  const filter = allowed ?? blocked?.map((domain) => `-${domain}`);
  return filter && filter.length > 0 ? { search_domain_filter: filter } : {};
}

/**
 * auto/any/tool/none -> auto/required/function/none; `disable_parallel_tool_use` ->
 * parallel_tool_calls. Choosing the web search tool asks for what happens anyway (the search runs
 * before the model answers), so it leaves the model its choice of the function tools.
 */
export function toolChoiceOf(choice: unknown, searching: boolean): Json {
  if (choice === undefined || choice === null) return {};
  if (!isRecord(choice)) throw invalid('tool_choice must be an object.', 'tool_choice');
  const serial = choice.disable_parallel_tool_use === true ? { parallel_tool_calls: false } : {};
  switch (choice.type) {
    case 'auto':
      return { tool_choice: 'auto', ...serial };
    case 'any':
      return { tool_choice: 'required', ...serial };
    case 'none':
      return { tool_choice: 'none' };
    case 'tool':
      if (typeof choice.name !== 'string' || choice.name === '') throw invalid('tool_choice of type "tool" needs a name.', 'tool_choice.name');
      if (searching && choice.name === WEB_SEARCH_NAME) return serial;
      return { tool_choice: { type: 'function', function: { name: choice.name } }, ...serial };
    default:
      throw invalid('tool_choice.type must be auto, any, tool or none.', 'tool_choice.type');
  }
}
