/**
 * The simulator's search routes over real HTTP, as the engines' own clients would call them:
 * SearXNG's `GET /search` and Tavily's `POST /search`, their wire shapes, determinism, filters,
 * directives and errors.
 */
import { createHash } from 'node:crypto';
import { startSimulator, type Simulator } from './server';

let sim: Simulator;
let origin: string;
beforeAll(async () => {
  sim = await startSimulator();
  origin = sim.url.replace(/\/v1$/, '');
});
afterAll(() => sim.close());

type Wire = Record<string, unknown>;
type Hit = Wire & { url: string; title: string; content: string; score: number };

async function read(response: Response) {
  const text = await response.text();
  const json = response.headers.get('content-type')?.startsWith('application/json') ? (JSON.parse(text) as Wire) : null;
  return { status: response.status, contentType: response.headers.get('content-type'), text, json };
}

const searxng = (params: Record<string, string>) => fetch(`${origin}/search?${new URLSearchParams(params)}`).then(read);
const tavily = (body: Wire, headers: Record<string, string> = { authorization: 'Bearer tvly-test', 'content-type': 'application/json' }) =>
  fetch(`${origin}/search`, { method: 'POST', headers, body: JSON.stringify(body) }).then(read);
const hitsOf = (json: Wire | null) => (json?.results ?? []) as Hit[];

