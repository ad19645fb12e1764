import OpenAI from 'openai';
import { usdToNano } from '@svc/platform';
import { chargeEventOf, costLinesOf } from '../support/cost-lines';
import { api, startGateway, startWithClient, stopGateway, type StartedGateway, type Call } from '../support/gateway';

// The built-in catalog's sim/echo prices: $2 / M input, $8 / M output (nano-USD per token).
const INPUT_NANO_PER_TOKEN = 2000n;
const OUTPUT_NANO_PER_TOKEN = 8000n;

describe('a billed chat completion end to end, with the official openai SDK (issue: foundation)', () => {
  let gw: StartedGateway;
  let client: OpenAI;
  let call: Call;

  beforeAll(async () => void ({ gw, client, call } = await startWithClient()), 60_000);
  afterAll(() => stopGateway(gw));

  const credits = async () => {
    const r = await call('GET', '/credits', { key: gw.keys.api_key });
    expect(r.status).toBe(200);
    return r.json.data as { balance: number; total_credits: number; total_usage: number; held: number; open_holds: number; available: number };
  };

  it('starts with a dev account holding $10.00', async () => {
    expect(gw.created).toBe(true);
    expect(gw.keys.api_key).toMatch(/^svc_test_/);
    expect(gw.keys.management_key).toMatch(/^svc_test_/);
    const c = await credits();
    expect(c.total_credits).toBe(10);
    expect(c.available).toBeLessThanOrEqual(10);
  });

  it('answers from the simulated upstream and bills exactly usage.cost (spec 1, rules 1-2)', async () => {
    const before = await credits();
    const { data: completion, response } = await client.chat.completions
      .create({ model: 'sim/echo', messages: [{ role: 'user', content: 'Hello, gateway' }], max_tokens: 64 })
      .withResponse();

    expect(completion.choices[0].message.content).toBe('Echo: Hello, gateway');
    expect(completion.model).toBe('sim/echo');
    expect(completion.id).toMatch(/^gen-/);
    expect(response.headers.get('x-svc-generation-id')).toBe(completion.id);

    const usage = completion.usage as OpenAI.CompletionUsage & { cost: number };
    expect(usage.prompt_tokens).toBeGreaterThan(0);
    expect(usage.completion_tokens).toBeGreaterThan(0);
    const expectedNano = BigInt(usage.prompt_tokens) * INPUT_NANO_PER_TOKEN + BigInt(usage.completion_tokens) * OUTPUT_NANO_PER_TOKEN;
    expect(usdToNano(usage.cost)).toBe(expectedNano);

    const after = await credits();
    expect(usdToNano(before.balance) - usdToNano(after.balance)).toBe(expectedNano);
    expect(after.held).toBe(0);
    expect(after.open_holds).toBe(0);

    const generation = await call('GET', `/generation?id=${completion.id}`, { key: gw.keys.api_key });
    expect(generation.status).toBe(200);
    expect(generation.json.data).toMatchObject({
      id: completion.id,
      model: 'sim/echo',
      provider: 'sim',
      status: 'completed',
      tokens_prompt: usage.prompt_tokens,
      tokens_completion: usage.completion_tokens,
      total_cost: usage.cost,
    });
    expect(generation.json.data.latency_ms).toEqual(expect.any(Number));

    // Issue 23: each meter at its unit price, adding up to the charge; the provider's cost is recorded, never shown.
    expect(costLinesOf(generation.json.data)).toEqual([
      ['input', usage.prompt_tokens, 0.000002, BigInt(usage.prompt_tokens) * INPUT_NANO_PER_TOKEN],
      ['output', usage.completion_tokens, 0.000008, BigInt(usage.completion_tokens) * OUTPUT_NANO_PER_TOKEN],
    ]);
    expect(generation.json.data).toMatchObject({ byok: false, batch: false });
    expect(JSON.stringify(generation.json.data)).not.toContain('provider_cost');
    // The sim route's catalog cost: $1.40 / M input, $5.60 / M output.
    const charged = await chargeEventOf(gw.runtime, gw.keys.account_id, completion.id);
    expect(charged.provider_cost_nano).toBe(String(BigInt(usage.prompt_tokens) * 1400n + BigInt(usage.completion_tokens) * 5600n));
  });

  it('bills cached and reasoning tokens at their prices (spec 1, rule 5)', async () => {
    const before = await credits();
    const completion = await client.chat.completions.create({
      model: 'sim/echo',
      messages: [{ role: 'user', content: 'Think about caching\n#sim {"cached_tokens": 8, "reasoning_tokens": 10}' }],
    });
    const usage = completion.usage!;
    expect(usage.prompt_tokens_details?.cached_tokens).toBe(8);
    expect(usage.completion_tokens_details?.reasoning_tokens).toBe(10);
    // Cached input at $0.50 / M (500 nano per token); reasoning is inside completion tokens.
    const expectedNano = BigInt(usage.prompt_tokens - 8) * INPUT_NANO_PER_TOKEN + 8n * 500n + BigInt(usage.completion_tokens) * OUTPUT_NANO_PER_TOKEN;
    expect(usdToNano((usage as unknown as { cost: number }).cost)).toBe(expectedNano);
    expect(usdToNano(before.balance) - usdToNano((await credits()).balance)).toBe(expectedNano);

    // Issue 23: the cached input on its own line, at its own price; `input` is the rest.
    const generation = (await call('GET', `/generation?id=${completion.id}`, { key: gw.keys.api_key })).json.data;
    expect(costLinesOf(generation)).toEqual([
      ['input', usage.prompt_tokens - 8, 0.000002, BigInt(usage.prompt_tokens - 8) * INPUT_NANO_PER_TOKEN],
      ['cached_input', 8, 0.0000005, 4000n],
      ['output', usage.completion_tokens, 0.000008, BigInt(usage.completion_tokens) * OUTPUT_NANO_PER_TOKEN],
    ]);
  });

  it('issue 23: explains an embeddings charge; a model without a catalog cost records its provider cost as unknown', async () => {
    const { data, response } = await client.embeddings.create({ model: 'sim/embed', input: ['one two three', 'four'] }).withResponse();
    const id = response.headers.get('x-svc-generation-id')!;
    const generation = (await call('GET', `/generation?id=${id}`, { key: gw.keys.api_key })).json.data;
    // sim/embed: $0.02 / M input.
    expect(costLinesOf(generation)).toEqual([['input', data.usage.prompt_tokens, 0.00000002, BigInt(data.usage.prompt_tokens) * 20n]]);
    const charged = await chargeEventOf(gw.runtime, gw.keys.account_id, id);
    expect(charged).not.toHaveProperty('provider_cost_nano');
    expect(charged.lines).toEqual([
      { meter: 'input', quantity: data.usage.prompt_tokens, unit_price_usd: '0.00000002', amount_nano: String(data.usage.prompt_tokens * 20) },
    ]);
  });

  it('does not bill a request the upstream fails (spec 1, rule 3)', async () => {
    const before = await credits();
    const err = await client.chat.completions
      .create({ model: 'sim/echo', messages: [{ role: 'user', content: 'Fail please\n#sim {"fail": 503}' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    expect((err as InstanceType<typeof OpenAI.APIError>).type).toBe('service_unavailable');
    const after = await credits();
    expect(after.balance).toBe(before.balance);
    expect(after.held).toBe(0);
    expect(after.open_holds).toBe(0);
  });

  it('does not bill a completion with zero tokens (spec 1, rule 3)', async () => {
    const before = await credits();
    const completion = await client.chat.completions.create({
      model: 'sim/echo',
      messages: [{ role: 'user', content: 'Say nothing\n#sim {"completion_tokens": 0}' }],
    });
    expect(completion.usage?.completion_tokens).toBe(0);
    expect((completion.usage as unknown as { cost: number }).cost).toBe(0);
    expect((await credits()).balance).toBe(before.balance);
    const generation = await call('GET', `/generation?id=${completion.id}`, { key: gw.keys.api_key });
    expect(generation.json.data).toMatchObject({ status: 'not_billed', total_cost: 0 });
  });

  it('refuses with 402 when the worst case exceeds the balance, and changes nothing (spec 1, rule 1)', async () => {
    const before = await credits();
    // 2,000,000 output tokens at $8 / M is $16, more than the $10 balance.
    const err = await client.chat.completions
      .create({ model: 'sim/echo', messages: [{ role: 'user', content: 'Write a novel' }], max_tokens: 2_000_000 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    const apiError = err as InstanceType<typeof OpenAI.APIError>;
    expect(apiError.status).toBe(402);
    expect(apiError.error).toMatchObject({ type: 'insufficient_quota', code: 'insufficient_quota' });
    expect(await credits()).toEqual(before);
  });

  it('answers 401 authentication_error for a missing or unknown key (spec 5.5)', async () => {
    const missing = await call('POST', '/chat/completions', { body: { model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }] } });
    expect(missing.status).toBe(401);
    expect(missing.json.error).toMatchObject({ type: 'authentication_error', code: 'missing_api_key' });

    const unknown = new OpenAI({ baseURL: gw.url, apiKey: `svc_test_${'x'.repeat(40)}`, maxRetries: 0 });
    const err = await unknown.chat.completions.create({ model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
  });

  it('accepts the key in x-api-key too (spec 5.1)', async () => {
    const r = await call('GET', '/credits', { headers: { 'x-api-key': gw.keys.api_key } });
    expect(r.status).toBe(200);
  });

  it('answers 403 when a management key calls a model (spec 5.6)', async () => {
    const r = await call('POST', '/chat/completions', {
      key: gw.keys.management_key,
      body: { model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(r.status).toBe(403);
    expect(r.json.error.type).toBe('permission_error');
  });

  it.each([
    ['an unknown model', { model: 'sim/nope', messages: [{ role: 'user', content: 'hi' }] }, 404, 'not_found_error', 'model_not_found', 'model', /sim\/nope/],
    ['n other than 1', { model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }], n: 2 }, 400, 'invalid_request_error', null, 'n', /'n' must be 1/],
    ['no messages', { model: 'sim/echo' }, 400, 'invalid_request_error', null, 'messages', /messages/],
    [
      'a bad role',
      { model: 'sim/echo', messages: [{ role: 'wizard', content: 'hi' }] },
      400,
      'invalid_request_error',
      null,
      'messages[0].role',
      /'messages\[0\].role' must be one of/,
    ],
    [
      'a non-integer max_tokens',
      { model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }], max_tokens: 'lots' },
      400,
      'invalid_request_error',
      null,
      'max_tokens',
      /'max_tokens' must be an integer/,
    ],
  ])('rejects %s with the error object naming the field, and bills nothing', async (_what, body, status, type, code, param, message) => {
    const before = await credits();
    const r = await call('POST', '/chat/completions', { key: gw.keys.api_key, body });
    expect(r.status).toBe(status);
    expect(r.json).toEqual({ error: { message: expect.stringMatching(message), type, code, param } });
    expect(await credits()).toEqual(before);
  });

  it('answers malformed JSON and unknown routes with the error object (spec 2.1)', async () => {
    const bad = await call('POST', '/chat/completions', { key: gw.keys.api_key, body: '{"model": ', headers: { 'content-type': 'application/json' } });
    expect(bad.status).toBe(400);
    expect(bad.json.error.type).toBe('invalid_request_error');

    const unknown = await call('GET', '/nowhere', { key: gw.keys.api_key });
    expect(unknown.status).toBe(404);
    expect(unknown.json).toEqual({ error: { message: expect.stringContaining('/v1/nowhere'), type: 'not_found_error', code: 'route_not_found', param: null } });
  });

  it('refuses a body over 10 MB with 413 and the error object (spec 8)', async () => {
    const before = await credits();
    const huge = JSON.stringify({ model: 'sim/echo', messages: [{ role: 'user', content: 'x'.repeat(10 * 1024 * 1024) }] });
    const r = await call('POST', '/chat/completions', { key: gw.keys.api_key, body: huge });
    expect(r.status).toBe(413);
    expect(r.json.error).toMatchObject({ type: 'invalid_request_error', code: 'request_too_large' });
    expect(await credits()).toEqual(before);
  });

  it("hides other accounts' generations and asks for the id", async () => {
    expect((await call('GET', '/generation?id=gen-doesnotexist', { key: gw.keys.api_key })).status).toBe(404);
    const missing = await call('GET', '/generation', { key: gw.keys.api_key });
    expect(missing.status).toBe(400);
    expect(missing.json.error.param).toBe('id');
  });

  it('keeps the account and keys across a restart on the same data directory', async () => {
    const before = await credits();
    const keys = gw.keys;
    const dataDir = gw.dataDir;
    await gw.close();
    gw = await startGateway({}, dataDir);
    call = api(gw.url);
    expect(gw.created).toBe(false);
    expect(gw.keys).toEqual(keys);
    expect(await credits()).toEqual(before);
  }, 60_000);
});
