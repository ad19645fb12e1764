import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { countTextTokens } from '@svc/providers';
import { usdToNano } from '@svc/platform';
import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { chargeEventOf, costLinesOf } from '../support/cost-lines';
import { creditsOf, expectBilled, generationOf, rawStream, rejectionOf } from '../support/interfaces';

// The built-in catalog: sim/searxng (the default engine) $0.002 per query, sim/tavily $0.008;
// sim/echo $2.00 / $8.00 per million input / output tokens.
const SEARXNG_QUERY_NANO = 2_000_000n;
const TAVILY_QUERY_NANO = 8_000_000n;
const echoTokensNano = (usage: { prompt_tokens: number; completion_tokens: number }) => {
  const nano = BigInt(usage.prompt_tokens) * 2_000_000_000n + BigInt(usage.completion_tokens) * 8_000_000_000n;
  return (nano + 999_999n) / 1_000_000n;
};

interface Hit {
  title: string;
  url: string;
  snippet: string;
  content: string;
  date: string | null;
}

/**
 * Issue 18, spec 4.14 (search), 4.2 rule 7 (`:online` and the web plugin), 4.3 and 4.5 (the
 * vendors' web search tools): engines of the catalog answered by the simulated SearXNG and
 * Tavily APIs, billed per query, alone or on the generation that used them.
 */
