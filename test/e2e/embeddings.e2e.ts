import OpenAI from 'openai';
import { usdToNano } from '@svc/platform';
import { countTextTokens } from '@svc/providers';
import { startWithClient, stopGateway, type Call, type StartedGateway } from '../support/gateway';

// sim/embed in the built-in catalog: $0.02 per million input tokens = 20 nano-USD per token.
const NANO_PER_TOKEN = 20n;

describe('POST /v1/embeddings (issue 7; spec 1 billing, 4.7, 8)', () => {
  let gw: StartedGateway;
  let client: OpenAI;
  let call: Call;

  beforeAll(async () => void ({ gw, client, call } = await startWithClient()), 60_000);
  afterAll(() => stopGateway(gw));

  const balance = async () => usdToNano((await call('GET', '/credits', { key: gw.keys.api_key })).json.data.balance);
  const generation = async (id: string) => (await call('GET', `/generation?id=${id}`, { key: gw.keys.api_key })).json.data;
  type Costed = OpenAI.CreateEmbeddingResponse & { id: string; usage: { cost: number } };

  it('embeds a string as floats of the requested dimension, billed on its input tokens (SDK)', async () => {
    const before = await balance();
    const { data, response } = await client.embeddings
      .create({ model: 'sim/embed', input: 'the quick brown fox', dimensions: 16, encoding_format: 'float' })
      .withResponse();
    const answer = data as Costed;
    expect(answer.data).toHaveLength(1);
    expect(answer.data[0].embedding).toHaveLength(16);
    expect(answer.data[0].embedding.every((v) => typeof v === 'number')).toBe(true);
    const tokens = countTextTokens('the quick brown fox');
    expect(answer.usage).toMatchObject({ prompt_tokens: tokens, total_tokens: tokens });
    expect(usdToNano(answer.usage.cost)).toBe(BigInt(tokens) * NANO_PER_TOKEN);
    expect(response.headers.get('x-svc-generation-id')).toBe(answer.id);
    expect(before - (await balance())).toBe(BigInt(tokens) * NANO_PER_TOKEN);

    const record = await generation(answer.id);
    expect(record).toMatchObject({ model: 'sim/embed', endpoint: '/v1/embeddings', tokens_prompt: tokens, tokens_completion: 0 });
    expect(usdToNano(record.total_cost)).toBe(usdToNano(answer.usage.cost));
  });

  it('base64 gives the same vectors, packed (the SDK decodes them; raw they are strings)', async () => {
    const input = ['alpha', 'beta'];
    const floats = await client.embeddings.create({ model: 'sim/embed', input, encoding_format: 'float' });
    // Without encoding_format the SDK asks for base64 and decodes it itself.
    const decoded = await client.embeddings.create({ model: 'sim/embed', input });
    decoded.data.forEach((d, i) => d.embedding.forEach((v, j) => expect(v).toBeCloseTo(floats.data[i].embedding[j], 6)));
    const raw = await call('POST', '/embeddings', { key: gw.keys.api_key, body: { model: 'sim/embed', input, encoding_format: 'base64' } });
    expect(raw.status).toBe(200);
    expect(typeof raw.json.data[0].embedding).toBe('string');
    expect(Buffer.from(raw.json.data[0].embedding, 'base64').length).toBe(4 * floats.data[0].embedding.length);
  });

  it('takes token arrays, billed by their length', async () => {
    const r = await call('POST', '/embeddings', {
      key: gw.keys.api_key,
      body: {
        model: 'sim/embed',
        input: [
          [1, 2, 3],
          [4, 5],
        ],
        encoding_format: 'float',
      },
    });
    expect(r.status).toBe(200);
    expect(r.json.data).toHaveLength(2);
    expect(r.json.usage.prompt_tokens).toBe(5);
    expect(usdToNano(r.json.usage.cost)).toBe(5n * NANO_PER_TOKEN);
  });

  it('refuses 2,049 inputs with a 400 naming input, and bills nothing (SDK)', async () => {
    const before = await balance();
    const error = await client.embeddings.create({ model: 'sim/embed', input: Array.from({ length: 2049 }, (_, i) => `item ${i}`) }).then(
      () => null,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error!.error).toMatchObject({ type: 'invalid_request_error', param: 'input' });
    expect(await balance()).toBe(before);
    // 2,048 is the limit itself.
    const ok = await client.embeddings.create({ model: 'sim/embed', input: Array.from({ length: 2048 }, (_, i) => `item ${i}`), encoding_format: 'float' });
    expect(ok.data).toHaveLength(2048);
  });

  it.each([
    [{ model: 'sim/embed' }, 'input'],
    [{ model: 'sim/embed', input: ['ok', ''] }, 'input[1]'],
    [{ model: 'sim/embed', input: [[1, -2]] }, 'input[0]'],
    [{ model: 'sim/embed', input: 'x', encoding_format: 'hex' }, 'encoding_format'],
    [{ model: 'sim/embed', input: 'x', dimensions: 0 }, 'dimensions'],
    [{ input: 'x' }, 'model'],
  ])('refuses %j naming %s', async (body, param) => {
    const r = await call('POST', '/embeddings', { key: gw.keys.api_key, body });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param });
  });

  // Issue 15.5: a model that exists on the wrong endpoint is a 400 naming `model`, not "does not exist".
  it('a chat model is not an embedding model, and the other way round: 400 saying which endpoint takes it, nothing billed', async () => {
    const before = await balance();
    const r = await call('POST', '/embeddings', { key: gw.keys.api_key, body: { model: 'sim/echo', input: 'x' } });
    expect([r.status, r.json.error.type, r.json.error.code, r.json.error.param]).toEqual([400, 'invalid_request_error', 'model_type_mismatch', 'model']);
    expect(r.json.error.message).toContain('/v1/chat/completions');
    const chat = await call('POST', '/chat/completions', { key: gw.keys.api_key, body: { model: 'sim/embed', messages: [{ role: 'user', content: 'x' }] } });
    expect([chat.status, chat.json.error.code, chat.json.error.param]).toEqual([400, 'model_type_mismatch', 'model']);
    expect(chat.json.error.message).toContain('/v1/embeddings');
    // A key that may not use the model still cannot tell it exists.
    expect(await balance()).toBe(before);
  });

  it('an upstream failure is not billed', async () => {
    const before = await balance();
    const r = await call('POST', '/embeddings', { key: gw.keys.api_key, body: { model: 'sim/embed', input: 'x\n#sim {"fail": 503}' } });
    // Its only provider answered 503: the model is unavailable (spec 7).
    expect(r.status).toBe(503);
    expect(r.json.error.type).toBe('service_unavailable');
    expect(await balance()).toBe(before);
  });

  it('replays with Idempotency-Key, billed once', async () => {
    const headers = { 'idempotency-key': `emb-${Date.now()}` };
    const body = { model: 'sim/embed', input: 'once', encoding_format: 'float' };
    const first = await call('POST', '/embeddings', { key: gw.keys.api_key, body, headers });
    const before = await balance();
    const again = await call('POST', '/embeddings', { key: gw.keys.api_key, body, headers });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.json).toEqual(first.json);
    expect(await balance()).toBe(before);
  });
});
