/** A self-hosted SearXNG metasearch instance's JSON API (`GET /search`): web search only. */
import { declareProvider } from '../provider';
import { search, searxngConnection } from './search';

export const searxng = declareProvider(searxngConnection, {
  search,
});

export { SEARXNG_SEARCH_PARAMETERS } from './search';
