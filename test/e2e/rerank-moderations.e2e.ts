import OpenAI from 'openai';
import { rerankRequest } from '@svc/interfaces';
import { usdToNano } from '@svc/platform';
import { api, createAccountWithKey, startWithClient, stopGateway, type Call, type StartedGateway } from '../support/gateway';

// sim/rerank in the built-in catalog: $0.002 per search unit.
const NANO_PER_SEARCH_UNIT = 2_000_000n;

/**
 * Issue 16: rerank (spec 4.12) and moderations (spec 4.13) through the metering pipeline, and
 * the record of a response cache hit (issue 15.2), with the real simulated upstream speaking
 * Cohere's, Jina's and OpenAI's wire formats.
 */
describe('POST /v1/rerank and /v1/moderations (issue 16; spec 1, 4.12, 4.13)', () => {
  let gw: StartedGateway;
  let client: OpenAI;
  let call: Call;

  beforeAll(async () => void ({ gw, client, call } = await startWithClient()), 60_000);
  afterAll(() => stopGateway(gw));

  const key = () => gw.keys.live_api_key;
  const balance = async () => usdToNano((await call('GET', '/credits', { key: key() })).json.data.balance);
  const generation = async (id: string) => (await call('GET', `/generation?id=${id}`, { key: key() })).json.data;
  const rerank = (body: unknown, headers: Record<string, string> = {}) => call('POST', '/rerank', { key: key(), body, headers });

  const documents = [
    'Carson City is the capital city of the American state of Nevada.',
    'Washington, D.C. is the capital of the United States.',
    'Capital punishment has existed in the United States since before it was a country.',
    'The quick brown fox.',
  ];

  describe('rerank', () => {
    it('ranks Cohere-shaped documents best first, billed per search unit: usage.cost is the balance drop to the nano', async () => {
      const before = await balance();
      const r = await rerank({ model: 'sim/rerank', query: 'What is the capital of the United States?', documents, top_n: 3, return_documents: true });
      expect(r.status).toBe(200);
      expect(r.json.id).toMatch(/^gen-/);
      expect(r.headers.get('x-svc-generation-id')).toBe(r.json.id);
      expect(r.json.model).toBe('sim/rerank');
      const results = r.json.results as { index: number; relevance_score: number; document: { text: string } }[];
      expect(results).toHaveLength(3);
      expect(results.map((x) => x.relevance_score)).toEqual([...results.map((x) => x.relevance_score)].sort((a, b) => b - a));
      expect(results[0].index).toBe(1);
      for (const x of results) expect(x.document.text).toBe(documents[x.index]);
      // Four short documents and one query: one search unit.
      expect(r.json.meta).toEqual({ billed_units: { search_units: 1 } });
      expect(r.json.usage.search_units).toBe(1);
      expect(usdToNano(r.json.usage.cost)).toBe(NANO_PER_SEARCH_UNIT);
      expect(before - (await balance())).toBe(NANO_PER_SEARCH_UNIT);
      const record = await generation(r.json.id);
      expect(record).toMatchObject({
        model: 'sim/rerank',
        provider: 'sim-cohere',
        endpoint: '/v1/rerank',
        status: 'completed',
        usage_by_meter: { search_units: 1 },
      });
      expect(usdToNano(record.total_cost)).toBe(NANO_PER_SEARCH_UNIT);
    });

    it('takes {text} documents, and counts a search unit per 100 documents as Cohere does', async () => {
      const many = Array.from({ length: 250 }, (_, i) => ({ text: `document number ${i}` }));
      const before = await balance();
      const r = await rerank({ model: 'sim/rerank', query: 'number 7', documents: many });
      expect(r.status).toBe(200);
      expect(r.json.results).toHaveLength(250);
      expect(r.json.results[0]).not.toHaveProperty('document');
      expect(r.json.usage.search_units).toBe(3);
      expect(rerankRequest({ model: 'sim/rerank', query: 'number 7', documents: many }).searchUnits).toBe(3);
      expect(before - (await balance())).toBe(3n * NANO_PER_SEARCH_UNIT);
    });

    it('falls back from the Cohere provider to the Jina one when Cohere fails provider-side, billed once', async () => {
      const before = await balance();
      const r = await rerank({ model: 'sim/rerank', query: 'capital\n#sim {"fail_models": {"sim/rerank-cohere": 503}}', documents });
      expect(r.status).toBe(200);
      const record = await generation(r.json.id);
      expect(record).toMatchObject({ provider: 'sim-jina', status: 'completed' });
      expect(before - (await balance())).toBe(usdToNano(r.json.usage.cost));
      expect(usdToNano(r.json.usage.cost)).toBe(NANO_PER_SEARCH_UNIT);
    });

    it('spec 1 rule 3: an upstream failure or an empty answer is not billed', async () => {
      const before = await balance();
      const failed = await rerank({ model: 'sim/rerank', query: 'capital\n#sim {"fail": 503}', documents });
      expect(failed.status).toBe(503);
      expect(failed.json.error).toMatchObject({ type: expect.any(String) });
      const empty = await rerank({ model: 'sim/rerank', query: 'capital\n#sim {"empty": true}', documents });
      expect(empty.status).toBe(200);
      expect(empty.json.results).toEqual([]);
      expect(empty.json.usage.cost).toBe(0);
      expect(await balance()).toBe(before);
      expect(await generation(empty.json.id)).toMatchObject({ status: 'not_billed', total_cost: 0 });
      expect(await generation(failed.headers.get('x-svc-generation-id')!)).toMatchObject({ status: 'failed', total_cost: 0 });
    });

    it.each([
      [{ model: 'sim/rerank', query: 'q', documents: Array.from({ length: 1001 }, () => 'd') }, 'documents'],
      [{ model: 'sim/rerank', query: 'q', documents: [] }, 'documents'],
      [{ model: 'sim/rerank', query: 'q', documents: ['ok', 7] }, 'documents[1]'],
      [{ model: 'sim/rerank', query: 'q', documents: [{ txt: 'x' }] }, 'documents[0]'],
      [{ model: 'sim/rerank', query: 3, documents: ['d'] }, 'query'],
      [{ model: 'sim/rerank', query: '  ', documents: ['d'] }, 'query'],
      [{ model: 'sim/rerank', query: 'q', documents: ['d'], top_n: 0 }, 'top_n'],
      [{ model: 'sim/rerank', query: 'q', documents: ['d'], return_documents: 'yes' }, 'return_documents'],
      [{ query: 'q', documents: ['d'] }, 'model'],
      [{ model: 'sim/echo', query: 'q', documents: ['d'] }, 'model'],
    ])('refuses %j with a 400 naming %s, and bills nothing', async (body, param) => {
      const before = await balance();
      const r = await rerank(body);
      expect(r.status).toBe(400);
      expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param });
      expect(await balance()).toBe(before);
    });

    it('spec 1 rule 1: a worst case the balance does not cover is refused with 402 and changes nothing', async () => {
      const { key: poorKey } = await createAccountWithKey(api(gw.url.replace(/\/v1$/, '')), gw.keys.admin_token, 0.003);
      const credits = async () => (await call('GET', '/credits', { key: poorKey })).json.data;
      const before = await credits();
      // 201 documents: 3 search units, $0.006 > $0.003.
      const r = await call('POST', '/rerank', { key: poorKey, body: { model: 'sim/rerank', query: 'q', documents: Array.from({ length: 201 }, () => 'd') } });
      expect(r.status).toBe(402);
      expect(r.json.error).toMatchObject({ type: 'insufficient_quota' });
      expect(await credits()).toEqual(before);
      const fits = await call('POST', '/rerank', { key: poorKey, body: { model: 'sim/rerank', query: 'q', documents: ['d'] } });
      expect(fits.status).toBe(200);
    });

    it('replays an Idempotency-Key without billing again', async () => {
      const body = { model: 'sim/rerank', query: 'capital', documents };
      const idempotency = { 'idempotency-key': `rerank-${Date.now()}` };
      const before = await balance();
      const first = await rerank(body, idempotency);
      expect(first.status).toBe(200);
      const replay = await rerank(body, idempotency);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.json).toEqual(first.json);
      expect(before - (await balance())).toBe(usdToNano(first.json.usage.cost));
    });
  });

  describe('moderations', () => {
    it('answers the SDK per input, free: cost 0, the balance unmoved, and a generation record of cost 0', async () => {
      const before = await balance();
      const { data, response } = await client.moderations
        .create({ model: 'sim/moderation', input: ['I will kill the process', 'a calm sentence'] })
        .withResponse();
      expect(data.results).toHaveLength(2);
      expect(data.results[0].flagged).toBe(true);
      expect(data.results[0].categories.violence).toBe(true);
      expect(data.results[1].flagged).toBe(false);
      expect(data.model).toBe('sim/moderation');
      const id = (data as unknown as { id: string }).id;
      expect(response.headers.get('x-svc-generation-id')).toBe(id);
      expect((data as unknown as { usage: { cost: number } }).usage.cost).toBe(0);
      expect(await balance()).toBe(before);
      expect(await generation(id)).toMatchObject({
        model: 'sim/moderation',
        provider: 'sim',
        endpoint: '/v1/moderations',
        status: 'completed',
        total_cost: 0,
        usage_by_meter: {},
      });
    });

    it('uses the catalog moderation model when none is named, and takes image parts', async () => {
      const moderation = await client.moderations.create({
        input: [
          { type: 'text', text: 'hello' },
          { type: 'image_url', image_url: { url: 'https://example.com/gore.png' } },
        ],
      });
      expect(moderation.model).toBe('sim/moderation');
      expect(moderation.results).toHaveLength(1);
    });

    it.each([
      [{}, 'input'],
      [{ input: '' }, 'input'],
      [{ input: [1, 2] }, 'input[0]'],
      [{ input: [{ type: 'audio' }] }, 'input[0].type'],
      [{ input: [{ type: 'image_url', image_url: { url: 'http://127.0.0.1/x.png' } }] }, 'input[0].image_url.url'],
      [{ input: 'x', model: 'sim/echo' }, 'model'],
      [{ input: 'x', model: 7 }, 'model'],
    ])('refuses %j with a 400 naming %s', async (body, param) => {
      const r = await call('POST', '/moderations', { key: key(), body });
      expect(r.status).toBe(400);
      expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param });
    });

    it('answers a provider failure with the error object and records nothing billed', async () => {
      const before = await balance();
      const r = await call('POST', '/moderations', { key: key(), body: { input: 'x\n#sim {"fail": 503}' } });
      expect(r.status).toBe(503);
      expect(r.json.error.message).toEqual(expect.any(String));
      expect(await balance()).toBe(before);
    });
  });

  // Issue 15.2: every id handed out can be looked up, a cache hit's too.
  it('records a response cache hit as a generation of cost 0 that names its source', async () => {
    const body = { model: 'sim/echo', messages: [{ role: 'user', content: `cache me ${Date.now()}` }], max_tokens: 20 };
    const headers = { 'x-svc-cache': 'true' };
    const miss = await call('POST', '/chat/completions', { key: key(), body, headers });
    expect(miss.headers.get('x-svc-cache-status')).toBe('MISS');
    const before = await balance();
    const hit = await call('POST', '/chat/completions', { key: key(), body, headers });
    expect(hit.headers.get('x-svc-cache-status')).toBe('HIT');
    expect(hit.json.id).not.toBe(miss.json.id);
    expect(hit.headers.get('x-svc-cache-source-id')).toBe(miss.json.id);
    expect(await balance()).toBe(before);
    const record = await generation(hit.json.id);
    expect(record).toMatchObject({
      id: hit.json.id,
      status: 'cached',
      model: 'sim/echo',
      endpoint: '/v1/chat/completions',
      total_cost: 0,
      cache_source_id: miss.json.id,
    });
    const lookup = await call('POST', '/generations/lookup', { key: key(), body: { ids: [hit.json.id] } });
    expect(lookup.json.data[0]).toMatchObject({ found: true, status: 'cached' });
  });

  describe('free calls in activity (issue 41 item 17)', () => {
    it('counts each moderation in /v1/activity as a request of its model and endpoint, at cost 0', async () => {
      const moderationRow = async () => {
        const rows = (await call('GET', '/activity', { key: key() })).json.data as {
          model: string;
          endpoint: string;
          requests: number;
          requests_not_billed: number;
          usage: number;
        }[];
        return rows.find((r) => r.model === 'sim/moderation' && r.endpoint === '/v1/moderations');
      };
      const before = (await moderationRow())?.requests ?? 0;
      for (const input of ['one more calm sentence', 'and another'])
        expect((await call('POST', '/moderations', { key: key(), body: { model: 'sim/moderation', input } })).status).toBe(200);
      expect(await moderationRow()).toMatchObject({ requests: before + 2, requests_not_billed: 0, usage: 0 });
    });
  });

  // Last: from here on the account's rerank calls go through its own Cohere key.
  it("runs a rerank on the account's own provider key (BYOK), billing only the fee", async () => {
    const root = api(gw.url.replace(/\/v1$/, ''));
    const saved = await root('PUT', `/admin/accounts/${gw.keys.account_id}/provider-keys/sim-cohere`, {
      key: gw.keys.admin_token,
      body: { api_key: 'co-account-own-key-0123456789' },
    });
    expect(saved.status).toBe(200);
    const before = await balance();
    const r = await rerank({ model: 'sim/rerank', query: 'capital', documents });
    expect(r.status).toBe(200);
    // SVC_BYOK_FEE_PERCENT defaults to 5: 5% of one search unit's $0.002.
    const fee = (NANO_PER_SEARCH_UNIT * 5n) / 100n;
    expect(usdToNano(r.json.usage.cost)).toBe(fee);
    expect(before - (await balance())).toBe(fee);
    expect(await generation(r.json.id)).toMatchObject({ provider: 'sim-cohere:byok', status: 'completed', usage_by_meter: { search_units: 1 } });
  });
});
