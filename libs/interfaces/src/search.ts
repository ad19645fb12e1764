/**
 * `POST /v1/search` and `POST /v1/search/{engine}` (spec 4.14): web search on a catalog engine
 * (a model of type `search`), billed per query (spec 1). The request follows the multi-query
 * search APIs users know (Perplexity's: `query` a string or up to 5 strings, `max_results`,
 * `search_domain_filter`, `country`, `max_tokens_per_page`); each query is one upstream call.
 */
import { operationOf, type Operation } from '@svc/metering';
import type { SearchHit, SearchResult } from '@svc/providers';
import { countTextTokens, truncateToTokens } from '@svc/providers';
import { invalid, optionalPositiveInt, requireBody, type Json } from './types';

export const MAX_SEARCH_QUERIES = 5;
export const MAX_QUERY_CHARACTERS = 2000;
export const DEFAULT_SEARCH_RESULTS = 10;
export const MAX_SEARCH_RESULTS = 20;
/** Page text per result when the request sets no `max_tokens_per_page`; at most MAX_TOKENS_PER_PAGE. */
export const DEFAULT_TOKENS_PER_PAGE = 1024;
export const MAX_TOKENS_PER_PAGE = 8192;
export const MAX_DOMAIN_FILTERS = 20;

export interface SearchOptions {
  maxResults: number;
  /** Perplexity's form: domains to keep, or all prefixed with `-`, domains to leave out. */
  domainFilter: string[] | null;
  /** ISO 3166-1 alpha-2, upper case. */
  country: string | null;
}

export interface SearchCall extends SearchOptions {
  /** The engine's catalog id: the path's, else `search_tool_name`, else null for the catalog's default. */
  engine: string | null;
  queries: string[];
  /** Whether `query` was one string (the answer is then one list of results, not a list per query). */
  single: boolean;
  maxTokensPerPage: number;
  provider: unknown;
}

/**
 * The request, with the engine named by the path (already decoded) when there is one: the
 * path wins over `search_tool_name`, which only /v1/search reads.
 */
export function searchRequest(raw: unknown, pathEngine: string | null): SearchCall {
  const body = requireBody(raw);
  const { queries, single } = queriesOf(body.query);
  const named = pathEngine ?? engineField(body);
  const maxTokensPerPage = optionalPositiveInt(body, 'max_tokens_per_page') ?? DEFAULT_TOKENS_PER_PAGE;
  if (maxTokensPerPage > MAX_TOKENS_PER_PAGE) throw invalid(`max_tokens_per_page must be at most ${MAX_TOKENS_PER_PAGE}.`, 'max_tokens_per_page');
  return { engine: named, queries, single, maxTokensPerPage, provider: body.provider, ...searchOptionsOf(body, DEFAULT_SEARCH_RESULTS, '') };
}

/**
 * The options /v1/search and the web plugin share, read from `body` (a request, or a plugin
 * entry whose fields are named `<prefix>max_results`...).
 */
export function searchOptionsOf(body: Json, defaultResults: number, prefix: string): SearchOptions {
  const maxResults = body.max_results ?? defaultResults;
  if (typeof maxResults !== 'number' || !Number.isInteger(maxResults) || maxResults < 1 || maxResults > MAX_SEARCH_RESULTS) {
    throw invalid(`max_results must be an integer from 1 to ${MAX_SEARCH_RESULTS}.`, `${prefix}max_results`);
  }
  return {
    maxResults,
    domainFilter: domainFilterOf(body.search_domain_filter, `${prefix}search_domain_filter`),
    country: countryOf(body.country, `${prefix}country`),
  };
}

function queriesOf(query: unknown): { queries: string[]; single: boolean } {
  const check = (q: unknown, param: string): string => {
    if (typeof q !== 'string' || q.trim() === '') throw invalid('Each query must be a non-empty string.', param);
    if (q.length > MAX_QUERY_CHARACTERS) throw invalid(`A query may have at most ${MAX_QUERY_CHARACTERS} characters.`, param);
    return q;
  };
  if (typeof query === 'string') return { queries: [check(query, 'query')], single: true };
  if (!Array.isArray(query) || query.length === 0) throw invalid('query is required: a non-empty string, or an array of 1 to 5 of them.', 'query');
  if (query.length > MAX_SEARCH_QUERIES) throw invalid(`query holds ${query.length} queries; at most ${MAX_SEARCH_QUERIES} per request.`, 'query');
  return { queries: query.map((q, i) => check(q, `query[${i}]`)), single: false };
}

