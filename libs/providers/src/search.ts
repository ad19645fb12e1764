/**
 * What the web search upstreams (spec 4.14; `searxng/`, `tavily/`) share: reading
 * `search_domain_filter`, and holding an engine's answer to what was asked of it, whether or not
 * the engine could be told.
 */
import { isRecord } from './json';
import type { SearchBody, SearchHit } from './provider';
import { invalidResponse } from './transport';

export interface DomainFilter {
  include: string[];
  /** Without their `-`. */
  exclude: string[];
}

/** `search_domain_filter` split into the domains to keep and those (prefixed `-`) to leave out. */
export function domainFilter(filter: readonly string[] = []): DomainFilter {
  const domains = filter.map((d) => d.trim().toLowerCase()).filter((d) => d !== '' && d !== '-');
  return {
    include: domains.filter((d) => !d.startsWith('-')),
    exclude: domains.filter((d) => d.startsWith('-')).map((d) => d.slice(1)),
  };
}

/** Whether `host` is `domain` or one of its subdomains: `wikipedia.org` takes `en.wikipedia.org`. */
export function isOnDomain(host: string, domain: string): boolean {
  const h = host.toLowerCase();
  return h === domain || h.endsWith(`.${domain}`);
}

/** An engine's `results`, each an object with a `url`: anything else is an invalid response. */
export function resultsOf(json: unknown, engine: string): Record<string, unknown>[] {
  if (!isRecord(json) || !Array.isArray(json.results)) throw invalidResponse(`${engine} response without a results array`, json);
  if (!json.results.every((r) => isRecord(r) && typeof r.url === 'string')) throw invalidResponse(`${engine} result without a url`, json);
  return json.results as Record<string, unknown>[];
}

/** A string field of a result, '' when the engine left it out. */
export const textOf = (value: unknown): string => (typeof value === 'string' ? value : '');

/** The hits the filter lets through, in the engine's order, cut to `max_results`. */
export function withinRequest(hits: SearchHit[], body: SearchBody): SearchHit[] {
  const { include, exclude } = domainFilter(body.search_domain_filter);
  const allowed = (hit: SearchHit) => {
    const host = hostOf(hit.url);
    return (include.length === 0 || include.some((d) => isOnDomain(host, d))) && !exclude.some((d) => isOnDomain(host, d));
  };
  return hits.filter(allowed).slice(0, Math.max(0, body.max_results));
}

/** '' for a URL that does not parse: on no domain, so an include filter drops it and an exclude filter keeps it. */
function hostOf(url: string): string {
  try {
    return new URL(url).hostname;
  } catch {
    return '';
  }
}
