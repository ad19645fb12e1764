import OpenAI from 'openai';
import { STORED_RESPONSE_RETENTION_MS } from '@svc/conversations';
import { ManualClock } from '@svc/platform';
import { api, freshPgSchemaUrl, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { accountWithKey, creditsOf, expectBilled, rawStream, rejectionOf } from '../support/interfaces';

const ENDPOINT = '/v1/responses';
const DAY_MS = 24 * 60 * 60 * 1000;

type Costed = { usage: { cost: number } };
const costOf = (response: OpenAI.Responses.Response) => (response as unknown as Costed).usage.cost;
const errorOf = (promise: Promise<unknown>) => rejectionOf(promise, OpenAI.APIError);
const userTexts = (messages: Array<{ role: string; content: unknown }>) => messages.map((m) => [m.role, m.content]);

/**
 * Issue 7, spec 4.5, 3.3 and 8: the Responses interface through the chat pipeline, with stored
 * conversations (encrypted rows, 30 days, per workspace), driven by the official openai SDK.
 */
describe('POST /v1/responses and stored responses with the official openai SDK', () => {
  let gw: StartedGateway;
  let call: Call;
  let client: OpenAI;
  let key: string;

  beforeAll(async () => {
    gw = await startGateway();
    call = api(gw.url);
    key = gw.keys.api_key;
    client = new OpenAI({ baseURL: gw.url, apiKey: key, maxRetries: 0 });
  }, 60_000);
  afterAll(() => stopGateway(gw));

  const received = () => gw.runtime.simulator!.received as Array<{ messages: Array<{ role: string; content: unknown }> } & Record<string, unknown>>;

  it('answers, bills exactly usage.cost, and keeps the response retrievable at once', async () => {
    const before = await creditsOf(call, key);
    const { data: response, response: http } = await client.responses
      .create({ model: 'sim/echo', instructions: 'Be kind.', input: 'My name is Ada.', max_output_tokens: 64 })
      .withResponse();

    expect(response).toMatchObject({
      object: 'response',
      status: 'completed',
      model: 'sim/echo',
      store: true,
      previous_response_id: null,
      instructions: 'Be kind.',
      max_output_tokens: 64,
      output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Echo: My name is Ada.' }] }],
    });
    expect(response.output_text).toBe('Echo: My name is Ada.');
    const generationId = http.headers.get('x-svc-generation-id')!;
    expect(generationId).toMatch(/^gen-/);
    expect(response.id).toBe(generationId.replace(/^gen-/, 'resp_'));
    expect(response.usage).toMatchObject({ input_tokens: expect.any(Number), output_tokens: expect.any(Number) });
    await expectBilled(call, key, generationId, costOf(response), ENDPOINT, before);

    expect(await client.responses.retrieve(response.id)).toEqual(response);
    const items = await client.responses.inputItems.list(response.id);
    expect(items.data).toEqual([
      { type: 'message', id: expect.stringMatching(/^msg_/), status: 'completed', role: 'user', content: [{ type: 'input_text', text: 'My name is Ada.' }] },
    ]);
  });

  it('continues a stored conversation with previous_response_id, turn after turn', async () => {
    const first = await client.responses.create({ model: 'sim/echo', instructions: 'Only for the first turn.', input: 'My name is Ada.' });
    const before = await creditsOf(call, key);
    const { data: second, response: http } = await client.responses
      .create({ model: 'sim/echo', input: 'What is my name?', previous_response_id: first.id })
      .withResponse();
    expect(second.previous_response_id).toBe(first.id);
    expect(second.output_text).toBe('Echo: What is my name?');
    await expectBilled(call, key, http.headers.get('x-svc-generation-id')!, costOf(second), ENDPOINT, before);
    // Upstream: the first turn (its input, then its output; not its instructions), then the new input.
    expect(userTexts(received().at(-1)!.messages)).toEqual([
      ['user', 'My name is Ada.'],
      ['assistant', 'Echo: My name is Ada.'],
      ['user', 'What is my name?'],
    ]);

    const third = await client.responses.create({ model: 'sim/echo', instructions: 'Answer in French.', input: 'And again?', previous_response_id: second.id });
    expect(userTexts(received().at(-1)!.messages)).toEqual([
      ['system', 'Answer in French.'],
      ['user', 'My name is Ada.'],
      ['assistant', 'Echo: My name is Ada.'],
      ['user', 'What is my name?'],
      ['assistant', 'Echo: What is my name?'],
      ['user', 'And again?'],
    ]);

    // The input items of the third: everything the model was given but the instructions, newest first by default.
    const texts = (items: OpenAI.Responses.ResponseItem[]) =>
      items.map((i) => (i as OpenAI.Responses.ResponseInputMessageItem).content.map((c) => (c as { text: string }).text).join(''));
    const newestFirst = await client.responses.inputItems.list(third.id);
    expect(newestFirst).toMatchObject({ has_more: false });
    expect(texts(newestFirst.data)).toEqual(['And again?', 'Echo: What is my name?', 'What is my name?', 'Echo: My name is Ada.', 'My name is Ada.']);
    const raw = await call('GET', `/responses/${third.id}/input_items?order=asc`, { key });
    expect(raw.status).toBe(200);
    expect(raw.json).toMatchObject({ object: 'list', has_more: false, first_id: raw.json.data[0].id, last_id: raw.json.data[4].id });
    expect(texts(raw.json.data)).toEqual(['My name is Ada.', 'Echo: My name is Ada.', 'What is my name?', 'Echo: What is my name?', 'And again?']);
    // The items of the earlier turns keep their ids: the first response's output is the second item.
    expect(raw.json.data[1].id).toBe(first.output[0].id);

    // Pages of two, through `after`, as the SDK follows them.
    const page = await client.responses.inputItems.list(third.id, { limit: 2, order: 'asc' });
    expect(page).toMatchObject({ has_more: true });
    expect(texts(page.data)).toEqual(['My name is Ada.', 'Echo: My name is Ada.']);
    const all: OpenAI.Responses.ResponseItem[] = [];
    for await (const item of client.responses.inputItems.list(third.id, { limit: 2, order: 'asc' })) all.push(item);
    expect(all).toEqual(raw.json.data);
    const after = await call('GET', `/responses/${third.id}/input_items?limit=2&after=${raw.json.data[3].id}&order=asc`, { key });
    expect(after.json).toMatchObject({ has_more: false, data: [raw.json.data[4]] });
    const bad = await call('GET', `/responses/${third.id}/input_items?limit=500`, { key });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ type: 'invalid_request_error', param: 'limit' });
  });

  it('continues after a tool call with the function output', async () => {
    const tools: OpenAI.Responses.Tool[] = [
      { type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false },
    ];
    const first = await client.responses.create({
      model: 'sim/echo',
      tools,
      input: 'Weather in Paris?\n#sim {"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}',
    });
    const fc = first.output.find((i): i is OpenAI.Responses.ResponseFunctionToolCall => i.type === 'function_call')!;
    expect(fc).toMatchObject({ name: 'get_weather', arguments: '{"city":"Paris"}', status: 'completed' });

    const second = await client.responses.create({
      model: 'sim/echo',
      tools,
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: fc.call_id, output: 'Sunny, 21 C' }],
    });
    expect(second.status).toBe('completed');
    const upstream = received().at(-1)!.messages;
    expect(upstream.slice(1)).toEqual([
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: fc.call_id, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
      },
      { role: 'tool', tool_call_id: fc.call_id, content: 'Sunny, 21 C' },
    ]);
  });

  it('streams the events in order; response.completed carries usage and cost, and is stored when the stream ends', async () => {
    const before = await creditsOf(call, key);
    const { data: stream, response: http } = await client.responses.create({ model: 'sim/echo', input: 'Stream me', stream: true }).withResponse();
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);

    const deltas = events.filter((e) => e.type === 'response.output_text.delta');
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      ...deltas.map(() => 'response.output_text.delta'),
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(deltas.map((d) => (d as OpenAI.Responses.ResponseTextDeltaEvent).delta).join('')).toBe('Echo: Stream me');
    const completed = (events.at(-1) as OpenAI.Responses.ResponseCompletedEvent).response;
    expect(completed).toMatchObject({ status: 'completed', store: true, usage: { input_tokens: expect.any(Number), output_tokens: expect.any(Number) } });
    const generationId = http.headers.get('x-svc-generation-id')!;
    expect(completed.id).toBe(generationId.replace(/^gen-/, 'resp_'));
    await expectBilled(call, key, generationId, costOf(completed), ENDPOINT, before);

    // Kept before the stream ended: retrievable right away, equal to what the stream finished with.
    const { output_text: _text, ...stored } = await client.responses.retrieve(completed.id);
    expect(stored).toEqual(completed);
    const next = await client.responses.create({ model: 'sim/echo', input: 'Next', previous_response_id: completed.id });
    expect(next.status).toBe('completed');
    expect(userTexts(received().at(-1)!.messages)).toEqual([
      ['user', 'Stream me'],
      ['assistant', 'Echo: Stream me'],
      ['user', 'Next'],
    ]);
  });

  it('the SDK stream helper assembles the same final response', async () => {
    const final = await client.responses.stream({ model: 'sim/echo', input: 'Helper' }).finalResponse();
    expect(final.output_text).toBe('Echo: Helper');
    // The helper adds its parsing fields (output_parsed, parsed) to what the stream carried.
    expect(final).toMatchObject(await client.responses.retrieve(final.id));
  });

  it('a stream with store: false is not kept', async () => {
    const { frames } = await rawStream(gw.url, '/responses', key, { model: 'sim/echo', input: 'Forget me', stream: true, store: false });
    const completed = frames.at(-1)!.data.response;
    expect(completed).toMatchObject({ status: 'completed', store: false });
    expect((await errorOf(client.responses.retrieve(completed.id))).status).toBe(404);
  });

  it('a response cache hit answers under the stored response id, billing nothing and storing nothing new', async () => {
    const body = { model: 'sim/echo', input: 'Cache this response' };
    const headers = { 'x-svc-cache': 'true' };
    const first = await call('POST', '/responses', { key, body, headers });
    expect(first.headers.get('x-svc-cache-status')).toBe('MISS');
    const before = await creditsOf(call, key);
    const hit = await call('POST', '/responses', { key, body, headers });
    expect(hit.headers.get('x-svc-cache-status')).toBe('HIT');
    expect(hit.json).toMatchObject({ id: first.json.id, output: first.json.output, usage: { input_tokens: 0, output_tokens: 0, cost: 0 } });
    expect(await creditsOf(call, key)).toEqual(before);
    const { rows } = await gw.runtime.sql.query('SELECT id FROM stored_responses WHERE id = $1', [first.json.id]);
    expect(rows).toHaveLength(1);
    expect((await client.responses.retrieve(first.json.id)).usage).toEqual(first.json.usage);
  });

  it('a response that could not be stored is still answered (it was billed), saying store: false', async () => {
    await gw.runtime.sql.query('ALTER TABLE stored_responses RENAME TO stored_responses_away');
    try {
      const before = await creditsOf(call, key);
      const { data: response, response: http } = await client.responses.create({ model: 'sim/echo', input: 'Storage is down' }).withResponse();
      expect(response).toMatchObject({ status: 'completed', store: false, output_text: 'Echo: Storage is down' });
      await expectBilled(call, key, http.headers.get('x-svc-generation-id')!, costOf(response), ENDPOINT, before);
    } finally {
      await gw.runtime.sql.query('ALTER TABLE stored_responses_away RENAME TO stored_responses');
    }
  });

  it('store: false is answered and billed but never kept', async () => {
    const before = await creditsOf(call, key);
    const { data: response, response: http } = await client.responses.create({ model: 'sim/echo', input: 'Ephemeral', store: false }).withResponse();
    expect(response).toMatchObject({ store: false, status: 'completed' });
    await expectBilled(call, key, http.headers.get('x-svc-generation-id')!, costOf(response), ENDPOINT, before);
    const err = await errorOf(client.responses.retrieve(response.id));
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.error).toMatchObject({ type: 'not_found_error', code: 'response_not_found' });
    const { rows } = await gw.runtime.sql.query('SELECT id FROM stored_responses WHERE id = $1', [response.id]);
    expect(rows).toEqual([]);
  });

  it('deletes a stored response: then it is gone for retrieve, input_items and continuation', async () => {
    const response = await client.responses.create({ model: 'sim/echo', input: 'Delete me' });
    const deleted = await call('DELETE', `/responses/${response.id}`, { key });
    expect(deleted.status).toBe(200);
    expect(deleted.json).toEqual({ id: response.id, object: 'response', deleted: true });
    expect(await errorOf(client.responses.retrieve(response.id))).toBeInstanceOf(OpenAI.NotFoundError);
    expect(await errorOf(client.responses.inputItems.list(response.id))).toBeInstanceOf(OpenAI.NotFoundError);
    expect(await errorOf(client.responses.delete(response.id))).toBeInstanceOf(OpenAI.NotFoundError);

    const before = await creditsOf(call, key);
    const err = await errorOf(client.responses.create({ model: 'sim/echo', input: 'Go on', previous_response_id: response.id }));
    expect(err.status).toBe(404);
    expect(err.error).toMatchObject({ type: 'not_found_error', param: 'previous_response_id' });
    expect(await creditsOf(call, key)).toEqual(before);

    // Through the SDK as well.
    const other = await client.responses.create({ model: 'sim/echo', input: 'Delete me too' });
    await client.responses.delete(other.id);
    expect(await errorOf(client.responses.retrieve(other.id))).toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('a stored response is visible to the keys of its workspace only', async () => {
    const response = await client.responses.create({ model: 'sim/echo', input: 'Workspace secret' });

    // Another key of the same account (workspace) sees it and can continue it.
    const admin = api(gw.url.replace(/\/v1$/, ''));
    const sibling = await admin('POST', `/admin/accounts/${gw.keys.account_id}/keys`, {
      body: {},
      headers: { authorization: `Bearer ${gw.keys.admin_token}` },
    });
    expect(sibling.status).toBe(201);
    const colleague = new OpenAI({ baseURL: gw.url, apiKey: sibling.json.key, maxRetries: 0 });
    expect((await colleague.responses.retrieve(response.id)).id).toBe(response.id);

    // Another account's key: not found, whatever it tries.
    const { key: strangerKey } = await accountWithKey(gw, 1);
    const stranger = new OpenAI({ baseURL: gw.url, apiKey: strangerKey, maxRetries: 0 });
    expect((await errorOf(stranger.responses.retrieve(response.id))).status).toBe(404);
    expect((await errorOf(stranger.responses.inputItems.list(response.id))).status).toBe(404);
    expect((await errorOf(stranger.responses.create({ model: 'sim/echo', input: 'Tell me', previous_response_id: response.id }))).status).toBe(404);
    expect((await call('DELETE', `/responses/${response.id}`, { key: strangerKey })).status).toBe(404);
    expect((await client.responses.retrieve(response.id)).id).toBe(response.id);
  });

  it('keeps the content encrypted, bound to its response', async () => {
    const response = await client.responses.create({ model: 'sim/echo', input: 'A plaintext nobody should read' });
    const { rows } = await gw.runtime.sql.query<{ response: string; input_items: string }>('SELECT response, input_items FROM stored_responses WHERE id = $1', [
      response.id,
    ]);
    expect(rows).toHaveLength(1);
    expect(rows[0].response).toMatch(/^v1:/);
    expect(rows[0].input_items).toMatch(/^v1:/);
    expect(JSON.stringify(rows[0])).not.toContain('plaintext');

    // A ciphertext copied onto another response's row does not open there: that response is as gone as a deleted one.
    const other = await client.responses.create({ model: 'sim/echo', input: 'Another' });
    await gw.runtime.sql.query('UPDATE stored_responses SET response = $1 WHERE id = $2', [rows[0].response, other.id]);
    const err = await errorOf(client.responses.retrieve(other.id));
    expect(err.status).toBe(404);
    expect(JSON.stringify(err.error)).not.toContain('plaintext');
  });

  describe('bad input: 400 naming the field, nothing billed', () => {
    it.each<[string, unknown, string | null]>([
      ['a missing model', { input: 'hi' }, 'model'],
      ['a missing input', { model: 'sim/echo' }, 'input'],
      ['a store that is not a boolean', { model: 'sim/echo', input: 'hi', store: 'yes' }, 'store'],
      ['a previous_response_id that is not a string', { model: 'sim/echo', input: 'hi', previous_response_id: 42 }, 'previous_response_id'],
      [
        'a web_search tool with an unknown search_context_size',
        { model: 'sim/echo', input: 'hi', tools: [{ type: 'web_search', search_context_size: 'huge' }] },
        'tools[0].search_context_size',
      ],
      ['a body that is an array', [1, 2], null],
      ['a body that is a string', 'just text', null],
    ])('%s', async (_, body, param) => {
      const before = await creditsOf(call, key);
      const r = await call('POST', '/responses', { key, body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
      expect(r.status).toBe(400);
      expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param });
      if (param !== null) expect(r.json.error.message).toContain(param.split('.').at(-1)!);
      expect(await creditsOf(call, key)).toEqual(before);
    });
  });

  it('without SVC_ENCRYPTION_KEY: 503 storage_unavailable before anything is held; store: false still works', async () => {
    const config = gw.runtime.config as { encryptionKey: Buffer | null };
    const saved = config.encryptionKey;
    const kept = await client.responses.create({ model: 'sim/echo', input: 'Kept earlier' });
    config.encryptionKey = null;
    try {
      const before = await creditsOf(call, key);
      for (const body of [
        { model: 'sim/echo', input: 'Keep me' },
        { model: 'sim/echo', input: 'Go on', store: false, previous_response_id: kept.id },
      ]) {
        const err = await errorOf(client.responses.create(body));
        expect(err.status).toBe(503);
        expect(err.error).toMatchObject({
          type: 'service_unavailable',
          code: 'storage_unavailable',
          message: expect.stringMatching(/SVC_ENCRYPTION_KEY[^]*store: false/),
        });
      }
      expect(await creditsOf(call, key)).toEqual(before);
      expect((await errorOf(client.responses.retrieve(kept.id))).status).toBe(503);

      const ephemeral = await client.responses.create({ model: 'sim/echo', input: 'Not kept', store: false });
      expect(ephemeral.output_text).toBe('Echo: Not kept');
    } finally {
      config.encryptionKey = saved;
    }
  });
});

