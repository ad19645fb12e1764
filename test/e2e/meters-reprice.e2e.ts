import { api, type Call, startGateway, stopGateway, type StartedGateway } from '../support/gateway';

const ADMIN_TOKEN = 'admin-token-for-meter-tests';
const PER_MILLION = 1_000_000n;

/**
 * A reader's own pricing of a charge from the meters it is shown: every meter at its own
 * catalog price, spec 1 rule 5 (cached input at the cached price, reasoning inside output),
 * rounded up to the nano once over the tokens. Deliberately not the gateway's pricing code: it
 * reads `usage_by_meter` literally, as an auditor would.
 */
function repriceNano(meters: Record<string, number>, prices: { inputPerM: bigint; cachedInputPerM: bigint; outputPerM: bigint }): bigint {
  const known = new Set(['input', 'cached_input', 'output']);
  for (const meter of Object.keys(meters)) if (!known.has(meter)) throw new Error(`unexpected meter ${meter}`);
  const q = (m: string) => BigInt(meters[m] ?? 0);
  const tokens = q('input') * prices.inputPerM + q('cached_input') * prices.cachedInputPerM + q('output') * prices.outputPerM;
  return (tokens + PER_MILLION - 1n) / PER_MILLION;
}

const usdToNano = (usd: number): bigint => BigInt(Math.round(usd * 1e9));

describe('meters agree with the charge: every charge re-priced from its meters gives its amount (issue 41 item 14)', () => {
  let gw: StartedGateway;
  let call: Call;
  let key: string;
  let management: string;
  const ids: string[] = [];
  const admin = (method: string, path: string, body?: unknown) => call(method, path, { body, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });

  beforeAll(async () => {
    gw = await startGateway({ SVC_ADMIN_TOKEN: ADMIN_TOKEN });
    call = api(gw.url.replace(/\/v1$/, ''));
    const accountId = (await admin('POST', '/admin/accounts', { initial_credits_usd: 5 })).json.id;
    key = (await admin('POST', `/admin/accounts/${accountId}/keys`, {})).json.key;
    management = (await admin('POST', `/admin/accounts/${accountId}/keys`, { scope: 'management' })).json.key;
    // A mix: plain, cached input, reasoning, both, over two models with different cached prices.
    const steers = [
      '',
      '#sim {"cached_tokens": 8}',
      '#sim {"reasoning_tokens": 10}',
      '#sim {"cached_tokens": 8, "reasoning_tokens": 7}',
      '#sim {"cached_tokens": 3}',
    ];
    for (const model of ['sim/echo', 'sim/claude-echo']) {
      for (const [i, steer] of steers.entries()) {
        const content = `meters line ${i} of ${model}, long enough to have some prompt tokens to cache\n${steer}`;
        const r = await call('POST', '/v1/chat/completions', { key, body: { model, messages: [{ role: 'user', content }], max_tokens: 30 } });
        expect(r.status).toBe(200);
        ids.push(r.json.id);
      }
    }
  }, 120_000);

  afterAll(() => stopGateway(gw));

  const generation = async (id: string) => {
    let g: any;
    for (let i = 0; i < 100; i++) {
      const r = await call('GET', `/v1/generation?id=${id}`, { key });
      if (r.status === 200 && r.json.data.status === 'completed') return r.json.data;
      g = r;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`generation ${id} not completed: ${JSON.stringify(g?.json)}`);
  };

  it("re-prices every generation's usage_by_meter at the answering provider's catalog prices to exactly its total_cost", async () => {
    let cachedSeen = 0;
    for (const id of ids) {
      const g = await generation(id);
      const route = gw.runtime.catalog.get(g.model)!.providers.find((p) => p.provider.name === g.provider)!;
      if (g.tokens_cached > 0) cachedSeen++;
      expect({ id, cost: repriceNano(g.usage_by_meter, route.prices) }).toEqual({ id, cost: usdToNano(g.total_cost) });
      // The meters count each prompt token once: cached and not cached add up to the prompt.
      expect((g.usage_by_meter.input ?? 0) + (g.usage_by_meter.cached_input ?? 0)).toBe(g.tokens_prompt);
      // And they are the cost lines' quantities, meter by meter.
      for (const line of g.cost_lines.filter((l: any) => l.meter in g.usage_by_meter)) expect(line.quantity).toBe(g.usage_by_meter[line.meter]);
    }
    expect(cachedSeen).toBe(6);
  });

  it("states the same meters: the statement's by_meter is the sum of the generations' usage_by_meter (spec 4.20)", async () => {
    const sum: Record<string, number> = {};
    for (const id of ids)
      for (const [meter, q] of Object.entries((await generation(id)).usage_by_meter as Record<string, number>)) sum[meter] = (sum[meter] ?? 0) + q;
    const now = new Date(Date.now() + 1000);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const r = await call(
      'GET',
      `/v1/credits/statement?from=${new Date(Date.now() - 86_400_000).toISOString().slice(0, 10)}&to=${encodeURIComponent(now.toISOString())}`,
      { key: management },
    );
    expect(r.status).toBe(200);
    expect((r.json.data ?? r.json).totals.by_meter).toEqual(sum);
  });
});
