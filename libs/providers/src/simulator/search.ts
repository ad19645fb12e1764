/**
 * The simulated web search engines, both at `/search`: SearXNG's JSON API (`GET`, no key) and
 * Tavily's (`POST`, `Authorization: Bearer <anything>`).
 *
 * Deterministic: a query's pages depend only on its words (letters and digits, case folded; the
 * `#sim` lines removed). Each site of SITES has one page for it, at
 * `https://<domain>/<slug>-<h>`, where `slug` is the words joined by `-` (at most SLUG_CHARS
 * characters, `search` when there are none, percent-encoded beyond ASCII) and `h` the first 8
 * hex digits of sha256(`<words joined by one space>\n<domain>`); pages are ordered by that hash,
 * ascending, and scored 0.95 * 0.92^rank. Titles are `<Query In Title Case> - <Site name>`.
 *
 * SearXNG has no count parameter: every answer is a page of up to 10 results (`pageno` picks
 * which), from engine `duckduckgo`, with `publishedDate` on the news and journal sites. It
 * answers 403 with a plain-text body unless `format=json` (as an instance whose settings do not
 * enable JSON does), 400 `{"error": "No query"}` without `q`, and its other errors as plain text.
 *
 * Tavily honours `max_results` (default 5, 0 to 20), `include_domains` (a domain with no site of
 * its own gets a page synthesised on it, so an include filter always finds something),
 * `exclude_domains`, `include_raw_content` (several paragraphs, over 400 words, containing the
 * query: enough for a gateway to cut by tokens) and `include_answer`; `country` and
 * `search_depth` are checked and change nothing. Errors are `{"detail": {"error": "..."}}`.
 *
 * Directives come from `q` / `query`: `fail`, `fail_search`, `delay_ms` and `empty` (no results).
 */
import { createHash } from 'node:crypto';
import { isRecord } from '../json';
import { isOnDomain } from '../search';
import { parseDirectives, type SimDirectives } from './directives';
import { SimError } from './http';

export const SEARCH_PATH = '/search';

/** The sites every query finds pages on: [domain, name]. */
const SITES: readonly (readonly [string, string])[] = [
  ['en.wikipedia.org', 'Wikipedia'],
  ['developer.mozilla.org', 'MDN Web Docs'],
  ['docs.python.org', 'Python documentation'],
  ['github.com', 'GitHub'],
  ['stackoverflow.com', 'Stack Overflow'],
  ['arxiv.org', 'arXiv'],
  ['www.nature.com', 'Nature'],
  ['nodejs.org', 'Node.js'],
  ['www.bbc.co.uk', 'BBC News'],
  ['news.ycombinator.com', 'Hacker News'],
  ['www.rfc-editor.org', 'RFC Editor'],
  ['go.dev', 'The Go Programming Language'],
];
/** The sites whose pages carry a publication date, as news and journal results do. */
const DATED = new Set(['arxiv.org', 'www.nature.com', 'www.bbc.co.uk', 'news.ycombinator.com']);

const SLUG_CHARS = 60;
const TITLE_QUERY_CHARS = 80;
const SNIPPET_QUERY_CHARS = 150;
const SNIPPET_CHARS = 300;
const SEARXNG_PAGE_SIZE = 10;
const TAVILY_MAX_RESULTS = 20;
const TAVILY_DEFAULT_RESULTS = 5;
const TAVILY_UNAUTHORIZED = 'Unauthorized: missing or invalid API key.';

interface Page {
  domain: string;
  url: string;
  title: string;
  snippet: string;
  /** ISO 8601 without a zone, as SearXNG writes it; null on undated sites. */
  date: string | null;
  /** What the page says, for Tavily's `raw_content`. */
  text(): string;
  hash: string;
}

const wordsOf = (text: string) => text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim();
const cut = (text: string, chars: number) => (text.length <= chars ? text : `${text.slice(0, chars - 1).trimEnd()}…`);
const titleCase = (text: string) => text.replace(/(^|\s)(\S)/g, (_, space: string, first: string) => space + first.toUpperCase());

