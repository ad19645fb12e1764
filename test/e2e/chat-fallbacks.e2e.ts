import OpenAI from 'openai';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { BUILTIN_CATALOG_PATH } from '@svc/catalog';
import { accountStream } from '@svc/ledger';
import { usdToNano } from '@svc/platform';
import { countChatPromptTokens, countTextTokens, type Simulator, startSimulator } from '@svc/providers';
import { startWithClient, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { chargeEventOf, costLinesOf } from '../support/cost-lines';

// Nano-USD per token, from the built-in catalog: sim/echo $2 / $8 per M, sim/small-8k $0.10 / $0.40.
const PRICES = { 'sim/echo': { input: 2000n, output: 8000n }, 'sim/small-8k': { input: 100n, output: 400n } };
const UPSTREAM_TIMEOUT_MS = 1000;

type Params = OpenAI.ChatCompletionCreateParamsNonStreaming & { models?: string[] };
type StreamParams = OpenAI.ChatCompletionCreateParamsStreaming & { models?: string[] };

/**
 * The built-in catalog plus `test/two-routes`, served by two providers of the simulator in
 * this order, each under its own upstream model id so `fail_models` can fail one of them.
 */
function catalogWithTwoRoutes(dir: string): string {
  const catalog = parse(readFileSync(BUILTIN_CATALOG_PATH, 'utf8'));
  catalog.providers['test-backup'] = { ...catalog.providers.sim };
  const echo = catalog.models.find((m: { id: string }) => m.id === 'sim/echo');
  catalog.models.push({
    ...echo,
    id: 'test/two-routes',
    name: 'Two routes',
    providers: [
      { provider: 'sim', upstream_model: 'sim/first-route' },
      // Dearer than the model's list price: billing follows the provider that answered.
      // Its cost to the operator is its own too (issue 23).
      {
        provider: 'test-backup',
        upstream_model: 'sim/second-route',
        pricing: { input: '3.00', output: '12.00', cached_input: '0.75' },
        cost: { input: '2.10', output: '8.40', cached_input: '0.525' },
      },
    ],
  });
  const path = join(dir, 'catalog.yaml');
  writeFileSync(path, stringify(catalog));
  return path;
}

describe('fallback models and providers (issue 5: fallbacks; spec 4.2 rule 6, 7, 8)', () => {
  let sim: Simulator;
  let gw: StartedGateway;
  let client: OpenAI;
  let call: Call;

  beforeAll(async () => {
    // A simulator of the test's own, so its request counter shows which upstreams were called.
    sim = await startSimulator();
    const dir = mkdtempSync(join(tmpdir(), 'svc-e2e-'));
    ({ gw, client, call } = await startWithClient(
      { SVC_SIMULATOR_URL: sim.url, SVC_CATALOG: catalogWithTwoRoutes(dir), SVC_UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS) },
      dir,
    ));
  }, 60_000);

  afterAll(async () => {
    await stopGateway(gw);
    await sim?.close();
  });

  const credits = async () => (await call('GET', '/credits', { key: gw.keys.api_key })).json.data as { balance: number; held: number; open_holds: number };
  const spentSince = async (before: { balance: number }) => usdToNano(before.balance) - usdToNano((await credits()).balance);
  const generation = async (id: string) => (await call('GET', `/generation?id=${id}`, { key: gw.keys.api_key })).json.data;
  const user = (content: string) => [{ role: 'user' as const, content }];
  const chat = (body: Params) => client.chat.completions.create(body).withResponse();
  const failure = (promise: Promise<unknown>) =>
    promise.then(
      () => null,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );

  /** Counts the upstream calls `run` makes. */
  async function upstreamCalls<T>(run: () => Promise<T>): Promise<[T, number]> {
    const before = sim.requests;
    const result = await run();
    return [result, sim.requests - before];
  }

  /** Upstream calls one failing model costs: one per provider that serves it (the built-in catalog may list several). */
  const routes = (model: string) => gw.runtime.catalog.get(model)!.providers.length;

  async function holdPlaced(holdId: string) {
    const events = await gw.runtime.store.readStream(accountStream(gw.keys.account_id));
    return events.find((e) => e.type === 'HoldPlaced' && (e.data as { hold_id: string }).hold_id === holdId)?.data as { amount_nano: string };
  }

  it('answers from the fallback when the primary is down, names it, and bills its prices', async () => {
    const before = await credits();
    const messages = user('Hello\n#sim {"fail_models": {"sim/echo": 503}}');
    const [{ data: completion }, calls] = await upstreamCalls(() => chat({ model: 'sim/echo', models: ['sim/small-8k'], messages }));
    expect(calls).toBe(routes('sim/echo') + 1);
    expect(completion.model).toBe('sim/small-8k');
    expect(completion.choices[0].message.content).toBe('Echo: Hello');

    const usage = completion.usage!;
    const expected = BigInt(usage.prompt_tokens) * PRICES['sim/small-8k'].input + BigInt(usage.completion_tokens) * PRICES['sim/small-8k'].output;
    expect(usdToNano((usage as unknown as { cost: number }).cost)).toBe(expected);
    expect(await spentSince(before)).toBe(expected);
    expect(await generation(completion.id)).toMatchObject({ model: 'sim/small-8k', status: 'completed' });
  });

  it('holds the worst case of the dearest model of the chain, even when it is a fallback, and charges once', async () => {
    const before = await credits();
    const messages = user('Hi\n#sim {"fail_models": {"sim/small-8k": 503}}');
    const { data: completion } = await chat({ model: 'sim/small-8k', models: ['sim/echo'], messages, max_tokens: 100 });
    expect(completion.model).toBe('sim/echo');

    const prompt = BigInt(countChatPromptTokens(messages));
    // At least sim/echo's worst case (a provider of it may charge more), far above sim/small-8k's.
    expect(BigInt((await holdPlaced(completion.id)).amount_nano)).toBeGreaterThanOrEqual(prompt * PRICES['sim/echo'].input + 100n * PRICES['sim/echo'].output);
    const expected = prompt * PRICES['sim/echo'].input + BigInt(countTextTokens('Echo: Hi')) * PRICES['sim/echo'].output;
    expect(await spentSince(before)).toBe(expected);
    const events = await gw.runtime.store.readStream(accountStream(gw.keys.account_id));
    expect(events.filter((e) => (e.data as { hold_id?: string }).hold_id === completion.id).map((e) => e.type)).toEqual(['HoldPlaced', 'UsageCharged']);
  });

  it('tries the fallbacks in the order given', async () => {
    const messages = user('Third time\n#sim {"fail_models": {"sim/echo": 503, "sim/small-8k": 429}}');
    const [{ data: completion }, calls] = await upstreamCalls(() => chat({ model: 'sim/echo', models: ['sim/small-8k', 'test/two-routes'], messages }));
    expect(calls).toBe(routes('sim/echo') + routes('sim/small-8k') + 1);
    expect(completion.model).toBe('test/two-routes');
  });

  it("tries a model's other providers in catalog order before its fallback models", async () => {
    const messages = user('Route me\n#sim {"fail_models": {"sim/first-route": 502}}');
    const [{ data: completion }, calls] = await upstreamCalls(() => chat({ model: 'test/two-routes', models: ['sim/small-8k'], messages }));
    expect(calls).toBe(2);
    expect(completion.model).toBe('test/two-routes');
    expect(await generation(completion.id)).toMatchObject({ model: 'test/two-routes', provider: 'test-backup' });
    // Spec 4.2 rule 10: billed at the answering provider's prices ($3 / $12 per M), not the model's.
    const usage = completion.usage!;
    expect(usdToNano((usage as unknown as { cost: number }).cost)).toBe(BigInt(usage.prompt_tokens) * 3000n + BigInt(usage.completion_tokens) * 12000n);
    // Issue 23: the lines show the answering provider's prices, and its own cost is recorded.
    expect(costLinesOf(await generation(completion.id))).toEqual([
      ['input', usage.prompt_tokens, 0.000003, BigInt(usage.prompt_tokens) * 3000n],
      ['output', usage.completion_tokens, 0.000012, BigInt(usage.completion_tokens) * 12000n],
    ]);
    const charged = await chargeEventOf(gw.runtime, gw.keys.account_id, completion.id);
    expect(charged.provider_cost_nano).toBe(String(BigInt(usage.prompt_tokens) * 2100n + BigInt(usage.completion_tokens) * 8400n));
  });

  it('does not retry a request the provider refused (400): the fallback is never called, nothing is billed', async () => {
    const before = await credits();
    const messages = user('Bad\n#sim {"fail_models": {"sim/echo": 400}}');
    const [error, calls] = await upstreamCalls(() => failure(chat({ model: 'sim/echo', models: ['sim/small-8k'], messages })));
    expect(calls).toBe(1);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error!.error).toMatchObject({ type: 'invalid_request_error', code: 'upstream_rejected' });
    expect(await spentSince(before)).toBe(0n);
    expect(await credits()).toMatchObject({ held: 0, open_holds: 0 });
  });

  it('answers 502 api_error when every model fails, and bills nothing (spec 7)', async () => {
    const before = await credits();
    const [error, calls] = await upstreamCalls(() => failure(chat({ model: 'sim/echo', models: ['sim/small-8k'], messages: user('#sim {"fail": 503}') })));
    expect(calls).toBe(routes('sim/echo') + routes('sim/small-8k'));
    expect(error!.status).toBe(502);
    expect(error!.error).toMatchObject({ type: 'api_error', code: 'upstream_error' });
    expect(error!.message).toMatch(/sim\/echo.*sim\/small-8k/);
    expect(await spentSince(before)).toBe(0n);
    expect(await credits()).toMatchObject({ held: 0, open_holds: 0 });
    const [last] = await gw.runtime.store.readStream(accountStream(gw.keys.account_id), { direction: 'backwards', maxCount: 1 });
    expect(last).toMatchObject({ type: 'HoldReleased', data: { reason: 'error', model: 'sim/small-8k' } });
  });

  it('answers 504 api_error when the last model timed out', async () => {
    const messages = user(`#sim {"delay_ms": ${UPSTREAM_TIMEOUT_MS + 500}}`);
    const error = await failure(chat({ model: 'sim/echo', models: ['sim/small-8k'], messages }));
    expect(error!.status).toBe(504);
    expect(error!.error).toMatchObject({ type: 'api_error', code: 'upstream_timeout' });
    expect(await credits()).toMatchObject({ held: 0, open_holds: 0 });
  });

  it('keeps the upstream status when a request without fallbacks fails (503 model unavailable)', async () => {
    const error = await failure(chat({ model: 'sim/echo', messages: user('#sim {"fail": 503}') }));
    expect(error!.status).toBe(503);
    expect(error!.error).toMatchObject({ type: 'service_unavailable' });
  });

  it.each([
    ['more than 2 fallbacks', { models: ['sim/small-8k', 'test/two-routes', 'sim/echo'] }, 400, 'models', /at most 2/],
    ['an unknown fallback', { models: ['sim/small-8k', 'sim/nope'] }, 404, 'models[1]', /sim\/nope/],
    ['a fallback that is not a chat model', { models: ['sim/embed'] }, 400, 'models[0]', /sim\/embed/],
    ['models that is not a list of ids', { models: 'sim/small-8k' }, 400, 'models', /array of model ids/],
  ])('refuses %s before calling anything', async (_what, extra, status, param, message) => {
    const before = await credits();
    const [r, calls] = await upstreamCalls(() =>
      call('POST', '/chat/completions', { key: gw.keys.api_key, body: { model: 'sim/echo', messages: user('hi'), ...extra } }),
    );
    expect(calls).toBe(0);
    expect(r.status).toBe(status);
    expect(r.json.error).toMatchObject({ param, message: expect.stringMatching(message) });
    expect(await credits()).toEqual(before);
  });

  describe('streamed', () => {
    const stream = (body: Omit<StreamParams, 'stream'>) => client.chat.completions.create({ ...body, stream: true } as StreamParams);

    it('falls back before the first byte, and the stream names the fallback and costs its prices', async () => {
      const before = await credits();
      const messages = user('Flow\n#sim {"fail_models": {"sim/echo": 503}}');
      const [chunks, calls] = await upstreamCalls(async () => {
        const received: OpenAI.ChatCompletionChunk[] = [];
        for await (const chunk of await stream({ model: 'sim/echo', models: ['sim/small-8k'], messages, stream_options: { include_usage: true } }))
          received.push(chunk);
        return received;
      });
      expect(calls).toBe(routes('sim/echo') + 1);
      expect(chunks.every((c) => c.model === 'sim/small-8k')).toBe(true);
      const usage = chunks[chunks.length - 1].usage!;
      const expected = BigInt(usage.prompt_tokens) * PRICES['sim/small-8k'].input + BigInt(usage.completion_tokens) * PRICES['sim/small-8k'].output;
      expect(usdToNano((usage as unknown as { cost: number }).cost)).toBe(expected);
      expect(await spentSince(before)).toBe(expected);
    });

    it('falls back when the upstream dies before its first output, as nothing reached the client yet', async () => {
      const [error, calls] = await upstreamCalls(() =>
        failure(stream({ model: 'sim/echo', models: ['sim/small-8k'], messages: user('x\n#sim {"cut_after_chunks": 0}') })),
      );
      expect(calls).toBe(routes('sim/echo') + routes('sim/small-8k'));
      expect(error!.status).toBe(502);
    });

    it('does not fall back once output was sent: a cut after it is an error event', async () => {
      const [result, calls] = await upstreamCalls(async () => {
        let text = '';
        const error = await failure(
          (async () => {
            for await (const chunk of await stream({ model: 'sim/echo', models: ['sim/small-8k'], messages: user('a b c d\n#sim {"cut_after_chunks": 2}') })) {
              text += chunk.choices[0]?.delta.content ?? '';
            }
          })(),
        );
        return { text, error };
      });
      expect(calls).toBe(1);
      expect(result.text).toBe('Echo: a ');
      expect(result.error).toBeInstanceOf(OpenAI.APIError);
    });
  });
});