function engineField(body: Json): string | null {
  const name = body.search_tool_name;
  if (name === undefined || name === null) return null;
  if (typeof name !== 'string' || name === '')
    throw invalid('search_tool_name must be a search engine id from GET /v1/models?type=search.', 'search_tool_name');
  return name;
}

const DOMAIN = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;

function domainFilterOf(value: unknown, param: string): string[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_DOMAIN_FILTERS) {
    throw invalid(`search_domain_filter must be an array of 1 to ${MAX_DOMAIN_FILTERS} domains (each prefixed with "-" to exclude it).`, param);
  }
  const entries = value.map((entry, i) => {
    const domain = typeof entry === 'string' ? entry.trim().toLowerCase() : '';
    if (!DOMAIN.test(domain.replace(/^-/, '')))
      throw invalid(`${param}[${i}] must be a domain name such as "example.com" (or "-example.com" to exclude it).`, `${param}[${i}]`);
    return domain;
  });
  const excluded = entries.filter((d) => d.startsWith('-')).length;
  if (excluded > 0 && excluded < entries.length) throw invalid('search_domain_filter either keeps domains or excludes them ("-" prefix), not both.', param);
  return entries;
}

function countryOf(value: unknown, param: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || !/^[A-Za-z]{2}$/.test(value)) throw invalid('country must be an ISO 3166-1 alpha-2 code such as "US".', param);
  return value.toUpperCase();
}

/** What one search call returned: each query's results, in the order asked. */
export interface SearchAnswer {
  perQuery: SearchHit[][];
}

/** The upstream request for one query. */
export function searchBody(query: string, options: SearchOptions) {
  return {
    query,
    max_results: options.maxResults,
    ...(options.domainFilter ? { search_domain_filter: options.domainFilter } : {}),
    ...(options.country ? { country: options.country } : {}),
  };
}

/**
 * Spec 4.14 through the metering pipeline: the worst case is every query; a query is billed
 * when it returned results (spec 1 rule 3: nothing returned, nothing billed), so a request
 * whose every query found nothing costs nothing. The queries go to one provider at once; any
 * failure fails the attempt, which then moves to the engine's next provider.
 */
export const searchOperation: Operation<SearchCall, SearchAnswer> = {
  modelType: 'search',
  endpoint: '/v1/search',
  promptTokens: (call) => call.queries.reduce((sum, q) => sum + countTextTokens(q), 0),
  worstCase: (call) => ({ queries: call.queries.length }),
  call: async (target, call) => {
    const search = operationOf(target, 'search');
    const answers: SearchResult[] = await Promise.all(call.queries.map((q) => search(searchBody(q, call))));
    return { perQuery: answers.map((a) => a.results.slice(0, call.maxResults).map((hit) => pageOf(hit, call.maxTokensPerPage))) };
  },
  usageOf: (answer) => ({ queries: answer.perQuery.filter((hits) => hits.length > 0).length }),
  returned: (answer) => answer.perQuery.reduce((sum, hits) => sum + hits.length, 0),
};

/** A result with its page text cut to the request's tokens per page. */
export function pageOf(hit: SearchHit, maxTokens: number): SearchHit {
  return { ...hit, content: truncateToTokens(hit.content, maxTokens) };
}

/** The answer: one list of results for a string query, one list per query for an array; with the queries billed and their cost. */
export function searchAnswer(id: string, model: string, call: SearchCall, answer: SearchAnswer, queries: number, cost: number) {
  const lists = answer.perQuery.map((hits) => hits.map(({ title, url, snippet, content, date }) => ({ title, url, snippet, content, date })));
  return {
    id,
    object: 'search',
    model,
    results: call.single ? lists[0] : lists,
    usage: { queries, cost },
  };
}
