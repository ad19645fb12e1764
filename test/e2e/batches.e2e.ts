import OpenAI, { toFile } from 'openai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ManualClock, usdToNano } from '@svc/platform';
import { api, startWithClient, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { accountWithKey, creditsOf, rejectionOf } from '../support/interfaces';
import { until } from '../support/until';
import { costLinesOf } from '../support/cost-lines';

type Line = { custom_id: string; method?: string; url: string; body: Record<string, unknown> };
const chatLine = (id: string, content: string, extra: Record<string, unknown> = {}): Line => ({
  custom_id: id,
  url: '/v1/chat/completions',
  body: { model: 'sim/echo', messages: [{ role: 'user', content }], max_tokens: 50, ...extra },
});
const jsonl = (lines: Line[]) => lines.map((l) => JSON.stringify({ method: 'POST', ...l })).join('\n') + '\n';
const sdkRefusal = (promise: Promise<unknown>) => rejectionOf(promise, OpenAI.APIError);
const ENDED = ['completed', 'failed', 'expired', 'cancelled'];

/**
 * Spec 4.11, 3.2 and 1 rule 6, OpenAI's Batch API (WIRE-FORMATS 1.2) through the official SDK:
 * lines run by the worker of `npm start`, each billed through the metering pipeline at the
 * catalog's batch discount (50 %), outside the per-minute limits and inside the spend limit.
 */
describe('batches (spec 4.11)', () => {
  let gw: StartedGateway;
  let client: OpenAI;
  let call: Call;

  beforeAll(async () => void ({ gw, client, call } = await startWithClient()), 60_000);
  afterAll(() => stopGateway(gw));

  const sdkFor = (key: string) => new OpenAI({ baseURL: gw.url, apiKey: key, maxRetries: 0 });
  const upload = async (sdk: OpenAI, lines: Line[]) => sdk.files.create({ file: await toFile(Buffer.from(jsonl(lines)), 'input.jsonl'), purpose: 'batch' });
  const finished = (sdk: OpenAI, id: string) =>
    until(
      `batch ${id} to end`,
      async () => {
        const batch = await sdk.batches.retrieve(id);
        return ENDED.includes(batch.status) ? batch : null;
      },
      30_000,
    );
  const resultsOf = async (sdk: OpenAI, fileId: string | null | undefined) => {
    if (!fileId) return [];
    const text = await (await sdk.files.content(fileId)).text();
    return text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
  };
  /** Another key of the account (same workspace): it sees the account's batches. */
  const secondKey = async (accountId: string) => {
    const root = api(gw.url.replace(/\/v1$/, ''));
    const created = await root('POST', `/admin/accounts/${accountId}/keys`, { body: {}, headers: { authorization: `Bearer ${gw.keys.admin_token}` } });
    expect(created.status).toBe(201);
    return created.json.key as string;
  };
  const generation = async (key: string, id: string) => (await call('GET', `/generation?id=${id}`, { key })).json.data;

  it('runs a chat batch from the SDK: every line billed at half the regular price, the balance moved by their sum', async () => {
    const { key } = await accountWithKey(gw, 5);
    const sdk = sdkFor(key);
    const before = await creditsOf(call, key);
    const input = await upload(sdk, [chatLine('a', 'hello there'), chatLine('b', 'a longer question about batches'), chatLine('c', 'third')]);
    const created = await sdk.batches.create({
      input_file_id: input.id,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
      metadata: { run: 'nightly' },
    });
    expect(created).toMatchObject({
      id: expect.stringMatching(/^batch_[0-9a-f]{24}$/),
      object: 'batch',
      status: 'validating',
      endpoint: '/v1/chat/completions',
      input_file_id: input.id,
      completion_window: '24h',
      metadata: { run: 'nightly' },
      errors: null,
      output_file_id: null,
    });
    expect(created.expires_at! - created.created_at).toBe(24 * 3600);

    const batch = await finished(sdk, created.id);
    expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 3, completed: 3, failed: 0 }, error_file_id: null });
    for (const field of ['in_progress_at', 'finalizing_at', 'completed_at'] as const) expect(batch[field]).toEqual(expect.any(Number));

    const output = await resultsOf(sdk, batch.output_file_id);
    expect(output.map((l) => l.custom_id).sort()).toEqual(['a', 'b', 'c']);
    let sum = 0n;
    for (const line of output) {
      expect(line).toMatchObject({
        id: expect.stringMatching(/^batch_req_/),
        response: { status_code: 200, request_id: expect.stringMatching(/^gen-/) },
        error: null,
      });
      const body = line.response.body;
      expect(body.id).toBe(line.response.request_id);
      expect(body.choices[0].message.content).toEqual(expect.any(String));
      const record = await generation(key, body.id);
      // Spec 1 rule 6: the line pays half the answering provider's price (sim/echo: $2/$8 per M, or $2.50/$10 on the backup), rounded up to the nano.
      const [input, output] = record.provider === 'sim-backup' ? [2_500n, 10_000n] : [2_000n, 8_000n];
      const regular = BigInt(body.usage.prompt_tokens) * input + BigInt(body.usage.completion_tokens) * output;
      const charged = usdToNano(String(record.total_cost));
      expect(charged).toBe((regular + 1n) / 2n);
      expect(charged).toBeLessThanOrEqual(regular);
      expect(usdToNano(String(body.usage.cost))).toBe(charged);
      expect(record).toMatchObject({ model: 'sim/echo', endpoint: '/v1/chat/completions', batch: true, byok: false });
      // Issue 23: the list price line by line, then the discount (the charge rounds up, so the discount is truncated).
      const [inputLine, outputLine, discount] = costLinesOf(record);
      expect(inputLine).toEqual(['input', body.usage.prompt_tokens, Number(input) / 1e9, BigInt(body.usage.prompt_tokens) * input]);
      expect(outputLine).toEqual(['output', body.usage.completion_tokens, Number(output) / 1e9, BigInt(body.usage.completion_tokens) * output]);
      expect(discount).toEqual(['batch_discount', 50, -Number(regular) / 1e11, -(regular / 2n)]);
      sum += charged;
    }
    const after = await creditsOf(call, key);
    expect(usdToNano(after.balance) - usdToNano(before.balance)).toBe(-sum);
    expect([after.held, after.open_holds]).toEqual([0, 0]);

    const listed = await sdk.batches.list({ limit: 10 });
    expect(listed.data.map((b) => b.id)).toContain(created.id);
  });

  it("charges a line that searched the web what its answer says: the query at the engine's price, outside the discount", async () => {
    const { key } = await accountWithKey(gw, 5);
    const sdk = sdkFor(key);
    const before = await creditsOf(call, key);
    const input = await upload(sdk, [chatLine('searched', 'what is new in the news', { plugins: [{ id: 'web' }] })]);
    const batch = await finished(sdk, (await sdk.batches.create({ input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
    expect(batch.request_counts).toEqual({ total: 1, completed: 1, failed: 0 });
    const [line] = await resultsOf(sdk, batch.output_file_id);
    const body = line.response.body;
    expect(body.usage.server_tool_use).toEqual({ web_search_requests: 1, web_search_cost: 0.002 });
    // The answer, the record and the balance say the same amount, the $0.002 query included.
    const record = await generation(key, body.id);
    const charged = usdToNano(String(record.total_cost));
    expect(usdToNano(String(body.usage.cost))).toBe(charged);
    expect(costLinesOf(record).find(([meter]) => meter === 'queries')).toEqual(['queries', 1, 0.002, 2_000_000n]);
    const after = await creditsOf(call, key);
    expect(usdToNano(before.balance) - usdToNano(after.balance)).toBe(charged);
  });

  it('runs an embeddings batch the same way', async () => {
    const { key } = await accountWithKey(gw, 5);
    const sdk = sdkFor(key);
    const input = await upload(sdk, [
      { custom_id: 'e1', url: '/v1/embeddings', body: { model: 'sim/embed', input: 'one text' } },
      { custom_id: 'e2', url: '/v1/embeddings', body: { model: 'sim/embed', input: ['two', 'texts'] } },
    ]);
    const created = await sdk.batches.create({ input_file_id: input.id, endpoint: '/v1/embeddings', completion_window: '24h' });
    const batch = await finished(sdk, created.id);
    expect(batch.request_counts).toEqual({ total: 2, completed: 2, failed: 0 });
    const output = await resultsOf(sdk, batch.output_file_id);
    const e2 = output.find((l) => l.custom_id === 'e2');
    expect(e2.response.body.data).toHaveLength(2);
    expect(e2.response.body.usage.cost).toBeGreaterThan(0);
  });

  it('fails a line alone with the error its endpoint would give, billing nothing for it', async () => {
    const { key } = await accountWithKey(gw, 5);
    const sdk = sdkFor(key);
    const before = await creditsOf(call, key);
    const input = await upload(sdk, [
      chatLine('ok', 'fine'),
      chatLine('bad-model', 'x', { model: 'no/such-model' }),
      chatLine('no-messages', 'x', { messages: 'nope' }),
      chatLine('upstream', '#sim {"fail": 400}\nhi'),
    ]);
    const batch = await finished(sdk, (await sdk.batches.create({ input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
    expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 4, completed: 1, failed: 3 } });
    const errors = await resultsOf(sdk, batch.error_file_id);
    const byId = Object.fromEntries(errors.map((l) => [l.custom_id, l]));
    expect(byId['bad-model'].response).toMatchObject({ status_code: 404, body: { error: { code: 'model_not_found', param: 'model' } } });
    expect(byId['no-messages'].response).toMatchObject({ status_code: 400, body: { error: { type: 'invalid_request_error', param: 'messages' } } });
    expect(byId.upstream.response.status_code).toBe(400);
    expect(byId.upstream.error).toBeNull();
    const [ok] = await resultsOf(sdk, batch.output_file_id);
    const after = await creditsOf(call, key);
    expect(usdToNano(before.balance) - usdToNano(after.balance)).toBe(usdToNano(String(ok.response.body.usage.cost)));
  });

  it('a line whose hold the balance cannot cover fails alone with 402; the others run', async () => {
    const { key } = await accountWithKey(gw, 0.01);
    const sdk = sdkFor(key);
    const input = await upload(sdk, [chatLine('small-1', 'a'), chatLine('huge', 'b', { max_tokens: 100_000 }), chatLine('small-2', 'c')]);
    const batch = await finished(sdk, (await sdk.batches.create({ input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
    expect(batch.request_counts).toEqual({ total: 3, completed: 2, failed: 1 });
    const [huge] = await resultsOf(sdk, batch.error_file_id);
    expect(huge).toMatchObject({ custom_id: 'huge', response: { status_code: 402, body: { error: { code: 'insufficient_quota' } } }, error: null });
    expect((await resultsOf(sdk, batch.output_file_id)).map((l) => l.custom_id).sort()).toEqual(['small-1', 'small-2']);
  });

  it("ignores the key's requests per minute but keeps its spend limit (spec 1 rule 6)", async () => {
    const { accountId, key: twoRpm } = await accountWithKey(gw, 5, { rpm_limit: 2 });
    const sdk = sdkFor(twoRpm);
    const input = await upload(
      sdk,
      Array.from({ length: 6 }, (_, i) => chatLine(`r${i}`, `line ${i}`)),
    );
    const created = await sdk.batches.create({ input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    // The key's two requests of this minute are spent: a direct call is refused, the batch's six lines are not.
    const direct = await sdkRefusal(sdk.chat.completions.create({ model: 'sim/echo', messages: [{ role: 'user', content: 'x' }] }));
    expect(direct.status).toBe(429);
    const watcher = sdkFor(await secondKey(accountId));
    expect((await finished(watcher, created.id)).request_counts).toEqual({ total: 6, completed: 6, failed: 0 });

    // A spend limit below one line's worst case: every line is refused by it, and nothing is billed.
    const { key: capped } = await accountWithKey(gw, 5, { limit: 0.0001 });
    const cappedSdk = sdkFor(capped);
    const before = await creditsOf(call, capped);
    const refused = await finished(
      cappedSdk,
      (
        await cappedSdk.batches.create({
          input_file_id: (await upload(cappedSdk, [chatLine('a', 'x'), chatLine('b', 'y')])).id,
          endpoint: '/v1/chat/completions',
          completion_window: '24h',
        })
      ).id,
    );
    expect(refused.request_counts).toEqual({ total: 2, completed: 0, failed: 2 });
    for (const line of await resultsOf(cappedSdk, refused.error_file_id))
      expect(line.response).toMatchObject({ status_code: 429, body: { error: { type: 'insufficient_quota' } } });
    expect(await creditsOf(call, capped)).toEqual(before);
  });

  it('refuses bad input with a 400 naming the field, creating and billing nothing', async () => {
    const { key } = await accountWithKey(gw, 5);
    const sdk = sdkFor(key);
    const before = await creditsOf(call, key);
    const good = await upload(sdk, [chatLine('a', 'x')]);
    const cases: [Record<string, unknown>, string, string?][] = [
      [{ input_file_id: 'file-000000000000000000000000', endpoint: '/v1/chat/completions', completion_window: '24h' }, 'input_file_id', 'file_not_found'],
      [{ input_file_id: good.id, endpoint: '/v1/chat/completions', completion_window: '48h' }, 'completion_window'],
      [{ input_file_id: good.id, endpoint: '/v1/images/generations', completion_window: '24h' }, 'endpoint'],
      [{ input_file_id: good.id, endpoint: '/v1/embeddings', completion_window: '24h' }, 'input_file_id', 'url_mismatch'],
      [{ input_file_id: good.id, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { n: 1 } }, 'metadata.n'],
      [{ endpoint: '/v1/chat/completions', completion_window: '24h' }, 'input_file_id', 'missing_required_parameter'],
    ];
    for (const [body, param, code] of cases) {
      const err = await sdkRefusal(sdk.batches.create(body as never));
      expect([err.status, err.error]).toEqual([400, expect.objectContaining({ type: 'invalid_request_error', param, ...(code ? { code } : {}) })]);
    }
    const mixed = await upload(sdk, [chatLine('a', 'x'), { ...chatLine('b', 'y'), url: '/v1/embeddings' }]);
    const err = await sdkRefusal(sdk.batches.create({ input_file_id: mixed.id, endpoint: '/v1/chat/completions', completion_window: '24h' }));
    expect(err.error).toMatchObject({ code: 'url_mismatch', param: 'input_file_id', message: expect.stringContaining('Line 2: url is "/v1/embeddings"') });
    // A non-JSONL file never becomes a file at all.
    const notJsonl = await sdkRefusal(sdk.files.create({ file: await toFile(Buffer.from('not json\n'), 'x.jsonl'), purpose: 'batch' }));
    expect([notJsonl.status, (notJsonl.error as any).param]).toEqual([400, 'file']);
    expect((await sdk.batches.list()).data).toEqual([]);
    expect(await creditsOf(call, key)).toEqual(before);
  });

  it('5,001 lines fail validation; 404 for a batch of another workspace', async () => {
    const { key } = await accountWithKey(gw, 5);
    const sdk = sdkFor(key);
    const many = Array.from({ length: 5001 }, (_, i) => chatLine(`r${i}`, 'x'));
    const err = await sdkRefusal(
      sdk.batches.create({ input_file_id: (await upload(sdk, many)).id, endpoint: '/v1/chat/completions', completion_window: '24h' }),
    );
    expect(err.error).toMatchObject({ code: 'too_many_tasks', param: 'input_file_id' });
    const mine = await client.batches.create({
      input_file_id: (await upload(client, [chatLine('a', 'x')])).id,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    const notFound = await sdkRefusal(sdk.batches.retrieve(mine.id));
    expect([notFound.status, (notFound.error as any).code]).toEqual([404, 'batch_not_found']);
  });
});

/**
 * The batch's end in time (spec 3.2): cancelled and expired batches keep the lines that
 * finished (billed) and list the others as not run (not billed); the end is told by webhook.
 * The clock is the gateway's, moved by the test.
 */
describe('batches over time (spec 3.2, 6.1)', () => {
  const clock = new ManualClock(new Date());
  const received: { type: string; data: Record<string, any> }[] = [];
  let receiver: Server;
  let gw: StartedGateway;
  let client: OpenAI;
  let call: Call;

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => {
        received.push(JSON.parse(raw));
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    ({ gw, client, call } = await startWithClient({ SVC_WEBHOOK_ALLOW_PRIVATE: 'true', SVC_BATCH_CONCURRENCY: '2' }, undefined, { clock }));
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    expect((await call('PUT', '/settings/webhook', { key: gw.keys.management_key, body: { url, events: ['batch.completed', 'batch.failed'] } })).status).toBe(
      200,
    );
  }, 60_000);
  afterAll(async () => {
    await stopGateway(gw);
    await new Promise((resolve) => receiver?.close(resolve));
  });

  const slow = (n: number) => Array.from({ length: n }, (_, i) => chatLine(`s${i}`, `#sim {"delay_ms": 250}\nline ${i}`));
  const start = async (lines: Line[]) =>
    client.batches.create({
      input_file_id: (await client.files.create({ file: await toFile(Buffer.from(jsonl(lines)), 'in.jsonl'), purpose: 'batch' })).id,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
  const ended = (id: string) =>
    until(
      `batch ${id} to end`,
      async () => {
        const batch = await client.batches.retrieve(id);
        return ENDED.includes(batch.status) ? batch : null;
      },
      30_000,
    );
  const linesOf = async (fileId: string | null | undefined) =>
    fileId
      ? (await (await client.files.content(fileId)).text())
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l))
      : [];
  const webhook = (id: string) => until(`the webhook of ${id}`, () => received.find((r) => r.data.id === id), 15_000);
  const balance = async () => usdToNano(String((await creditsOf(call, gw.keys.api_key)).balance));

  /** The lines that finished are kept and billed; the others are listed with `code` and cost nothing. */
  const expectKept = async (batch: OpenAI.Batches.Batch, before: bigint, code: string) => {
    const output = await linesOf(batch.output_file_id);
    const errors = await linesOf(batch.error_file_id);
    expect(output.length).toBe(batch.request_counts!.completed);
    expect(output.length).toBeGreaterThan(0);
    expect(output.length).toBeLessThan(12);
    expect(errors.length).toBe(12 - output.length);
    for (const line of errors) expect(line).toMatchObject({ response: null, error: { code } });
    const sum = output.reduce((total, l) => total + usdToNano(String(l.response.body.usage.cost)), 0n);
    expect(before - (await balance())).toBe(sum);
    expect((await creditsOf(call, gw.keys.api_key)).open_holds).toBe(0);
  };

  it('a completed batch sends batch.completed with its counts and files', async () => {
    const batch = await ended((await start([chatLine('a', 'x'), chatLine('b', 'y')])).id);
    const event = await webhook(batch.id);
    expect(event).toMatchObject({
      type: 'batch.completed',
      data: { id: batch.id, status: 'completed', request_counts: { completed: 2, failed: 0 }, output_file_id: batch.output_file_id, error_file_id: null },
    });
  });

  it('cancel mid-run: the lines running finish and are billed, the rest never run; batch.failed says cancelled', async () => {
    const before = await balance();
    const created = await start(slow(12));
    await until('a line done', async () => (await client.batches.retrieve(created.id)).request_counts!.completed >= 1, 15_000, 50);
    const cancelling = await client.batches.cancel(created.id);
    expect(cancelling.status).toBe('cancelling');
    expect(cancelling.cancelling_at).toEqual(expect.any(Number));
    const batch = await ended(created.id);
    expect(batch.status).toBe('cancelled');
    await expectKept(batch, before, 'batch_cancelled');
    expect(await webhook(batch.id)).toMatchObject({
      type: 'batch.failed',
      data: { status: 'cancelled', request_counts: batch.request_counts && { completed: batch.request_counts.completed, failed: 0 } },
    });
    const again = await sdkRefusal(client.batches.cancel(created.id));
    expect([again.status, (again.error as any).code]).toEqual([409, 'batch_not_cancellable']);
  });

  it('past its 24 hours a batch expires, keeping the lines that finished; batch.failed says expired', async () => {
    const before = await balance();
    const created = await start(slow(12));
    await until('a line done', async () => (await client.batches.retrieve(created.id)).request_counts!.completed >= 1, 15_000, 50);
    clock.advance(24 * 3_600_000 + 60_000);
    const batch = await ended(created.id);
    expect(batch).toMatchObject({ status: 'expired', expired_at: expect.any(Number) });
    await expectKept(batch, before, 'batch_expired');
    expect(await webhook(batch.id)).toMatchObject({ type: 'batch.failed', data: { status: 'expired' } });
  });
});