describe('GET /search (SearXNG)', () => {
  it("answers a page of 10 results in SearXNG's JSON shape, with no key", async () => {
    const { status, json } = await searxng({ q: 'capital of France', format: 'json', pageno: '1' });
    expect(status).toBe(200);
    expect(json).toMatchObject({
      query: 'capital of France',
      number_of_results: 0,
      answers: [],
      corrections: [],
      infoboxes: [],
      suggestions: [],
      unresponsive_engines: [],
    });
    const hits = hitsOf(json);
    expect(hits).toHaveLength(10);
    const { publishedDate, ...first } = hits[0];
    expect(first).toEqual({
      url: expect.stringMatching(/^https:\/\/[a-z.-]+\/capital-of-france-[0-9a-f]{8}$/),
      title: expect.stringMatching(/^Capital Of France - /),
      content: expect.stringContaining('capital of France'),
      thumbnail: '',
      engine: 'duckduckgo',
      template: 'default.html',
      parsed_url: ['https', expect.any(String), expect.stringMatching(/^\/capital-of-france-/), '', '', ''],
      img_src: '',
      priority: '',
      engines: ['duckduckgo'],
      positions: [1],
      score: 0.95,
      category: 'general',
    });
    const scores = hits.map((h) => h.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
    expect(scores.every((s) => s > 0 && s <= 1)).toBe(true);
    expect(hits.every((h) => h.content.length <= 300)).toBe(true);
    expect(publishedDate === null || typeof publishedDate === 'string').toBe(true);
    const dated = (h: Hit) => /arxiv|nature|bbc|ycombinator/.test(h.url);
    for (const hit of hits) expect(hit.publishedDate).toEqual(dated(hit) ? expect.stringMatching(/^20\d\d-\d\d-\d\dT00:00:00$/) : null);
  });

  it('builds urls by the documented rule: sha256 of the words and the domain, ordered by it', async () => {
    const hits = hitsOf((await searxng({ q: 'Capital  of FRANCE?', format: 'json' })).json);
    const expected = hits.map((h) => {
      const domain = new URL(h.url).hostname;
      const hash = createHash('sha256').update(`capital of france\n${domain}`).digest('hex');
      return { url: `https://${domain}/capital-of-france-${hash.slice(0, 8)}`, hash };
    });
    expect(hits.map((h) => h.url)).toEqual(expected.map((e) => e.url));
    expect(expected.map((e) => e.hash)).toEqual(expected.map((e) => e.hash).sort());
  });

  it('keeps the query string in received; pageno 2 has the two sites left', async () => {
    const { json } = await searxng({ q: 'node streams', format: 'json', pageno: '2', language: 'en' });
    expect(sim.received.at(-1)).toEqual({ q: 'node streams', format: 'json', pageno: '2', language: 'en' });
    expect(hitsOf(json).map((h) => h.positions)).toEqual([[11], [12]]);
  });

  it('answers 403 in plain text without format=json, and 400 {error} without a query or with a bad page number', async () => {
    const html = await searxng({ q: 'x' });
    expect(html).toMatchObject({ status: 403, contentType: 'text/plain; charset=utf-8', json: null });
    expect(html.text).toMatch(/format=json/);
    expect(await searxng({ q: 'x', format: 'html' })).toMatchObject({ status: 403 });
    expect(await searxng({ format: 'json' })).toMatchObject({ status: 400, json: { error: 'No query' } });
    expect(await searxng({ q: '', format: 'json' })).toMatchObject({ status: 400, json: { error: 'No query' } });
    expect(await searxng({ q: 'x', format: 'json', pageno: '0' })).toMatchObject({ status: 400, json: { error: 'Invalid value "0" for parameter pageno' } });
  });

  it('honours fail and fail_search in plain text, empty, and rejects an unknown directive', async () => {
    expect(await searxng({ q: 'x\n#sim {"fail": 429}', format: 'json' })).toMatchObject({ status: 429, text: 'simulated failure (#sim fail 429)' });
    expect(await searxng({ q: 'x\n#sim {"fail_search": 503}', format: 'json' })).toMatchObject({
      status: 503,
      text: 'simulated failure (#sim fail_search 503)',
    });
    expect(hitsOf((await searxng({ q: 'x\n#sim {"empty": true}', format: 'json' })).json)).toEqual([]);
    expect(await searxng({ q: 'x\n#sim {"nope": 1}', format: 'json' })).toMatchObject({ status: 400, json: { error: '#sim: unknown directive "nope"' } });
  });
});

describe('POST /search (Tavily)', () => {
  it("answers Tavily's shape: max_results (default 5), raw_content only when asked, a request id and a response time", async () => {
    const { status, json } = await tavily({ query: 'capital of France' });
    expect(status).toBe(200);
    expect(json).toEqual({
      query: 'capital of France',
      answer: null,
      images: [],
      results: expect.any(Array),
      response_time: expect.any(Number),
      request_id: expect.stringMatching(/^00000000-0000-4000-8000-[0-9a-f]{12}$/),
    });
    const hits = hitsOf(json);
    expect(hits).toHaveLength(5);
    expect(hits[0]).toEqual({
      title: expect.stringMatching(/^Capital Of France - /),
      url: expect.any(String),
      content: expect.any(String),
      score: 0.95,
      raw_content: null,
    });

    const full = hitsOf((await tavily({ query: 'capital of France', max_results: 12, include_raw_content: true, include_answer: true })).json);
    expect(full).toHaveLength(12);
    for (const hit of full) {
      const raw = hit.raw_content as string;
      expect(raw.split(/\s+/).length).toBeGreaterThanOrEqual(400);
      expect(raw).toContain('capital of France');
      expect(raw.split('\n\n').length).toBeGreaterThan(3);
    }
    expect(full.slice(0, 5).map((h) => h.url)).toEqual(hits.map((h) => h.url));
  });

  it('finds the same pages as SearXNG for the same query', async () => {
    const fromTavily = hitsOf((await tavily({ query: 'rust ownership', max_results: 10 })).json);
    const fromSearxng = hitsOf((await searxng({ q: 'rust ownership', format: 'json' })).json);
    expect(fromTavily.map((h) => h.url)).toEqual(fromSearxng.map((h) => h.url));
  });

  it('keeps to include_domains (synthesising a page where no site is) and leaves out exclude_domains', async () => {
    const included = hitsOf((await tavily({ query: 'q', include_domains: ['wikipedia.org', 'example.com'] })).json);
    expect(included.map((h) => new URL(h.url).hostname).sort()).toEqual(['en.wikipedia.org', 'example.com']);
    expect(included.find((h) => h.url.includes('example.com'))?.title).toBe('Q - example.com');
    const excluded = hitsOf((await tavily({ query: 'q', max_results: 20, exclude_domains: ['github.com', 'wikipedia.org'] })).json);
    expect(excluded).toHaveLength(10);
    expect(excluded.some((h) => /github\.com|wikipedia\.org/.test(h.url))).toBe(false);
  });

  it('answers 401 in its own words without a key, and 400 {detail: {error}} for a bad request', async () => {
    expect(await tavily({ query: 'q' }, { 'content-type': 'application/json' })).toMatchObject({
      status: 401,
      json: { detail: { error: 'Unauthorized: missing or invalid API key.' } },
    });
    for (const body of [
      {},
      { query: '  ' },
      { query: 'q', max_results: 21 },
      { query: 'q', max_results: -1 },
      { query: 'q', country: 'DE' },
      { query: 'q', search_depth: 'deep' },
      { query: 'q', include_domains: 'a.com' },
    ]) {
      const { status, json } = await tavily(body);
      expect({ body, status }).toEqual({ body, status: 400 });
      expect(json).toEqual({ detail: { error: expect.any(String) } });
    }
    expect(hitsOf((await tavily({ query: 'q', max_results: 0, country: 'germany' })).json)).toEqual([]);
  });

  it('honours fail, fail_search, empty and delay_ms', async () => {
    expect(await tavily({ query: 'x\n#sim {"fail": 500}' })).toMatchObject({ status: 500, json: { detail: { error: 'simulated failure (#sim fail 500)' } } });
    expect(await tavily({ query: 'x\n#sim {"fail_search": 432}' })).toMatchObject({
      status: 432,
      json: { detail: { error: 'simulated failure (#sim fail_search 432)' } },
    });
    expect(hitsOf((await tavily({ query: 'x\n#sim {"empty": true}' })).json)).toEqual([]);
    const delayed = await tavily({ query: 'x\n#sim {"delay_ms": 120}' });
    expect(delayed.json?.response_time).toBeGreaterThanOrEqual(0.1);
  });
});

it('fail_search leaves the chat model answering the same message', async () => {
  const response = await fetch(`${sim.url}/chat/completions`, {
    method: 'POST',
    headers: { authorization: 'Bearer k', 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'sim/echo', messages: [{ role: 'user', content: 'news today\n#sim {"fail_search": 503}' }] }),
  });
  expect(response.status).toBe(200);
  expect(((await response.json()) as { choices: { message: { content: string } }[] }).choices[0].message.content).toBe('Echo: news today');
});
