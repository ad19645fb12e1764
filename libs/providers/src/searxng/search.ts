import { mapParameters, type ParameterConfig } from '../operations';
import type { Operation, SearchBody, SearchResult } from '../provider';
import { resultsOf, textOf, withinRequest } from '../search';
import { singleOperationConnection, type SingleOperationConnection, type SingleOperationOptions } from '../single-operation';
import { getJsonUpstream } from '../transport';

/**
 * SearXNG takes the query and nothing else the gateway knows. It has no result count and no
 * domain parameter: the adapter applies `max_results` and `search_domain_filter` to the answer.
 * Nor has it a country: its `language` is a search locale (`de-DE`) that also restricts the
 * language of the results, and a country names no one language (CH, BE, IN), so `country` is
 * not sent.
 */
export const SEARXNG_SEARCH_PARAMETERS: ParameterConfig<'search'> = { query: 'q' };

/**
 * A SearXNG instance's JSON API: `GET /search?q=&format=json&pageno=1` (the instance must list
 * `json` in `search.formats`) -> `{query, number_of_results, results: [{url, title, content,
 * engine, engines, score, publishedDate?, ...}], answers, corrections, infoboxes, suggestions,
 * unresponsive_engines}`. Only the first page is asked for: one billed query, one upstream call,
 * so a `max_results` above what the instance's engines put on a page (about 10) gets fewer.
 */
async function query(upstream: SingleOperationConnection, body: SearchBody, signal?: AbortSignal): Promise<SearchResult> {
  const params = new URLSearchParams({ ...(mapParameters(SEARXNG_SEARCH_PARAMETERS, { ...body }) as Record<string, string>), format: 'json', pageno: '1' });
  const { json, latencyMs } = await getJsonUpstream(`${upstream.root}/search?${params}`, upstream.headers, upstream.timeoutMs, signal);
  const hits = resultsOf(json, 'SearXNG').map((r) => {
    // SearXNG relays the engines' result lists and fetches no page: the snippet is all the text there is.
    const snippet = textOf(r.content);
    return { title: textOf(r.title), url: r.url as string, snippet, content: snippet, date: textOf(r.publishedDate) || null };
  });
  return { results: withinRequest(hits, body), latencyMs };
}

/** The instance's root, `http://localhost:8080`; a version segment at the end (the simulator's `/v1`) is dropped. */
export function searxngConnection(options: SingleOperationOptions): SingleOperationConnection {
  // SearXNG itself takes no key; a reverse proxy in front of it may want one.
  return singleOperationConnection(options, options.apiKey.trim() === '' ? {} : { authorization: `Bearer ${options.apiKey}` });
}

export const search: Operation<'search', SingleOperationConnection> = { parameters: SEARXNG_SEARCH_PARAMETERS, calls: { search: query } };
