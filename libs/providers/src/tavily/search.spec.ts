/** The Tavily adapter against the simulator's `POST /search`. */
import type { SearchBody } from '../provider';
import { ProviderError } from '../provider-error';
import { startSimulator, type Simulator } from '../simulator';
import { tavily } from './index';

let sim: Simulator;
let engine: ReturnType<typeof tavily.client>;
beforeAll(async () => {
  sim = await startSimulator();
  engine = tavily.client({ baseUrl: sim.url, apiKey: 'tvly-test' });
});
afterAll(() => sim.close());

const search = (body: Partial<SearchBody>, adapter = engine) => adapter.search({ query: 'capital of France', max_results: 5, ...body });
const urls = async (body: Partial<SearchBody>) => (await search(body)).results.map((r) => r.url);
const hosts = async (body: Partial<SearchBody>) => (await urls(body)).map((u) => new URL(u).hostname);
const sent = () => sim.received.at(-1);
const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (error: unknown) => error,
  );

it('sends a basic search with the page text and no answer, at the root of the base URL', async () => {
  await search({ max_results: 3 });
  expect(sent()).toEqual({ query: 'capital of France', max_results: 3, search_depth: 'basic', include_raw_content: true, include_answer: false });
});

it("maps Tavily's results: snippet its content, content the page's raw_content, no date outside news", async () => {
  const { results, latencyMs } = await search({});
  expect(latencyMs).toBeGreaterThanOrEqual(0);
  expect(results).toHaveLength(5);
  for (const hit of results) {
    expect(hit).toEqual({
      title: expect.stringMatching(/^Capital Of France - /),
      url: expect.stringMatching(/^https:\/\//),
      snippet: expect.stringContaining('capital of France'),
      content: expect.any(String),
      date: null,
    });
    expect(hit.content.length).toBeGreaterThan(hit.snippet.length);
    expect(hit.content).toContain('capital of France');
  }
});

it('is deterministic: the same query finds the same pages, another query others', async () => {
  const first = await urls({});
  expect(await urls({})).toEqual(first);
  expect((await urls({ query: 'speed of light' })).filter((u) => first.includes(u))).toEqual([]);
});

it('asks for max_results, at most the 20 Tavily allows', async () => {
  expect(await urls({ max_results: 2 })).toEqual((await urls({})).slice(0, 2));
  expect(await urls({ max_results: 0 })).toEqual([]);
  expect(await urls({ max_results: 50 })).toHaveLength(12);
  expect(sent()).toMatchObject({ max_results: 20 });
});

it('sends search_domain_filter as include_domains, or without the - as exclude_domains', async () => {
  expect((await hosts({ search_domain_filter: ['wikipedia.org', 'example.com'] })).sort()).toEqual(['en.wikipedia.org', 'example.com']);
  expect(sent()).toMatchObject({ include_domains: ['wikipedia.org', 'example.com'] });
  expect(sent()).not.toHaveProperty('exclude_domains');
  const excluded = await hosts({ search_domain_filter: ['-wikipedia.org', '-github.com'], max_results: 20 });
  expect(sent()).toMatchObject({ exclude_domains: ['wikipedia.org', 'github.com'] });
  expect(sent()).not.toHaveProperty('include_domains');
  expect(excluded).toHaveLength(10);
  expect(excluded.filter((h) => /wikipedia|github/.test(h))).toEqual([]);
});

it("sends country as Tavily's lowercase English name; refuses what is not an alpha-2 code before calling", async () => {
  await search({ country: 'DE' });
  expect(sent()).toMatchObject({ country: 'germany' });
  await search({ country: 'us' });
  expect(sent()).toMatchObject({ country: 'united states' });
  const requests = sim.requests;
  expect(await failure(search({ country: 'DEU' }))).toMatchObject({ kind: 'http', status: 400, message: expect.stringContaining('ISO 3166-1 alpha-2') });
  expect(sim.requests).toBe(requests);
});

it("turns fail and fail_search into ProviderErrors carrying Tavily's {detail: {error}} text", async () => {
  expect(await failure(search({ query: 'q\n#sim {"fail": 500}' }))).toMatchObject({
    kind: 'http',
    status: 500,
    retryable: true,
    message: 'simulated failure (#sim fail 500)',
  });
  const error = await failure(search({ query: 'q\n#sim {"fail_search": 432}' }));
  expect(error).toBeInstanceOf(ProviderError);
  expect(error).toMatchObject({
    kind: 'http',
    status: 432,
    retryable: false,
    message: 'simulated failure (#sim fail_search 432)',
    upstreamBody: { detail: { error: 'simulated failure (#sim fail_search 432)' } },
  });
});

it('answers no results for empty', async () => {
  expect((await search({ query: 'q\n#sim {"empty": true}' })).results).toEqual([]);
});

it("reports a missing key as Tavily's 401", async () => {
  const keyless = tavily.client({ baseUrl: sim.url, apiKey: '' });
  expect(await failure(search({}, keyless))).toMatchObject({ kind: 'http', status: 401, message: 'Unauthorized: missing or invalid API key.' });
  const direct = await fetch(`${sim.url.replace(/\/v1$/, '')}/search`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"query": "q"}',
  });
  expect(direct.status).toBe(401);
  expect(await direct.json()).toEqual({ detail: { error: 'Unauthorized: missing or invalid API key.' } });
});
