/** The SearXNG adapter against the simulator's `GET /search`, and against a scripted server for what the simulator never answers. */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { SearchBody } from '../provider';
import { ProviderError } from '../provider-error';
import { startSimulator, type Simulator } from '../simulator';
import { searxng } from './index';

let sim: Simulator;
let engine: ReturnType<typeof searxng.client>;
beforeAll(async () => {
  sim = await startSimulator();
  engine = searxng.client({ baseUrl: sim.url, apiKey: '' });
});
afterAll(() => sim.close());

const search = (body: Partial<SearchBody>) => engine.search({ query: 'capital of France', max_results: 10, ...body });
const urls = async (body: Partial<SearchBody>) => (await search(body)).results.map((r) => r.url);
const hosts = async (body: Partial<SearchBody>) => (await urls(body)).map((u) => new URL(u).hostname);
const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (error: unknown) => error,
  );

it("asks the instance's root for the first JSON page of the query, and nothing else the gateway knows", async () => {
  await search({ country: 'DE', search_domain_filter: ['github.com'], max_results: 3 });
  expect(sim.received.at(-1)).toEqual({ q: 'capital of France', format: 'json', pageno: '1' });
});

it("maps SearXNG's results: snippet and content are both its content (it fetches no page), date its publishedDate", async () => {
  const raw = (await (await fetch(`${sim.url.replace(/\/v1$/, '')}/search?q=capital+of+France&format=json`)).json()) as { results: Record<string, unknown>[] };
  const { results, latencyMs } = await search({});
  expect(latencyMs).toBeGreaterThanOrEqual(0);
  expect(results).toEqual(raw.results.map((r) => ({ title: r.title, url: r.url, snippet: r.content, content: r.content, date: r.publishedDate })));
  expect(results.some((r) => r.date !== null)).toBe(true);
  expect(results.some((r) => r.date === null)).toBe(true);
  expect(results[0]).toMatchObject({ title: expect.stringMatching(/^Capital Of France - /), snippet: expect.stringContaining('capital of France') });
});

it('is deterministic: the same query finds the same pages, another query others', async () => {
  const first = await urls({});
  expect(await urls({})).toEqual(first);
  const other = await urls({ query: 'speed of light' });
  expect(other).toHaveLength(10);
  expect(other.filter((u) => first.includes(u))).toEqual([]);
});

it('cuts the page to max_results itself: SearXNG has no count parameter', async () => {
  const all = await urls({});
  expect(await urls({ max_results: 3 })).toEqual(all.slice(0, 3));
  expect(await urls({ max_results: 0 })).toEqual([]);
  expect(await urls({ max_results: 50 })).toEqual(all);
});

it('applies search_domain_filter itself: a domain takes its subdomains; a - leaves it out', async () => {
  const all = await hosts({});
  const kept = all.filter((h) => /(^|\.)wikipedia\.org$|^github\.com$/.test(h));
  expect(await hosts({ search_domain_filter: ['wikipedia.org', 'GitHub.com'] })).toEqual(kept);
  expect(await hosts({ search_domain_filter: ['-wikipedia.org', '-github.com'] })).toEqual(all.filter((h) => !kept.includes(h)));
  expect(await hosts({ search_domain_filter: ['example.com'] })).toEqual([]);
});

it('turns fail and fail_search into ProviderErrors with the status and the plain-text message', async () => {
  expect(await failure(search({ query: 'q\n#sim {"fail": 503}' }))).toMatchObject({
    kind: 'http',
    status: 503,
    retryable: true,
    message: 'simulated failure (#sim fail 503)',
  });
  const error = await failure(search({ query: 'q\n#sim {"fail_search": 429}' }));
  expect(error).toBeInstanceOf(ProviderError);
  expect(error).toMatchObject({
    kind: 'http',
    status: 429,
    message: 'simulated failure (#sim fail_search 429)',
    upstreamBody: 'simulated failure (#sim fail_search 429)',
  });
});

it('answers no results for empty', async () => {
  expect((await search({ query: 'q\n#sim {"empty": true}' })).results).toEqual([]);
});

describe('against a scripted instance', () => {
  let server: Server;
  let base: string;
  let seen: { url: string; headers: IncomingHttpHeaders }[] = [];
  let reply: { status: number; type: string; body: string };
  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push({ url: req.url ?? '', headers: req.headers });
      res.writeHead(reply.status, { 'content-type': reply.type });
      res.end(reply.body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));
  beforeEach(() => {
    seen = [];
    reply = { status: 200, type: 'application/json', body: '{"results": []}' };
  });
  const at = (baseUrl: string, apiKey = '') => searxng.client({ baseUrl, apiKey }).search({ query: 'a b', max_results: 5 });

  it('drops a trailing version segment and sends a key only when there is one', async () => {
    await at(`${base}/v1/`);
    await at(base, 'proxy-key');
    expect(seen.map((s) => s.url)).toEqual(['/search?q=a+b&format=json&pageno=1', '/search?q=a+b&format=json&pageno=1']);
    expect(seen[0].headers.authorization).toBeUndefined();
    expect(seen[1].headers.authorization).toBe('Bearer proxy-key');
  });

  it.each([
    ['a body that is not JSON', '<html>results</html>'],
    ['JSON without results', '{"query": "a b"}'],
    ['a result without a url', '{"results": [{"title": "t"}]}'],
  ])('reports %s as an invalid response', async (_, body) => {
    reply = { status: 200, type: 'application/json', body };
    expect(await failure(at(base))).toMatchObject({ kind: 'invalid_response', status: 502 });
  });

  it("reads SearXNG's {error} body for a 400", async () => {
    reply = { status: 400, type: 'application/json', body: '{"error": "No query"}' };
    expect(await failure(at(base))).toMatchObject({ kind: 'http', status: 400, message: 'No query' });
  });
});