/** The sentences a page's text is made of, each about the query `q` on site `site`. */
const SENTENCES: ((q: string, site: string) => string)[] = [
  (q, site) => `This page on ${site} is about ${q}: it gathers what is known about the subject and explains the main ideas one step at a time.`,
  (q) => `Readers who meet ${q} for the first time usually start with its history, because the early decisions still shape how it is used today.`,
  (q) => `The sections below describe the background, the most common questions and the places where the sources disagree about ${q}.`,
  (q) => `Several practitioners have written about ${q} from experience, and their notes are summarised here with links to the original material.`,
  (q) => `A short glossary defines the terms that appear most often in discussions of ${q}, so that the rest of the page reads easily.`,
  (q) => `Like most subjects, ${q} has its edge cases: the examples in this part show where the usual rules stop applying and explain why.`,
  (q) => `Comparisons with related subjects help as well, since much of what is said about ${q} makes more sense beside its alternatives.`,
  (_, site) => `The figures quoted on ${site} come from the references listed at the end, which were checked when the page was last revised.`,
  (q) => `Questions that remain open about ${q} are collected in the final section, together with the strongest arguments on each side of them.`,
  (q) => `Anyone who wants to go further will find reading suggestions, from introductory overviews to detailed technical accounts of ${q}.`,
];
const PARAGRAPHS = 5;
const SENTENCES_PER_PARAGRAPH = 5;

/** The page a site has for a query (the query as written, `#sim` lines removed). */
function page(query: string, domain: string, site: string): Page {
  const words = wordsOf(query);
  const hash = createHash('sha256')
    .update(`${words.join(' ')}\n${domain}`)
    .digest('hex');
  const slug = words.join('-').slice(0, SLUG_CHARS).replace(/-+$/, '') || 'search';
  const q = oneLine(query);
  const title = `${titleCase(cut(q, TITLE_QUERY_CHARS))} - ${site}`;
  const days = parseInt(hash.slice(8, 12), 16) % 2000;
  return {
    domain,
    url: `https://${domain}/${encodeURIComponent(slug)}-${hash.slice(0, 8)}`,
    title,
    snippet: cut(
      `An overview of ${cut(q, SNIPPET_QUERY_CHARS)} on ${site}: the background, the key facts and the references, with links to related topics.`,
      SNIPPET_CHARS,
    ),
    date: DATED.has(domain) ? new Date(Date.UTC(2020, 0, 1) + days * 86_400_000).toISOString().slice(0, 19) : null,
    text: () => {
      const first = parseInt(hash.slice(0, 2), 16);
      // Strides prime to the 10 sentences, so no two paragraphs read alike.
      const paragraphs = Array.from({ length: PARAGRAPHS }, (_, p) =>
        Array.from({ length: SENTENCES_PER_PARAGRAPH }, (_, s) => SENTENCES[(first + p * 7 + s * 3) % SENTENCES.length](q, site)).join(' '),
      );
      return [`# ${title}`, ...paragraphs].join('\n\n');
    },
    hash,
  };
}

/** The pages of `sites` for a query, in the engine's order. */
function pagesFor(query: string, sites: readonly (readonly [string, string])[]): Page[] {
  return sites.map(([domain, site]) => page(query, domain, site)).sort((a, b) => (a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0));
}

const scoreAt = (rank: number) => Number((0.95 * 0.92 ** rank).toFixed(4));

/* ------------------------------------------------------------------ SearXNG */

export interface SearxngRequest {
  /** `q` as sent. */
  q: string;
  /** `q` without its `#sim` lines. */
  text: string;
  pageno: number;
  directives: SimDirectives;
}

/** Plain text, as SearXNG's own error pages; a 400 as its JSON API's `{error}`. */
export const searxngErrorBody = (error: SimError): string | { error: string } => (error.status === 400 ? { error: error.message } : error.message);

/** In SearXNG's order of checks: the output format, then the query, then the page number. */
export function parseSearxngRequest(params: Record<string, string>): SearxngRequest {
  if (params.format !== 'json') {
    throw new SimError(403, 'Forbidden: this instance serves only format=json (search.formats in its settings.yml)');
  }
  if (!params.q) throw new SimError(400, 'No query');
  const pageno = params.pageno ?? '1';
  if (!/^[1-9]\d*$/.test(pageno)) throw new SimError(400, `Invalid value "${pageno}" for parameter pageno`);
  const { directives, text } = parseDirectives(params.q);
  return { q: params.q, text, pageno: Number(pageno), directives };
}

export function searxngResponse(request: SearxngRequest) {
  const first = (request.pageno - 1) * SEARXNG_PAGE_SIZE;
  const pages = request.directives.empty ? [] : pagesFor(request.text, SITES).slice(first, first + SEARXNG_PAGE_SIZE);
  return {
    query: request.q,
    // What the engines estimate; DuckDuckGo gives no estimate, so SearXNG reports 0.
    number_of_results: 0,
    results: pages.map((p, i) => ({
      url: p.url,
      title: p.title,
      content: p.snippet,
      publishedDate: p.date,
      thumbnail: '',
      engine: 'duckduckgo',
      template: 'default.html',
      parsed_url: ['https', p.domain, p.url.slice(`https://${p.domain}`.length), '', '', ''],
      img_src: '',
      priority: '',
      engines: ['duckduckgo'],
      positions: [first + i + 1],
      score: scoreAt(first + i),
      category: 'general',
    })),
    answers: [],
    corrections: [],
    infoboxes: [],
    suggestions: [],
    unresponsive_engines: [],
  };
}