describe('stored responses expire after 30 days (spec 3.3, 8), on PostgreSQL', () => {
  const clock = new ManualClock(new Date('2026-11-02T10:00:00Z'));
  let gw: StartedGateway;
  let client: OpenAI;

  beforeAll(async () => {
    gw = await startGateway({ DATABASE_URL: await freshPgSchemaUrl('responses') }, undefined, { clock });
    client = new OpenAI({ baseURL: gw.url, apiKey: gw.keys.api_key, maxRetries: 0 });
  }, 60_000);
  afterAll(() => stopGateway(gw));

  const rowCount = async (id: string) => (await gw.runtime.sql.query('SELECT id FROM stored_responses WHERE id = $1', [id])).rows.length;

  it('is available until 30 days after creation, then 404 even before the purge, which then removes it', async () => {
    const response = await client.responses.create({ model: 'sim/echo', input: 'Remember me for a month' });
    clock.advance(DAY_MS);
    const young = await client.responses.create({ model: 'sim/echo', input: 'Created a day later' });

    clock.advance(STORED_RESPONSE_RETENTION_MS - DAY_MS - 1000);
    expect((await client.responses.retrieve(response.id)).id).toBe(response.id);
    expect(await gw.background.purgeStoredResponses()).toBe(0);

    clock.advance(1000);
    expect((await errorOf(client.responses.retrieve(response.id))).status).toBe(404);
    expect((await errorOf(client.responses.inputItems.list(response.id))).status).toBe(404);
    expect((await errorOf(client.responses.create({ model: 'sim/echo', input: 'Go on', previous_response_id: response.id }))).status).toBe(404);
    // Hidden, but the content is still there until the purge runs.
    expect(await rowCount(response.id)).toBe(1);

    expect(await gw.background.purgeStoredResponses()).toBe(1);
    expect(await rowCount(response.id)).toBe(0);
    // The younger one has a day left.
    expect(await rowCount(young.id)).toBe(1);
    expect((await client.responses.retrieve(young.id)).id).toBe(young.id);
  });
});
