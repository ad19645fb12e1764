import OpenAI from 'openai';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { BUILTIN_CATALOG_PATH } from '@svc/catalog';
import { accountStream } from '@svc/ledger';
import { usdToNano } from '@svc/platform';
import { countChatPromptTokens, type Simulator, startSimulator } from '@svc/providers';
import { startWithClient, stopGateway, type Call, type StartedGateway } from '../support/gateway';

/** Nano-USD per token of each provider of the test models. */
const PRICES = { premium: { input: 6000n, output: 24000n }, private: { input: 2000n, output: 8000n }, cheap: { input: 500n, output: 2000n } };

/**
 * The built-in catalog plus two copies of sim/echo served by three providers of the test's own
 * simulator, in this catalog order, so that neither catalog order nor price alone predicts
 * every answer:
 *   premium  $6/$24   bf16  no tools  collection allowed
 *   private  $2/$8    fp8   tools     collection denied, ZDR
 *   cheap    $0.5/$2  int8  tools     collection allowed
 * `test/routed` is for preferences and suffixes; `test/speed` has its own speed figures
 * (they are kept per model), warmed by the `:nitro` / sort tests alone.
 */
function routingCatalog(dir: string): string {
  const catalog = parse(readFileSync(BUILTIN_CATALOG_PATH, 'utf8'));
  for (const name of ['premium', 'private', 'cheap']) catalog.providers[name] = { ...catalog.providers.sim };
  const echo = catalog.models.find((m: { id: string }) => m.id === 'sim/echo');
  const routes = (prefix: string) => [
    { provider: 'premium', upstream_model: `${prefix}/premium`, pricing: { input: '6.00', output: '24.00' }, quantization: 'bf16', tools: false },
    {
      provider: 'private',
      upstream_model: `${prefix}/private`,
      pricing: { input: '2.00', output: '8.00' },
      quantization: 'fp8',
      data_collection: 'deny',
      zdr: true,
    },
    { provider: 'cheap', upstream_model: `${prefix}/cheap`, pricing: { input: '0.50', output: '2.00' }, quantization: 'int8' },
  ];
  catalog.models.push({ ...echo, id: 'test/routed', name: 'Routed', providers: routes('up') });
  catalog.models.push({ ...echo, id: 'test/speed', name: 'Speed', providers: routes('speed') });
  const path = join(dir, 'catalog.yaml');
  writeFileSync(path, stringify(catalog));
  return path;
}

type Params = OpenAI.ChatCompletionCreateParamsNonStreaming & { provider?: unknown };
type Completion = OpenAI.ChatCompletion & { usage: OpenAI.CompletionUsage & { cost: number } };

