import { type ApiError, refusalOf } from '@svc/platform';
import { countTextTokens } from '@svc/providers';
import { DEFAULT_SEARCH_RESULTS, DEFAULT_TOKENS_PER_PAGE, pageOf, searchAnswer, searchBody, searchOperation, searchRequest } from './search';

const errorOf = (f: () => unknown): ApiError => {
  try {
    f();
  } catch (err) {
    return refusalOf(err) as ApiError;
  }
  throw new Error('expected a refusal');
};

const hit = (url: string, content = 'page text') => ({ title: 't', url, snippet: 's', content, date: null });

describe('spec 4.14: the search request', () => {
  it('given a string query, reads the defaults and leaves the engine to the path or the catalog', () => {
    expect(searchRequest({ query: 'q' }, null)).toMatchObject({
      engine: null,
      queries: ['q'],
      single: true,
      maxResults: DEFAULT_SEARCH_RESULTS,
      maxTokensPerPage: DEFAULT_TOKENS_PER_PAGE,
      domainFilter: null,
      country: null,
    });
  });

  it('given an engine in the path and search_tool_name, the path wins', () => {
    expect(searchRequest({ query: 'q', search_tool_name: 'b/engine' }, 'a/engine').engine).toBe('a/engine');
    expect(searchRequest({ query: 'q', search_tool_name: 'b/engine' }, null).engine).toBe('b/engine');
  });

  it('given a query array, one query each; filters lower-cased, the country upper-cased', () => {
    const call = searchRequest({ query: ['a', 'b'], search_domain_filter: ['-Example.COM'], country: 'de', max_results: 20 }, null);
    expect(call).toMatchObject({ queries: ['a', 'b'], single: false, domainFilter: ['-example.com'], country: 'DE', maxResults: 20 });
    expect(searchBody('a', call)).toEqual({ query: 'a', max_results: 20, search_domain_filter: ['-example.com'], country: 'DE' });
  });

  it.each([
    [{}, 'query'],
    [{ query: '' }, 'query'],
    [{ query: ['ok', 3] }, 'query[1]'],
    [{ query: 'x'.repeat(2001) }, 'query'],
    [{ query: 'q', max_results: 0 }, 'max_results'],
    [{ query: 'q', max_results: 21 }, 'max_results'],
    [{ query: 'q', max_results: 2.5 }, 'max_results'],
    [{ query: 'q', max_tokens_per_page: 8193 }, 'max_tokens_per_page'],
    [{ query: 'q', search_domain_filter: [] }, 'search_domain_filter'],
    [{ query: 'q', search_domain_filter: ['a.com', '-b.com'] }, 'search_domain_filter'],
    [{ query: 'q', search_domain_filter: ['https://a.com/x'] }, 'search_domain_filter[0]'],
    [{ query: 'q', country: 'USA' }, 'country'],
    [{ query: 'q', search_tool_name: 7 }, 'search_tool_name'],
  ])('given %j, refuses it naming %s', (body, param) => {
    expect(errorOf(() => searchRequest(body, null))).toMatchObject({ status: 400, param });
  });
});

describe('spec 4.14 through the metering pipeline: billed per query that returned results', () => {
  const call = searchRequest({ query: ['a', 'b', 'c'] }, null);

  it('holds every query, and bills only the queries that found something (spec 1 rule 3)', () => {
    expect(searchOperation.worstCase(call)).toEqual({ queries: 3 });
    const answer = { perQuery: [[hit('https://a.example/1')], [], [hit('https://c.example/1'), hit('https://c.example/2')]] };
    expect(searchOperation.usageOf(answer, call, undefined as never)).toEqual({ queries: 2 });
    expect(searchOperation.returned(answer)).toBe(3);
    expect(searchOperation.returned({ perQuery: [[], [], []] })).toBe(0);
  });

  it('cuts page text to max_tokens_per_page', () => {
    const long = 'word '.repeat(500);
    expect(countTextTokens(pageOf(hit('https://a.example', long), 10).content)).toBeLessThanOrEqual(10);
  });

  it('answers one list for a string query and a list per query for an array', () => {
    const answer = { perQuery: [[hit('https://a.example/1')]] };
    const one = searchRequest({ query: 'a' }, null);
    expect(searchAnswer('gen-1', 'x/engine', one, answer, 1, 0.002)).toEqual({
      id: 'gen-1',
      object: 'search',
      model: 'x/engine',
      results: [hit('https://a.example/1')],
      usage: { queries: 1, cost: 0.002 },
    });
    expect(searchAnswer('gen-1', 'x/engine', { ...one, single: false }, answer, 1, 0.002).results).toEqual([[hit('https://a.example/1')]]);
  });
});
