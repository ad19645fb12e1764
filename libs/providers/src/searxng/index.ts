/** A self-hosted SearXNG metasearch instance's JSON API (`GET /search`): web search only. */
import type { ProviderDeclaration } from '../provider';
import { SEARXNG_SEARCH_PARAMETERS, SearxngSearchAdapter } from './client';

export const searxng: ProviderDeclaration = {
  operations: { search: SEARXNG_SEARCH_PARAMETERS },
  client: (options) => new SearxngSearchAdapter(options),
};

export { SEARXNG_SEARCH_PARAMETERS, SearxngSearchAdapter } from './client';
