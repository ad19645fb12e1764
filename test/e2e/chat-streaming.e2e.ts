import OpenAI from 'openai';
import { request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { accountStream } from '@svc/ledger';
import { PgSqlRunner, usdToNano } from '@svc/platform';
import { countChatPromptTokens, countTextTokens } from '@svc/providers';
import { SqlEventStore } from '@svc/eventstore';
import { freshPgSchemaUrl, startGateway, startWithClient, stopGateway, type StartedGateway, type Call } from '../support/gateway';

// The built-in catalog's sim/echo prices: $2 / M input, $0.50 / M cached input, $8 / M output.
const INPUT_NANO = 2000n;
const CACHED_NANO = 500n;
const OUTPUT_NANO = 8000n;

type Usage = OpenAI.CompletionUsage & { cost: number };

describe('streamed chat completions (issue 5: streaming; spec 1 rules 1-4, 4.2, 6.2)', () => {
  let gw: StartedGateway;
  let client: OpenAI;
  let call: Call;

  beforeAll(async () => void ({ gw, client, call } = await startWithClient()), 60_000);
  afterAll(() => stopGateway(gw));

  const credits = async () => {
    const r = await call('GET', '/credits', { key: gw.keys.api_key });
    expect(r.status).toBe(200);
    return r.json.data as { balance: number; held: number; open_holds: number };
  };
  const spentSince = async (before: { balance: number }) => usdToNano(before.balance) - usdToNano((await credits()).balance);
  const generation = async (id: string) => (await call('GET', `/generation?id=${id}`, { key: gw.keys.api_key })).json.data;
  const user = (content: string) => [{ role: 'user' as const, content }];

  /** POSTs a streamed request and reads the raw SSE `data:` payloads, in order. */
  async function rawStream(body: object) {
    const response = await fetch(`${gw.url}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.keys.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ stream: true, ...body }),
    });
    const text = await response.text();
    // An error before the first byte is a JSON body, not events.
    const events = response.headers.get('content-type')?.startsWith('text/event-stream') ? text.split('\n\n').filter((e) => e !== '') : [];
    for (const e of events) expect(e).toMatch(/^data: /);
    const data = events.map((e) => e.slice('data: '.length));
    return { response, text, data, json: data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d)) };
  }

  /** The UsageCharged or HoldReleased that settled a hold, once the ledger has it. */
  async function settlementOf(holdId: string, timeoutMs = 10_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const events = await gw.runtime.store.readStream(accountStream(gw.keys.account_id));
      const settled = events.find((e) => ['UsageCharged', 'HoldReleased'].includes(e.type) && (e.data as { hold_id: string }).hold_id === holdId);
      if (settled) return settled as { type: string; data: Record<string, any> };
      if (Date.now() > deadline) throw new Error(`hold ${holdId} not settled within ${timeoutMs} ms`);
      await sleep(50);
    }
  }

  it('streams chunks under the generation id and catalog model, with a final usage chunk whose cost is what the credits lost', async () => {
    const before = await credits();
    const { data: stream, response } = await client.chat.completions
      .create({ model: 'sim/echo', messages: user('Stream to me'), stream: true, stream_options: { include_usage: true } })
      .withResponse();
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);

    const id = response.headers.get('x-svc-generation-id');
    expect(id).toMatch(/^gen-/);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(chunks.every((c) => c.id === id && c.model === 'sim/echo' && c.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Echo: Stream to me');
    // OpenAI's shape with include_usage: usage null on every chunk but the last, whose choices are empty.
    expect(chunks.slice(0, -1).every((c) => c.usage === null && c.choices.length === 1)).toBe(true);

    const last = chunks[chunks.length - 1];
    expect(last.choices).toEqual([]);
    const usage = last.usage as Usage;
    expect(usage.prompt_tokens).toBe(countChatPromptTokens(user('Stream to me')));
    expect(usage.completion_tokens).toBe(countTextTokens('Echo: Stream to me'));
    const expected = BigInt(usage.prompt_tokens) * INPUT_NANO + BigInt(usage.completion_tokens) * OUTPUT_NANO;
    expect(usdToNano(usage.cost)).toBe(expected);
    expect(await spentSince(before)).toBe(expected);
    expect(await credits()).toMatchObject({ held: 0, open_holds: 0 });

    const record = await generation(id!);
    expect(record).toMatchObject({ model: 'sim/echo', provider: 'sim', status: 'completed', total_cost: usage.cost });
    expect(record.time_to_first_token_ms).toEqual(expect.any(Number));
    expect(record.latency_ms).toBeGreaterThanOrEqual(record.time_to_first_token_ms);
  });

  it('without include_usage sends no usage at all, and still bills the upstream-reported usage', async () => {
    const before = await credits();
    const { data: stream, response } = await client.chat.completions
      .create({ model: 'sim/echo', messages: user('No usage please'), stream: true })
      .withResponse();
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);

    expect(chunks.length).toBeGreaterThan(2);
    expect(chunks.every((c) => !('usage' in c) && c.choices.length === 1)).toBe(true);
    expect(chunks[chunks.length - 1].choices[0].finish_reason).toBe('stop');
    const expected = BigInt(countChatPromptTokens(user('No usage please'))) * INPUT_NANO + BigInt(countTextTokens('Echo: No usage please')) * OUTPUT_NANO;
    expect(await spentSince(before)).toBe(expected);
    expect(usdToNano((await generation(response.headers.get('x-svc-generation-id')!)).total_cost)).toBe(expected);
  });

  it('bills streamed cached and reasoning tokens at their prices, and forwards delta.reasoning (spec 1 rule 5, 2.6)', async () => {
    const before = await credits();
    const stream = await client.chat.completions.create({
      model: 'sim/echo',
      messages: user('Think\n#sim {"cached_tokens": 8, "reasoning_tokens": 10}'),
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const reasoning = chunks.map((c) => (c.choices[0]?.delta as { reasoning?: string } | undefined)?.reasoning ?? '').join('');
    expect(countTextTokens(reasoning)).toBe(10);

    const usage = chunks[chunks.length - 1].usage as Usage;
    expect(usage.prompt_tokens_details?.cached_tokens).toBe(8);
    expect(usage.completion_tokens_details?.reasoning_tokens).toBe(10);
    const expected = BigInt(usage.prompt_tokens - 8) * INPUT_NANO + 8n * CACHED_NANO + BigInt(usage.completion_tokens) * OUTPUT_NANO;
    expect(usdToNano(usage.cost)).toBe(expected);
    expect(await spentSince(before)).toBe(expected);
  });

  it('speaks SSE on the wire: data lines, one id and model throughout, [DONE] last', async () => {
    const { response, text, data, json } = await rawStream({ model: 'sim/echo', messages: user('wire'), stream_options: { include_usage: true } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(response.headers.get('cache-control')).toBe('no-cache');
    const id = response.headers.get('x-svc-generation-id');
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(data.filter((d) => d === '[DONE]')).toHaveLength(1);
    expect(json.every((c) => c.id === id && c.model === 'sim/echo' && c.object === 'chat.completion.chunk')).toBe(true);
    expect(json[0].choices[0].delta.role).toBe('assistant');
    expect(json[json.length - 1]).toMatchObject({ choices: [], usage: { cost: expect.any(Number) } });
  });

  it('records the time to the first content chunk apart from the whole latency', async () => {
    // The role chunk comes at once, then each further chunk after 40 ms: the first content
    // after one delay, the whole stream (content "Echo: ", "a ", "b ", "c", finish, usage) after six.
    const { response } = await rawStream({ model: 'sim/echo', messages: user('a b c\n#sim {"chunk_delay_ms": 40}'), stream_options: { include_usage: true } });
    const record = await generation(response.headers.get('x-svc-generation-id')!);
    expect(record.time_to_first_token_ms).toBeGreaterThanOrEqual(35);
    expect(record.latency_ms).toBeGreaterThanOrEqual(6 * 40 - 5);
    expect(record.latency_ms - record.time_to_first_token_ms).toBeGreaterThanOrEqual(4 * 40);
  });

  it('does not bill a clean stream with no output, and still ends it with [DONE] (spec 1 rule 3)', async () => {
    const before = await credits();
    const { response, data, json } = await rawStream({
      model: 'sim/echo',
      messages: user('#sim {"completion_tokens": 0}'),
      stream_options: { include_usage: true },
    });
    expect(data[data.length - 1]).toBe('[DONE]');
    expect(json[json.length - 1].usage).toMatchObject({ completion_tokens: 0, cost: 0 });
    expect(await spentSince(before)).toBe(0n);
    expect(await generation(response.headers.get('x-svc-generation-id')!)).toMatchObject({ status: 'not_billed', total_cost: 0 });
  });

  it('keeps generating and bills the whole completion when the client disconnects mid-stream (spec 1 rule 4)', async () => {
    const abort = new AbortController();
    const response = await fetch(`${gw.url}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.keys.api_key}`, 'content-type': 'application/json' },
      // 40 content chunks 25 ms apart: about a second of stream after the client has left.
      body: JSON.stringify({ model: 'sim/echo', stream: true, messages: user('#sim {"completion_tokens": 40, "chunk_delay_ms": 25}') }),
      signal: abort.signal,
    });
    const id = response.headers.get('x-svc-generation-id')!;
    const reader = response.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toMatch(/^data: /);
    abort.abort();
    await reader.read().catch(() => undefined);

    const settled = await settlementOf(id);
    expect(settled.type).toBe('UsageCharged');
    expect(settled.data.completion_tokens).toBe(40);
    expect(settled.data.prompt_tokens).toBe(countChatPromptTokens(user('#sim {"completion_tokens": 40, "chunk_delay_ms": 25}')));
    expect(settled.data.ttft_ms).toEqual(expect.any(Number));
    expect(BigInt(settled.data.amount_nano)).toBe(BigInt(settled.data.prompt_tokens) * INPUT_NANO + 40n * OUTPUT_NANO);
    // The stream outlived the client by far: nothing is billed before the upstream finished.
    expect(settled.data.latency_ms).toBeGreaterThanOrEqual(39 * 25);
  });

  it('survives a client that leaves before the first event, and still bills the generation (spec 1 rule 4)', async () => {
    const content = '#sim {"delay_ms": 300, "completion_tokens": 5}';
    const chargesOfFive = async () =>
      (await gw.runtime.store.readStream(accountStream(gw.keys.account_id))).filter(
        (e) => e.type === 'UsageCharged' && (e.data as { completion_tokens: number }).completion_tokens === 5,
      ).length;
    const chargedBefore = await chargesOfFive();
    const abort = new AbortController();
    const pending = fetch(`${gw.url}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.keys.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim/echo', stream: true, messages: user(content) }),
      signal: abort.signal,
    });
    await sleep(100);
    abort.abort();
    await expect(pending).rejects.toThrow();

    // The answer had no client to go to; the gateway still serves the next one and bills the first.
    await sleep(500);
    const after = await rawStream({ model: 'sim/echo', messages: user('still here') });
    expect(after.response.status).toBe(200);
    expect(after.data[after.data.length - 1]).toBe('[DONE]');
    expect(await chargesOfFive()).toBe(chargedBefore + 1);
  });

  describe('an upstream stream cut short', () => {
    const messages = user('one two three four five\n#sim {"cut_after_chunks": 3}');
    // The role chunk, then "Echo: ", "one ", "two ": what arrived before the connection died.
    const delivered = 'Echo: one two ';

    it('reaches the openai SDK as an error after the delivered text, not as a finished answer', async () => {
      const stream = await client.chat.completions.create({ model: 'sim/echo', messages, stream: true });
      let text = '';
      const error = await (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      })().catch((e: unknown) => e);
      expect(text).toBe(delivered);
      expect(error).toBeInstanceOf(OpenAI.APIError);
      expect(error).toMatchObject({ type: 'api_error', code: 'upstream_error' });
    });

    it('ends in an error event without [DONE], and bills the prompt plus the delivered tokens only', async () => {
      const before = await credits();
      const { response, data, json } = await rawStream({ model: 'sim/echo', messages, stream_options: { include_usage: true } });
      expect(response.status).toBe(200);
      expect(data).not.toContain('[DONE]');
      const last = json[json.length - 1];
      expect(last).toEqual({ error: { message: expect.stringContaining('incomplete'), type: 'api_error', code: 'upstream_error', param: null } });
      // No usage chunk either: the cost of a cut stream is in the generation record.
      expect(json.some((c) => c.usage)).toBe(false);

      const promptTokens = countChatPromptTokens(messages);
      const completionTokens = countTextTokens(delivered);
      const expected = BigInt(promptTokens) * INPUT_NANO + BigInt(completionTokens) * OUTPUT_NANO;
      expect(await spentSince(before)).toBe(expected);
      expect(await credits()).toMatchObject({ held: 0, open_holds: 0 });
      const record = await generation(response.headers.get('x-svc-generation-id')!);
      expect(record).toMatchObject({ tokens_prompt: promptTokens, tokens_completion: completionTokens });
      expect(usdToNano(record.total_cost)).toBe(expected);
    });

    it('before any content is not billed, and is still a JSON error with its status, as nothing was sent yet', async () => {
      const before = await credits();
      const { response, text } = await rawStream({ model: 'sim/echo', messages: user('hello\n#sim {"cut_after_chunks": 0}') });
      expect(response.status).toBe(502);
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      expect(JSON.parse(text).error).toMatchObject({ type: 'api_error', code: 'upstream_error' });
      expect(await spentSince(before)).toBe(0n);
      expect(await credits()).toMatchObject({ held: 0, open_holds: 0 });
    });
  });

  it.each([
    ['an unknown model', { model: 'sim/nope' }, 404, 'not_found_error', 'model_not_found'],
    ['a worst case above the balance', { model: 'sim/echo', max_tokens: 2_000_000 }, 402, 'insufficient_quota', 'insufficient_quota'],
    ['an upstream outage before any chunk', { model: 'sim/echo', messages: user('#sim {"fail": 503}') }, 503, 'service_unavailable', 'model_unavailable'],
    ['an upstream refusal before any chunk', { model: 'sim/echo', messages: user('#sim {"fail": 422}') }, 400, 'invalid_request_error', 'upstream_rejected'],
  ])('answers %s with the JSON error object and its status, not a stream, and bills nothing', async (_what, body, status, type, code) => {
    const before = await credits();
    const { response, text } = await rawStream({ messages: user('hi'), ...body });
    expect(response.status).toBe(status);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(JSON.parse(text).error).toMatchObject({ type, code });
    expect(await spentSince(before)).toBe(0n);
    expect(await credits()).toMatchObject({ held: 0, open_holds: 0 });
  });
});