describe('provider routing and model suffixes (issue 5; spec 1, 4.2 provider and rule 10)', () => {
  let sim: Simulator;
  let gw: StartedGateway;
  let client: OpenAI;
  let call: Call;

  beforeAll(async () => {
    sim = await startSimulator();
    const dir = mkdtempSync(join(tmpdir(), 'svc-e2e-'));
    ({ gw, client, call } = await startWithClient({ SVC_SIMULATOR_URL: sim.url, SVC_CATALOG: routingCatalog(dir) }, dir));
  }, 60_000);

  afterAll(async () => {
    await stopGateway(gw);
    await sim?.close();
  });

  const user = (content: string) => [{ role: 'user' as const, content }];
  const TOOLS = [{ type: 'function' as const, function: { name: 'lookup', parameters: { type: 'object', properties: {} } } }];
  const generation = async (id: string) =>
    (await call('GET', `/generation?id=${id}`, { key: gw.keys.api_key })).json.data as { provider: string; model: string };
  const failure = (promise: Promise<unknown>) =>
    promise.then(
      () => null,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
  const chat = async (body: Params) => (await client.chat.completions.create(body as OpenAI.ChatCompletionCreateParamsNonStreaming)) as Completion;

  async function upstreamCalls<T>(run: () => Promise<T>): Promise<[T, number]> {
    const before = sim.requests;
    const result = await run();
    return [result, sim.requests - before];
  }

  /** Which provider answered, after checking the answer names the model without suffix and costs that provider's prices. */
  async function answeredBy(body: Params, model = 'test/routed'): Promise<string> {
    const completion = await chat(body);
    expect(completion.model).toBe(model);
    const { provider } = await generation(completion.id);
    const prices = PRICES[provider as keyof typeof PRICES];
    expect(prices).toBeDefined();
    const { prompt_tokens, completion_tokens, cost } = completion.usage;
    expect(usdToNano(cost)).toBe(BigInt(prompt_tokens) * prices.input + BigInt(completion_tokens) * prices.output);
    return provider;
  }

  it.each<[string, Partial<Params>, string]>([
    ['no preferences: catalog order', {}, 'premium'],
    ['only', { provider: { only: ['cheap'] } }, 'cheap'],
    ['ignore', { provider: { ignore: ['premium'] } }, 'private'],
    ['order', { provider: { order: ['cheap', 'private'] } }, 'cheap'],
    ['quantizations', { provider: { quantizations: ['int8', 'fp8'] } }, 'private'],
    ['data_collection deny', { provider: { data_collection: 'deny' } }, 'private'],
    ['zdr', { provider: { zdr: true } }, 'private'],
    ['sort price', { provider: { sort: 'price' } }, 'cheap'],
    ['require_parameters with tools', { tools: TOOLS, provider: { require_parameters: true } }, 'private'],
    ['tools without require_parameters', { tools: TOOLS }, 'premium'],
    [':floor', { model: 'test/routed:floor' }, 'cheap'],
    [':exacto (tool calling, then price)', { model: 'test/routed:exacto' }, 'cheap'],
    [':exacto within the preferences', { model: 'test/routed:exacto', provider: { ignore: ['cheap'] } }, 'private'],
  ])('%s: %j answers from %s, at its prices', async (_what, extra, expected) => {
    expect(await answeredBy({ model: 'test/routed', messages: user('Route me'), ...extra } as Params)).toBe(expected);
  });

  it('holds the worst case of the dearest provider routing left, not of the model', async () => {
    const messages = user('Hold');
    const completion = await chat({ model: 'test/routed', messages, max_tokens: 100, provider: { only: ['cheap', 'private'] } });
    const events = await gw.runtime.store.readStream(accountStream(gw.keys.account_id));
    const hold = events.find((e) => e.type === 'HoldPlaced' && (e.data as { hold_id: string }).hold_id === completion.id)!.data as { amount_nano: string };
    const prompt = BigInt(countChatPromptTokens(messages));
    expect(BigInt(hold.amount_nano)).toBe(prompt * PRICES.private.input + 100n * PRICES.private.output);
  });

  it('falls back to the next routed provider, but not with allow_fallbacks false', async () => {
    const messages = user('Down\n#sim {"fail_models": {"up/premium": 503}}');
    const [fellBack, calls] = await upstreamCalls(() => chat({ model: 'test/routed', messages }));
    expect(calls).toBe(2);
    expect(await generation(fellBack.id)).toMatchObject({ provider: 'private' });

    const [error, strictCalls] = await upstreamCalls(() => failure(chat({ model: 'test/routed', messages, provider: { allow_fallbacks: false } })));
    expect(strictCalls).toBe(1);
    expect(error!.status).toBe(503);
  });

  it('routes a streamed request too', async () => {
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    const body = { model: 'test/routed:floor', messages: user('Flow'), stream: true, stream_options: { include_usage: true } };
    for await (const chunk of await client.chat.completions.create(body as OpenAI.ChatCompletionCreateParamsStreaming)) chunks.push(chunk);
    expect(chunks.every((c) => c.model === 'test/routed')).toBe(true);
    expect(await generation(chunks[0].id)).toMatchObject({ provider: 'cheap' });
  });

  it(':thinking turns reasoning on upstream, keeps the caller’s own, and routing stays here', async () => {
    const premium = gw.runtime.providers.get('premium')!;
    const spy = jest.spyOn(premium as { chat: NonNullable<typeof premium.chat> }, 'chat');
    try {
      await chat({ model: 'test/routed:thinking', messages: user('Think'), provider: { only: ['premium'] } });
      await chat({ model: 'test/routed:thinking', messages: user('Think'), reasoning_effort: 'high', provider: { only: ['premium'] } });
      const [first, second] = spy.mock.calls.map(([body]) => body as Record<string, unknown>);
      expect(first).toMatchObject({ model: 'up/premium', reasoning: { effort: 'medium' } });
      expect(first.provider).toBeUndefined();
      expect(second).toMatchObject({ reasoning_effort: 'high' });
      expect(second.reasoning).toBeUndefined();
    } finally {
      spy.mockRestore();
    }
  });

  it(':nitro and sort throughput / latency follow the measured speeds', async () => {
    // Warm the figures: premium and cheap answer slowly, private at once.
    for (const [provider, delay] of [
      ['premium', 300],
      ['cheap', 300],
      ['private', 0],
    ] as const) {
      await chat({ model: 'test/speed', messages: user(`Warm up\n#sim {"delay_ms": ${delay}}`), provider: { only: [provider] } });
    }
    expect(await answeredBy({ model: 'test/speed:nitro', messages: user('Fast') }, 'test/speed')).toBe('private');
    expect(await answeredBy({ model: 'test/speed', messages: user('Fast'), provider: { sort: 'throughput' } }, 'test/speed')).toBe('private');
    expect(await answeredBy({ model: 'test/speed', messages: user('Fast'), provider: { sort: 'latency' } }, 'test/speed')).toBe('private');

    // private slows down for a while, cheap is fast now: the ranking follows. Ten answers each
    // outweigh the old figures (0.7^10 of them remain) whatever the machine's own speed.
    const speed = (provider: string, delay: number) =>
      chat({ model: 'test/speed', messages: user(`Now\n#sim {"delay_ms": ${delay}, "completion_tokens": 20}`), provider: { only: [provider] } });
    await Promise.all(Array.from({ length: 10 }, () => [speed('private', 400), speed('cheap', 0)]).flat());
    expect(await answeredBy({ model: 'test/speed:nitro', messages: user('Fast') }, 'test/speed')).toBe('cheap');
  });

  it.each([
    ['no provider left', { model: 'test/routed', provider: { only: ['premium'], zdr: true } }, 404, 'no_provider_available', 'provider'],
    ['an unknown sort', { model: 'test/routed', provider: { sort: 'fastest' } }, 400, null, 'provider.sort'],
    ['only that is not a list', { model: 'test/routed', provider: { only: 'cheap' } }, 400, null, 'provider.only'],
    ['an unknown quantization', { model: 'test/routed', provider: { quantizations: ['fp9'] } }, 400, null, 'provider.quantizations'],
    ['allow_fallbacks not a boolean', { model: 'test/routed', provider: { allow_fallbacks: 'no' } }, 400, null, 'provider.allow_fallbacks'],
    ['an unknown member', { model: 'test/routed', provider: { max_price: 1 } }, 400, null, 'provider.max_price'],
    ['provider not an object', { model: 'test/routed', provider: 'cheap' }, 400, null, 'provider'],
    ['an unknown suffix', { model: 'test/routed:turbo' }, 404, 'model_not_found', 'model'],
    [
      ':online with an engine option out of range',
      { model: 'test/routed:online', plugins: [{ id: 'web', max_results: 0 }] },
      400,
      null,
      'plugins[0].max_results',
    ],
    [':thinking on a model without reasoning', { model: 'sim/small-8k:thinking' }, 400, 'unsupported_parameter', 'model'],
    [':exacto on a model without tools', { model: 'sim/small-8k:exacto' }, 404, 'no_provider_available', 'model'],
  ])('refuses %s before calling anything', async (_what, body, status, code, param) => {
    const [r, calls] = await upstreamCalls(() => call('POST', '/chat/completions', { key: gw.keys.api_key, body: { messages: user('hi'), ...body } }));
    expect(calls).toBe(0);
    expect(r.status).toBe(status);
    expect(r.json.error).toMatchObject({ param, ...(code ? { code } : {}) });
  });
});
