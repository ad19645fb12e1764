/** Tavily's hosted search API (`POST /search`, billed in credits per query): web search only. */
import { declareProvider } from '../provider';
import { singleOperationConnection } from '../single-operation';
import { search } from './search';

export const tavily = declareProvider(singleOperationConnection, {
  search,
});

export { TAVILY_SEARCH_PARAMETERS } from './search';