describe('web search (issue 18; spec 4.14, 4.2 rule 7, 4.3, 4.5)', () => {
  let gw: StartedGateway;
  let call: Call;
  let key: string;
  let openai: OpenAI;
  let anthropic: Anthropic;

  beforeAll(async () => {
    gw = await startGateway();
    call = api(gw.url);
    key = gw.keys.api_key;
    openai = new OpenAI({ baseURL: gw.url, apiKey: key, maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: gw.url.replace(/\/v1$/, ''), apiKey: key, maxRetries: 0 });
  }, 60_000);
  afterAll(() => stopGateway(gw));

  const balance = async () => usdToNano((await creditsOf(call, key)).balance);
  const search = (body: unknown, engine?: string) => call('POST', engine ? `/search/${engine}` : '/search', { key, body });
  /** What the simulator received last on a route: the gateway's upstream requests. */
  const received = () => gw.runtime.simulator!.received as Array<Record<string, any>>;

  describe('POST /v1/search and /v1/search/{engine}', () => {
    it('searches the default engine (SearXNG), billed one query: usage.cost is the balance drop and the generation', async () => {
      const before = await creditsOf(call, key);
      const r = await search({ query: 'event sourcing ledger', max_results: 4 });
      expect(r.status).toBe(200);
      expect(r.json).toMatchObject({ object: 'search', model: 'sim/searxng', usage: { queries: 1 } });
      expect(r.headers.get('x-svc-generation-id')).toBe(r.json.id);
      const results = r.json.results as Hit[];
      expect(results).toHaveLength(4);
      for (const hit of results) {
        expect(new URL(hit.url).protocol).toBe('https:');
        expect(hit.title).not.toBe('');
        expect(hit.snippet).not.toBe('');
        // SearXNG returns no page text: the content is its snippet.
        expect(hit.content).toBe(hit.snippet);
      }
      expect(usdToNano(r.json.usage.cost)).toBe(SEARXNG_QUERY_NANO);
      await expectBilled(call, key, r.json.id, r.json.usage.cost, '/v1/search', before);
      expect(await generationOf(call, key, r.json.id)).toMatchObject({ model: 'sim/searxng', provider: 'sim-searxng', usage_by_meter: { queries: 1 } });
      // The same query gives the same pages: the engine is deterministic.
      expect(((await search({ query: 'event sourcing ledger', max_results: 4 })).json.results as Hit[]).map((h) => h.url)).toEqual(results.map((h) => h.url));
    });

    it('bills one query per string of a query array (3 queries = 3 x the engine price), on the engine of the path', async () => {
      const before = await balance();
      const queries = ['postgres advisory locks', 'nestjs fastify adapter', 'idempotency keys'];
      const r = await search({ query: queries, max_results: 2, max_tokens_per_page: 40 }, 'sim/tavily');
      expect(r.status).toBe(200);
      expect(r.json.model).toBe('sim/tavily');
      const lists = r.json.results as Hit[][];
      expect(lists).toHaveLength(3);
      for (const hits of lists) {
        expect(hits).toHaveLength(2);
        // Tavily returns page text: cut to max_tokens_per_page.
        for (const hit of hits) {
          expect(hit.content.length).toBeGreaterThan(hit.snippet.length / 2);
          expect(countTextTokens(hit.content)).toBeLessThanOrEqual(40);
        }
      }
      expect(new Set(lists.flat().map((h) => h.url)).size).toBe(6);
      expect(r.json.usage).toMatchObject({ queries: 3 });
      expect(usdToNano(r.json.usage.cost)).toBe(3n * TAVILY_QUERY_NANO);
      expect(before - (await balance())).toBe(3n * TAVILY_QUERY_NANO);
      // Each query went upstream once, in Tavily's wire format.
      const upstream = received().slice(-3);
      expect(upstream.map((b) => b.query).sort()).toEqual([...queries].sort());
      expect(upstream[0]).toMatchObject({ max_results: 2, include_raw_content: true });
    });

    it('takes the engine from search_tool_name, and passes the domain filter and the country on', async () => {
      const r = await search({ query: 'rust async', search_tool_name: 'sim/tavily', search_domain_filter: ['github.com'], country: 'de', max_results: 3 });
      expect(r.status).toBe(200);
      expect(r.json.model).toBe('sim/tavily');
      const hits = r.json.results as Hit[];
      expect(hits.length).toBeGreaterThan(0);
      for (const hit of hits) expect(new URL(hit.url).hostname).toMatch(/(^|\.)github\.com$/);
      expect(received().at(-1)).toMatchObject({ include_domains: ['github.com'], country: 'germany' });
      const excluded = await search({ query: 'rust async', search_domain_filter: ['-github.com', '-en.wikipedia.org'], max_results: 10 });
      expect(excluded.status).toBe(200);
      for (const hit of excluded.json.results as Hit[]) expect(new URL(hit.url).hostname).not.toMatch(/github\.com$|en\.wikipedia\.org$/);
    });

    it('lists the engines: GET /v1/models?type=search, with their price per query', async () => {
      const r = await call('GET', '/models?type=search', { key });
      expect(r.status).toBe(200);
      const models = r.json.data as { id: string; pricing: Record<string, string> }[];
      expect(models.map((m) => m.id)).toEqual(['sim/searxng', 'sim/tavily']);
      expect(models[0].pricing).toMatchObject({ request: '0.002' });
    });

    it('spec 1 rule 3: a failing engine or a query that finds nothing is not billed', async () => {
      const before = await balance();
      const failed = await search({ query: 'anything\n#sim {"fail_search": 503}' });
      expect(failed.status).toBeGreaterThanOrEqual(500);
      expect(failed.json.error).toMatchObject({ type: expect.any(String) });
      expect(await generationOf(call, key, failed.headers.get('x-svc-generation-id')!)).toMatchObject({ status: 'failed', total_cost: 0 });
      const empty = await search({ query: 'nothing here\n#sim {"empty": true}' }, 'sim/tavily');
      expect(empty.status).toBe(200);
      expect(empty.json.results).toEqual([]);
      expect(empty.json.usage).toEqual({ queries: 0, cost: 0 });
      expect(await balance()).toBe(before);
    });

    it.each([
      ['an unknown engine in the path', 'sim/nope', { query: 'q' }, 404, 'engine'],
      ['an unknown search_tool_name', undefined, { query: 'q', search_tool_name: 'sim/nope' }, 404, 'search_tool_name'],
      ['a chat model as the engine', 'sim/echo', { query: 'q' }, 400, 'engine'],
      ['an empty query', undefined, { query: '  ' }, 400, 'query'],
      ['no query', undefined, {}, 400, 'query'],
      ['an empty query array', undefined, { query: [] }, 400, 'query'],
      ['an empty string in a query array', undefined, { query: ['a', ''] }, 400, 'query[1]'],
      ['six queries', undefined, { query: ['a', 'b', 'c', 'd', 'e', 'f'] }, 400, 'query'],
      ['max_results 0', undefined, { query: 'q', max_results: 0 }, 400, 'max_results'],
      ['max_results 1,000', undefined, { query: 'q', max_results: 1000 }, 400, 'max_results'],
      ['a domain filter that keeps and excludes', undefined, { query: 'q', search_domain_filter: ['a.com', '-b.com'] }, 400, 'search_domain_filter'],
      ['a domain that is not one', undefined, { query: 'q', search_domain_filter: ['not a domain'] }, 400, 'search_domain_filter[0]'],
      ['a country that is not a code', undefined, { query: 'q', country: 'Germany' }, 400, 'country'],
      ['max_tokens_per_page 0', undefined, { query: 'q', max_tokens_per_page: 0 }, 400, 'max_tokens_per_page'],
    ])('refuses %s with a clear error, and bills and calls nothing', async (_what, engine, body, status, param) => {
      const before = await balance();
      const upstream = gw.runtime.simulator!.requests;
      const r = await search(body, engine);
      expect(r.status).toBe(status);
      expect(r.json.error).toMatchObject({ param });
      expect(r.json.error.message).not.toBe('');
      expect(gw.runtime.simulator!.requests).toBe(upstream);
      expect(await balance()).toBe(before);
    });
  });

  describe(':online and the web plugin on chat (spec 4.2 rule 7)', () => {
    it('searches the last user message, gives the results to the model, cites them, and bills tokens + one search on the same generation', async () => {
      const before = await creditsOf(call, key);
      const question = 'What is new in PostgreSQL 18?';
      const { data: completion, response } = await openai.chat.completions
        .create({
          model: 'sim/echo:online',
          messages: [
            { role: 'system', content: 'Be brief.' },
            { role: 'user', content: question },
          ],
        })
        .withResponse();
      // The engine was asked the last user message, and the model got the results just before it.
      const upstream = received().slice(-2);
      expect(upstream[0]).toMatchObject({ q: question, format: 'json' });
      const sent = upstream[1].messages as { role: string; content: string }[];
      expect(sent.map((m) => m.role)).toEqual(['system', 'system', 'user']);
      expect(sent[1].content).toMatch(/^A web search was conducted on \d{4}-\d{2}-\d{2}\./);

      const usage = completion.usage as unknown as {
        prompt_tokens: number;
        completion_tokens: number;
        cost: number;
        server_tool_use: { web_search_requests: number; web_search_cost: number };
      };
      expect(usage.server_tool_use).toEqual({ web_search_requests: 1, web_search_cost: 0.002 });
      expect(usdToNano(usage.cost)).toBe(echoTokensNano(usage) + SEARXNG_QUERY_NANO);
      const id = response.headers.get('x-svc-generation-id')!;
      await expectBilled(call, key, id, usage.cost, '/v1/chat/completions', before);

      // The citations are the engine's pages for that query (asked again through /v1/search).
      const expected = (await search({ query: question, max_results: 5 })).json.results as Hit[];
      const annotations = (
        completion.choices[0].message as unknown as { annotations: { type: string; url_citation: { url: string; title: string; content: string } }[] }
      ).annotations;
      expect(annotations.map((a) => a.type)).toEqual(Array(5).fill('url_citation'));
      expect(annotations.map((a) => a.url_citation.url)).toEqual(expected.map((h) => h.url));
      expect(annotations.map((a) => a.url_citation.title)).toEqual(expected.map((h) => h.title));
      for (const url of expected.map((h) => h.url)) expect(sent[1].content).toContain(`URL: ${url}`);
      const generation = (await generationOf(call, key, id)) as unknown as { usage_by_meter: object; total_cost: number; cost_lines: never };
      expect(generation.usage_by_meter).toMatchObject({ queries: 1, input: usage.prompt_tokens });
      // Issue 23: the tokens, then the search at the engine's price, adding up to the charge.
      expect(costLinesOf(generation)).toEqual([
        ['input', usage.prompt_tokens, 0.000002, BigInt(usage.prompt_tokens) * 2000n],
        ['output', usage.completion_tokens, 0.000008, BigInt(usage.completion_tokens) * 8000n],
        ['queries', 1, 0.002, SEARXNG_QUERY_NANO],
      ]);
      // The provider cost counts the search at the SearXNG route's catalog cost ($0.0014) beside the tokens at the sim route's.
      const charged = await chargeEventOf(gw.runtime, gw.keys.account_id, id);
      expect(charged.provider_cost_nano).toBe(String(BigInt(usage.prompt_tokens) * 1400n + BigInt(usage.completion_tokens) * 5600n + 1_400_000n));
    });

    it('streamed: the citations arrive on the last delta, the usage chunk carries the searches and the cost the balance drops by', async () => {
      const before = await creditsOf(call, key);
      const stream = await openai.chat.completions.create({
        model: 'sim/echo',
        messages: [{ role: 'user', content: 'streaming search' }],
        plugins: [{ id: 'web', engine: 'sim/tavily', max_results: 2 }],
        stream: true,
        stream_options: { include_usage: true },
      } as unknown as OpenAI.ChatCompletionCreateParamsStreaming);
      const chunks: any[] = [];
      for await (const chunk of stream) chunks.push(chunk);
      const last = chunks.findIndex((c) => c.choices[0]?.finish_reason);
      expect(chunks.slice(0, last).some((c) => c.choices[0]?.delta?.annotations)).toBe(false);
      const annotations = chunks[last].choices[0].delta.annotations as { url_citation: { url: string } }[];
      expect(annotations).toHaveLength(2);
      const usage = chunks.at(-1).usage;
      expect(usage.server_tool_use).toEqual({ web_search_requests: 1, web_search_cost: 0.008 });
      expect(usdToNano(usage.cost)).toBe(echoTokensNano(usage) + TAVILY_QUERY_NANO);
      await expectBilled(call, key, chunks[0].id, usage.cost, '/v1/chat/completions', before);
      // Issue 23: sim/tavily has no catalog cost, so the call's provider cost is unknown as a whole.
      expect(await chargeEventOf(gw.runtime, gw.keys.account_id, chunks[0].id)).not.toHaveProperty('provider_cost_nano');
    });

    it('a failing search fails the request, unbilled; with on_failure "continue" the model answers without it', async () => {
      const before = await balance();
      const messages = [{ role: 'user', content: 'breaking news\n#sim {"fail_search": 503}' }];
      const failed = await call('POST', '/chat/completions', { key, body: { model: 'sim/echo:online', messages } });
      expect(failed.status).toBeGreaterThanOrEqual(500);
      const id = failed.headers.get('x-svc-generation-id')!;
      expect(await generationOf(call, key, id)).toMatchObject({ status: 'failed', total_cost: 0 });
      expect(await balance()).toBe(before);

      const r = await call('POST', '/chat/completions', { key, body: { model: 'sim/echo', messages, plugins: [{ id: 'web', on_failure: 'continue' }] } });
      expect(r.status).toBe(200);
      expect(r.json.choices[0].message.annotations).toBeUndefined();
      expect(r.json.usage.server_tool_use).toBeUndefined();
      expect(usdToNano(r.json.usage.cost)).toBe(echoTokensNano(r.json.usage));
      expect(before - (await balance())).toBe(usdToNano(r.json.usage.cost));
    });

    it('a search that finds nothing is not billed; enabled: false turns :online off', async () => {
      const empty = await call('POST', '/chat/completions', {
        key,
        body: { model: 'sim/echo:online', messages: [{ role: 'user', content: 'obscure\n#sim {"empty": true}' }] },
      });
      expect(empty.status).toBe(200);
      expect(empty.json.usage.server_tool_use).toEqual({ web_search_requests: 0, web_search_cost: 0 });
      expect(usdToNano(empty.json.usage.cost)).toBe(echoTokensNano(empty.json.usage));

      const upstream = gw.runtime.simulator!.requests;
      const off = await call('POST', '/chat/completions', {
        key,
        body: { model: 'sim/echo:online', messages: [{ role: 'user', content: 'hi' }], plugins: [{ id: 'web', enabled: false }] },
      });
      expect(off.status).toBe(200);
      expect(off.json.choices[0].message.annotations).toBeUndefined();
      expect(gw.runtime.simulator!.requests).toBe(upstream + 1);
    });

    it.each([
      ['an unknown engine', { model: 'sim/echo', plugins: [{ id: 'web', engine: 'sim/nope' }] }, 404, 'plugins[0].engine'],
      ['a chat model as the engine', { model: 'sim/echo', plugins: [{ id: 'web', engine: 'sim/small-8k' }] }, 400, 'plugins[0].engine'],
      ['max_results 0', { model: 'sim/echo:online', plugins: [{ id: 'web', max_results: 0 }] }, 400, 'plugins[0].max_results'],
    ])('refuses %s before anything is held or called', async (_what, body, status, param) => {
      const before = await balance();
      const upstream = gw.runtime.simulator!.requests;
      const r = await call('POST', '/chat/completions', { key, body: { messages: [{ role: 'user', content: 'q' }], ...body } });
      expect(r.status).toBe(status);
      expect(r.json.error).toMatchObject({ param });
      expect(gw.runtime.simulator!.requests).toBe(upstream);
      expect(await balance()).toBe(before);
    });
  });

  describe("the vendors' web search tools", () => {
    it('/v1/messages: the web_search server tool answers server_tool_use and web_search_tool_result blocks, counted in usage', async () => {
      const before = await creditsOf(call, key);
      const { data: message, response } = await anthropic.messages
        .create({
          model: 'sim/claude-echo',
          max_tokens: 256,
          messages: [{ role: 'user', content: 'Who maintains Fastify?' }],
          tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 3 }],
        })
        .withResponse();
      expect(message.content[0]).toMatchObject({ type: 'server_tool_use', name: 'web_search', input: { query: 'Who maintains Fastify?' } });
      const result = message.content[1] as Anthropic.WebSearchToolResultBlock;
      expect(result).toMatchObject({ type: 'web_search_tool_result', tool_use_id: (message.content[0] as Anthropic.ServerToolUseBlock).id });
      const hits = result.content as Anthropic.WebSearchResultBlock[];
      expect(hits).toHaveLength(5);
      for (const hit of hits) expect(hit).toMatchObject({ type: 'web_search_result', url: expect.stringMatching(/^https:\/\//), title: expect.any(String) });
      expect(message.content[2]).toMatchObject({ type: 'text' });
      expect(message.usage.server_tool_use).toMatchObject({ web_search_requests: 1 });
      await expectBilled(call, key, response.headers.get('x-svc-generation-id')!, (message.usage as unknown as { cost: number }).cost, '/v1/messages', before);
    });

    it('/v1/messages streamed: the search blocks come first and message_delta counts the search', async () => {
      const stream = anthropic.messages.stream({
        model: 'sim/echo',
        max_tokens: 128,
        messages: [{ role: 'user', content: 'streamed tool search' }],
        tools: [{ type: 'web_search_20250305', name: 'web_search' }],
      });
      const final = await stream.finalMessage();
      expect(final.content.map((b) => b.type)).toEqual(['server_tool_use', 'web_search_tool_result', 'text']);
      expect(final.usage.server_tool_use).toMatchObject({ web_search_requests: 1 });
    });

    it('/v1/responses: the web_search tool answers a web_search_call item and url_citation annotations in the Responses shape', async () => {
      const before = await creditsOf(call, key);
      const { data: response, response: raw } = await openai.responses
        .create({ model: 'sim/echo', input: 'Latest Node.js LTS?', tools: [{ type: 'web_search' }] })
        .withResponse();
      expect(response.output[0]).toMatchObject({ type: 'web_search_call', status: 'completed', action: { type: 'search', query: 'Latest Node.js LTS?' } });
      const message = response.output.find((item) => item.type === 'message') as OpenAI.Responses.ResponseOutputMessage;
      const text = message.content[0] as OpenAI.Responses.ResponseOutputText;
      expect(text.annotations).toHaveLength(5);
      for (const a of text.annotations)
        expect(a).toMatchObject({
          type: 'url_citation',
          url: expect.stringMatching(/^https:\/\//),
          start_index: expect.any(Number),
          end_index: expect.any(Number),
        });
      await expectBilled(call, key, raw.headers.get('x-svc-generation-id')!, (response.usage as unknown as { cost: number }).cost, '/v1/responses', before);
    });

    it('/v1/responses streamed: the web_search_call events precede the message', async () => {
      const { frames } = await rawStream(gw.url, '/responses', key, { model: 'sim/echo', input: 'stream it', tools: [{ type: 'web_search' }], stream: true });
      const types = frames.map((f) => f.event);
      const added = types.indexOf('response.web_search_call.completed');
      expect(added).toBeGreaterThan(0);
      expect(added).toBeLessThan(types.indexOf('response.output_text.delta'));
      expect(types).toContain('response.output_text.annotation.added');
      expect(types.at(-1)).toBe('response.completed');
    });
  });

  it('the error of a web search tool on /v1/messages is in the Anthropic shape', async () => {
    const error = await rejectionOf(
      anthropic.messages.create({
        model: 'sim/echo',
        max_tokens: 16,
        messages: [{ role: 'user', content: 'q' }],
        tools: [{ type: 'web_search_20250305', name: 'web_search', allowed_domains: ['a.com'], blocked_domains: ['b.com'] }],
      }),
      Anthropic.BadRequestError,
    );
    expect(error.error).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
  });
});
