import { mapParameters, type ParameterConfig } from '../operations';
import type { Operation, SearchBody, SearchResult } from '../provider';
import { ProviderError } from '../provider-error';
import { domainFilter, resultsOf, textOf, withinRequest } from '../search';
import type { SingleOperationConnection } from '../single-operation';
import { postJsonUpstream } from '../transport';

/** Tavily refuses a larger `max_results`; a caller asking for more gets the most Tavily gives. */
const TAVILY_MAX_RESULTS = 20;

const REGION_NAMES = new Intl.DisplayNames(['en'], { type: 'region' });

/** Tavily's `country`: the lowercase English name (`"united states"`) of an ISO 3166-1 alpha-2 code. */
function countryName(code: string): string {
  // DisplayNames takes region subtags other than two letters too (`419`); they are not countries.
  if (!/^[A-Za-z]{2}$/.test(code)) {
    throw new ProviderError({ kind: 'http', status: 400, message: `country must be an ISO 3166-1 alpha-2 code, not "${code}"` });
  }
  // A code with no name comes back as itself, which Tavily refuses with its own message.
  return (REGION_NAMES.of(code.toUpperCase()) ?? code).toLowerCase();
}

export const TAVILY_SEARCH_PARAMETERS: ParameterConfig<'search'> = {
  query: 'query',
  max_results: (value) => ({ max_results: Math.min(value as number, TAVILY_MAX_RESULTS) }),
  search_domain_filter: (value) => {
    const { include, exclude } = domainFilter(value as string[]);
    return { ...(include.length > 0 && { include_domains: include }), ...(exclude.length > 0 && { exclude_domains: exclude }) };
  },
  country: (value) => ({ country: countryName(value as string) }),
};

/**
 * Tavily's search API: `POST /search` `{query, max_results, search_depth: "basic",
 * include_raw_content: true, include_answer: false, include_domains?, exclude_domains?,
 * country?}` -> `{query, answer, images, results: [{title, url, content, score, raw_content,
 * published_date?}], response_time, request_id}`; errors are `{detail: {error}}`. A basic
 * search is one credit; the page text comes with it, and the gateway cuts it to
 * `max_tokens_per_page`.
 */
async function query(upstream: SingleOperationConnection, body: SearchBody, signal?: AbortSignal): Promise<SearchResult> {
  const request = { ...mapParameters(TAVILY_SEARCH_PARAMETERS, { ...body }), search_depth: 'basic', include_raw_content: true, include_answer: false };
  // The base is `https://api.tavily.com`; a version segment at the end (the simulator's `/v1`) is dropped.
  const { json, latencyMs } = await postJsonUpstream(`${upstream.root}/search`, upstream.headers, request, upstream.timeoutMs, signal);
  const hits = resultsOf(json, 'Tavily').map((r) => {
    const snippet = textOf(r.content);
    // `published_date` comes only with topic `news`, which is not asked for; read it where it is.
    return { title: textOf(r.title), url: r.url as string, snippet, content: textOf(r.raw_content) || snippet, date: textOf(r.published_date) || null };
  });
  // Tavily applies the filter and the count itself; holding its answer to them costs nothing.
  return { results: withinRequest(hits, body), latencyMs };
}

export const search: Operation<'search', SingleOperationConnection> = { parameters: TAVILY_SEARCH_PARAMETERS, calls: { search: query } };