describe('shutting down with a stream whose client left (spec 1 rule 4)', () => {
  it('lets the generation finish and settle before the database closes', async () => {
    const databaseUrl = await freshPgSchemaUrl('shutdown');
    const gw = await startGateway({ DATABASE_URL: databaseUrl });
    // The client reads the first event, then drops its connection.
    await new Promise<void>((resolve, reject) => {
      const req = request(
        `${gw.url}/chat/completions`,
        { method: 'POST', headers: { authorization: `Bearer ${gw.keys.api_key}`, 'content-type': 'application/json' } },
        (res) => {
          res.once('data', () => {
            req.destroy();
            resolve();
          });
        },
      );
      req.on('error', () => undefined);
      req.once('error', reject);
      req.end(
        JSON.stringify({ model: 'sim/echo', stream: true, messages: [{ role: 'user', content: 'one two three four five six\n#sim {"chunk_delay_ms": 150}' }] }),
      );
    });
    // The process is asked to stop while the upstream is still generating.
    await gw.close();
    gw.removeDataDir();

    const sql = await PgSqlRunner.connect({ connectionString: databaseUrl });
    try {
      const types = (await new SqlEventStore(sql).readStream(accountStream(gw.keys.account_id))).map((e) => e.type);
      expect(types.filter((t) => t === 'HoldPlaced')).toHaveLength(1);
      expect(types).toContain('UsageCharged');
    } finally {
      await sql.close();
    }
  }, 30_000);
});
