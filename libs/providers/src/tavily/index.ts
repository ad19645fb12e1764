/** Tavily's hosted search API (`POST /search`, billed in credits per query): web search only. */
import type { ProviderDeclaration } from '../provider';
import { TAVILY_SEARCH_PARAMETERS, TavilySearchAdapter } from './client';

export const tavily: ProviderDeclaration = {
  operations: { search: TAVILY_SEARCH_PARAMETERS },
  client: (options) => new TavilySearchAdapter(options),
};

export { TAVILY_SEARCH_PARAMETERS, TavilySearchAdapter } from './client';