/* ------------------------------------------------------------------ Tavily */

export interface TavilyRequest {
  /** `query` as sent. */
  query: string;
  /** `query` without its `#sim` lines. */
  text: string;
  maxResults: number;
  includeDomains: string[];
  excludeDomains: string[];
  rawContent: boolean;
  answer: boolean;
  directives: SimDirectives;
}

/** Tavily's `{detail: {error}}`, with its own words for a missing key. */
export const tavilyErrorBody = (error: SimError) => ({ detail: { error: error.status === 401 ? TAVILY_UNAUTHORIZED : error.message } });

const SEARCH_DEPTHS = ['basic', 'advanced', 'fast', 'ultra-fast'];

export function parseTavilyRequest(body: unknown): TavilyRequest {
  if (!isRecord(body)) throw new SimError(400, 'Request body must be a JSON object.');
  if (typeof body.query !== 'string' || body.query.trim() === '') throw new SimError(400, 'Query is missing or empty.');
  const maxResults = body.max_results ?? TAVILY_DEFAULT_RESULTS;
  if (!(Number.isInteger(maxResults) && (maxResults as number) >= 0 && (maxResults as number) <= TAVILY_MAX_RESULTS)) {
    throw new SimError(400, `max_results must be an integer between 0 and ${TAVILY_MAX_RESULTS}.`);
  }
  if (body.search_depth !== undefined && !SEARCH_DEPTHS.includes(body.search_depth as string)) {
    throw new SimError(400, `search_depth must be one of ${SEARCH_DEPTHS.join(', ')}.`);
  }
  if (body.country !== undefined && !(typeof body.country === 'string' && body.country.length > 2 && body.country === body.country.toLowerCase())) {
    throw new SimError(400, 'country must be a country name in lowercase English, such as "united states".');
  }
  const { directives, text } = parseDirectives(body.query);
  return {
    query: body.query,
    text,
    maxResults: maxResults as number,
    includeDomains: domainsOf(body.include_domains, 'include_domains'),
    excludeDomains: domainsOf(body.exclude_domains, 'exclude_domains'),
    rawContent: optionOf(body.include_raw_content, 'include_raw_content', ['markdown', 'text']),
    answer: optionOf(body.include_answer, 'include_answer', ['basic', 'advanced']),
    directives,
  };
}

function domainsOf(value: unknown, field: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || !value.every((d) => typeof d === 'string')) throw new SimError(400, `${field} must be a list of domains.`);
  return value.map((d) => d.trim().toLowerCase()).filter((d) => d !== '');
}

/** Tavily's flags that take a boolean or one of a few words (any word meaning true). */
function optionOf(value: unknown, field: string, words: string[]): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value === 'boolean') return value;
  if (words.includes(value as string)) return true;
  throw new SimError(400, `${field} must be a boolean or one of ${words.join(', ')}.`);
}

/** The sites a request searches: those on its included domains (one synthesised where none is), less the excluded ones. */
function sitesFor({ includeDomains, excludeDomains }: TavilyRequest): (readonly [string, string])[] {
  const included =
    includeDomains.length === 0
      ? [...SITES]
      : includeDomains.flatMap((d) => {
          const known = SITES.filter(([domain]) => isOnDomain(domain, d));
          return known.length > 0 ? known : [[d, d] as const];
        });
  const unique = [...new Map(included.map((s) => [s[0], s])).values()];
  return unique.filter(([domain]) => !excludeDomains.some((d) => isOnDomain(domain, d)));
}

export function tavilyResponse(request: TavilyRequest, requestId: string, responseTime: number) {
  const pages = request.directives.empty ? [] : pagesFor(request.text, sitesFor(request)).slice(0, request.maxResults);
  return {
    query: request.query,
    answer: request.answer ? `${cut(oneLine(request.text), SNIPPET_QUERY_CHARS)}: a simulated answer drawn from ${pages.length} sources.` : null,
    images: [],
    results: pages.map((p, i) => ({
      title: p.title,
      url: p.url,
      content: p.snippet,
      score: scoreAt(i),
      raw_content: request.rawContent ? p.text() : null,
    })),
    response_time: responseTime,
    request_id: requestId,
  };
}

/** Tavily's request ids are UUIDs; the simulator's count up. */
export const tavilyRequestId = (n: number) => `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`;
