/**
 * Request: the tools (web_search as the `web` plugin), tool_choice, `text.format` and `reasoning`
 * -> their chat-completions fields.
 */
import { isRecord } from '@svc/providers';
import { type Json, toolsOf, invalid, defined } from '../types';

const WEB_SEARCH_TOOLS = new Set(['web_search', 'web_search_preview', 'web_search_preview_2025_03_11', 'web_search_2025_08_26']);

/** Function tools, and the web_search tool (every version) as the `web` plugin; the other hosted tools are not served. */
export function responsesToolsOf(tools: unknown): { functions: Json[]; plugins: Json[] } {
  return toolsOf(
    tools,
    (tool, param) => {
      if (tool.type !== 'function') {
        throw invalid(`tools of type ${JSON.stringify(tool.type)} are not supported; only function tools are.`, `${param}.type`);
      }
      if (typeof tool.name !== 'string' || tool.name === '') throw invalid('function tools need a name.', `${param}.name`);
      return {
        type: 'function',
        function: {
          name: tool.name,
          ...defined({
            description: typeof tool.description === 'string' ? tool.description : undefined,
            parameters: isRecord(tool.parameters) ? tool.parameters : undefined,
            strict: typeof tool.strict === 'boolean' ? tool.strict : undefined,
          }),
        },
      };
    },
    { is: isWebSearchTool, options: webSearchOptionsOf },
  );
}

function isWebSearchTool(type: unknown): boolean {
  return typeof type === 'string' && WEB_SEARCH_TOOLS.has(type);
}

/** How many results each search context size gives the model; medium is the `web` plugin's default. */
const RESULTS_BY_CONTEXT_SIZE: ReadonlyMap<unknown, number> = new Map([
  ['low', 3],
  ['medium', 5],
  ['high', 10],
]);

/** The web_search tool's own fields as `web` plugin options: `filters.allowed_domains` and `search_context_size`. */
function webSearchOptionsOf(tool: Json, param: string): Json {
  const filters = tool.filters;
  if (filters !== undefined && filters !== null && !isRecord(filters)) throw invalid('filters must be an object.', `${param}.filters`);
  const domains = filters?.allowed_domains;
  if (domains !== undefined && domains !== null && (!Array.isArray(domains) || !domains.every((d) => typeof d === 'string'))) {
    throw invalid('filters.allowed_domains must be an array of domains.', `${param}.filters.allowed_domains`);
  }
  const size = tool.search_context_size;
  const maxResults = RESULTS_BY_CONTEXT_SIZE.get(size);
  if (size !== undefined && size !== null && maxResults === undefined) {
    throw invalid('search_context_size must be low, medium or high.', `${param}.search_context_size`);
  }
  return defined({ search_domain_filter: Array.isArray(domains) && domains.length > 0 ? domains : undefined, max_results: maxResults });
}

/** Choosing the web_search tool asks for what happens anyway (the search runs before the model answers): the model keeps its choice. */
export function toolChoiceOf(choice: unknown): unknown {
  if (choice === undefined || choice === null) return undefined;
  if (choice === 'auto' || choice === 'none' || choice === 'required') return choice;
  if (isRecord(choice) && isWebSearchTool(choice.type)) return undefined;
  if (isRecord(choice) && choice.type === 'function' && typeof choice.name === 'string' && choice.name !== '') {
    return { type: 'function', function: { name: choice.name } };
  }
  throw invalid('tool_choice must be "auto", "none", "required" or {type: "function", name}.', 'tool_choice');
}

/** `text.format`: json_schema / json_object -> response_format; text -> nothing. */
export function responseFormatOf(text: unknown): Json | undefined {
  if (text === undefined || text === null) return undefined;
  if (!isRecord(text)) throw invalid('text must be an object.', 'text');
  const format = text.format;
  if (format === undefined || format === null) return undefined;
  if (!isRecord(format)) throw invalid('text.format must be an object.', 'text.format');
  switch (format.type) {
    case 'text':
      return undefined;
    case 'json_object':
      return { type: 'json_object' };
    case 'json_schema':
      if (typeof format.name !== 'string' || format.name === '') throw invalid('text.format.name is required for json_schema.', 'text.format.name');
      if (!isRecord(format.schema)) throw invalid('text.format.schema must be an object.', 'text.format.schema');
      return {
        type: 'json_schema',
        json_schema: {
          name: format.name,
          schema: format.schema,
          ...defined({
            description: typeof format.description === 'string' ? format.description : undefined,
            strict: typeof format.strict === 'boolean' ? format.strict : undefined,
          }),
        },
      };
    default:
      throw invalid('text.format.type must be text, json_object or json_schema.', 'text.format.type');
  }
}

export function reasoningOf(reasoning: unknown): Json | undefined {
  if (reasoning === undefined || reasoning === null) return undefined;
  if (!isRecord(reasoning)) throw invalid('reasoning must be an object.', 'reasoning');
  const effort = reasoning.effort;
  if (effort === undefined || effort === null) return undefined;
  if (typeof effort !== 'string') throw invalid('reasoning.effort must be a string.', 'reasoning.effort');
  return { effort };
}
