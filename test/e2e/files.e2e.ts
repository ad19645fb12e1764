import OpenAI, { toFile } from 'openai';
import { ManualClock, usdToNano } from '@svc/platform';
import { freshPgSchemaUrl, startGateway, startWithClient, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { accountWithKey, rejectionOf } from '../support/interfaces';

const jsonl = (n: number, tag = 'req') =>
  Array.from({ length: n }, (_, i) =>
    JSON.stringify({
      custom_id: `${tag}-${i}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: 'sim/echo', messages: [{ role: 'user', content: `hello ${i}` }] },
    }),
  ).join('\n') + '\n';

const sdkRefusal = (promise: Promise<unknown>) => rejectionOf(promise, OpenAI.APIError);

/**
 * Spec 4.11, OpenAI's Files API (WIRE-FORMATS 1.1), through the official openai SDK and raw
 * multipart forms: the batch input files batches will read. Nothing here is billed.
 */
describe('files (spec 4.11)', () => {
  let gw: StartedGateway;
  let client: OpenAI;
  let call: Call;

  beforeAll(async () => void ({ gw, client, call } = await startWithClient()), 60_000);
  afterAll(() => stopGateway(gw));

  const key = () => gw.keys.api_key;
  const balance = async () => usdToNano((await call('GET', '/credits', { key: key() })).json.data.balance);
  /** POST /v1/files with a form built part by part, in the order given. */
  const upload = async (parts: [string, string | Blob, string?][], apiKey = key()) => {
    const form = new FormData();
    for (const [name, value, filename] of parts) {
      if (typeof value === 'string') form.append(name, value);
      else form.append(name, value, filename);
    }
    const response = await fetch(`${gw.url}/files`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}` }, body: form });
    return { status: response.status, json: (await response.json()) as any };
  };
  const blob = (text: string) => new Blob([text], { type: 'application/jsonl' });
  const listIds = async (apiKey = key()) => ((await call('GET', '/files', { key: apiKey })).json.data as { id: string }[]).map((f) => f.id);

  it('uploads, retrieves, lists, downloads and deletes a batch file through the SDK, billing nothing', async () => {
    const before = await balance();
    const text = jsonl(3);
    const file = await client.files.create({ file: await toFile(Buffer.from(text), 'input.jsonl'), purpose: 'batch' });
    expect(file).toEqual({
      id: expect.stringMatching(/^file-[0-9a-f]{24}$/),
      object: 'file',
      bytes: Buffer.byteLength(text),
      created_at: expect.any(Number),
      filename: 'input.jsonl',
      purpose: 'batch',
      status: 'processed',
      expires_at: file.created_at + 30 * 24 * 3600,
      status_details: null,
    });
    expect(Math.abs(file.created_at - Date.now() / 1000)).toBeLessThan(60);
    expect(await client.files.retrieve(file.id)).toEqual(file);

    const content = await client.files.content(file.id);
    expect(content.headers.get('content-type')).toBe('application/jsonl');
    expect(content.headers.get('content-length')).toBe(String(file.bytes));
    expect(await content.text()).toBe(text);

    // Auto-pagination with a small page: every file, newest first, each once.
    const more = [];
    for (let i = 0; i < 4; i++)
      more.push(await client.files.create({ file: await toFile(Buffer.from(jsonl(1, `more${i}`)), `more-${i}.jsonl`), purpose: 'batch' }));
    const seen: string[] = [];
    for await (const listed of client.files.list({ limit: 2, purpose: 'batch' })) seen.push(listed.id);
    const ours = [file, ...more].map((f) => f.id);
    expect(seen.filter((id) => ours.includes(id))).toEqual([...ours].reverse());
    const page = await client.files.list({ limit: 2, order: 'asc' });
    expect(page.data).toHaveLength(2);
    expect(page.has_more).toBe(true);
    const raw = await call('GET', `/files?limit=2&after=${more[1].id}`, { key: key() });
    expect(raw.json).toMatchObject({ object: 'list', first_id: more[0].id, last_id: file.id, has_more: expect.any(Boolean) });

    expect(await client.files.delete(file.id)).toEqual({ id: file.id, object: 'file', deleted: true });
    for (const gone of [client.files.retrieve(file.id), client.files.content(file.id), client.files.delete(file.id)]) {
      const err = await sdkRefusal(gone);
      expect(err.status).toBe(404);
      expect(err.error).toMatchObject({ type: 'not_found_error', code: 'file_not_found', param: 'file_id' });
    }
    expect(await balance()).toBe(before);
  });

  it('round-trips a file of several megabytes byte-exact, lines spanning the 1 MiB chunks', async () => {
    const text = jsonl(40_000, 'big');
    expect(text.length).toBeGreaterThan(3 * 1024 * 1024);
    const file = await client.files.create({ file: await toFile(Buffer.from(text), 'big.jsonl'), purpose: 'batch' });
    expect(file.bytes).toBe(Buffer.byteLength(text));
    expect(await (await client.files.content(file.id)).text()).toBe(text);
  });

  it('refuses a batch file over 200 MB with 413 naming file, as too large an audio file is refused, and keeps none of it', async () => {
    const line = Buffer.from(`${JSON.stringify({ custom_id: 'x', body: { input: 'y'.repeat(8000) } })}\n`);
    const lines = Math.ceil((200 * 1024 * 1024 + 1) / line.length);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent === 0)
          controller.enqueue(
            Buffer.from(
              '--b\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--b\r\nContent-Disposition: form-data; name="file"; filename="huge.jsonl"\r\n\r\n',
            ),
          );
        if (sent >= lines) {
          controller.enqueue(Buffer.from('\r\n--b--\r\n'));
          controller.close();
          return;
        }
        controller.enqueue(Buffer.concat(Array.from({ length: 128 }, () => line)));
        sent += 128;
      },
    });
    const response = await fetch(`${gw.url}/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key()}`, 'content-type': 'multipart/form-data; boundary=b' },
      body,
      duplex: 'half',
    } as RequestInit).catch((err: unknown) => err);
    expect(response).toBeInstanceOf(Response);
    expect((response as Response).status).toBe(413);
    expect(((await (response as Response).json()) as { error: unknown }).error).toMatchObject({
      type: 'invalid_request_error',
      code: 'file_too_large',
      param: 'file',
    });
    expect((await gw.runtime.sql.query("SELECT id FROM files WHERE status = 'uploading'")).rows).toEqual([]);
  }, 120_000);

  it.each([
    [
      'file before purpose',
      [
        ['file', blob(jsonl(2)), 'first.jsonl'],
        ['purpose', 'batch'],
      ],
    ],
    [
      'purpose before file',
      [
        ['purpose', 'batch'],
        ['file', blob(jsonl(2)), 'first.jsonl'],
      ],
    ],
  ] as [string, [string, string | Blob, string?][]][])('reads the form in any order: %s', async (_order, parts) => {
    const r = await upload(parts);
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ object: 'file', filename: 'first.jsonl', purpose: 'batch', bytes: Buffer.byteLength(jsonl(2)) });
    expect(await listIds()).toContain(r.json.id);
  });

  it('takes expires_after in brackets, even after the file', async () => {
    const r = await upload([
      ['purpose', 'batch'],
      ['file', blob(jsonl(1)), 'soon.jsonl'],
      ['expires_after[anchor]', 'created_at'],
      ['expires_after[seconds]', '3600'],
    ]);
    expect(r.status).toBe(200);
    expect(r.json.expires_at).toBe(r.json.created_at + 3600);
    const viaSdk = await client.files.create({
      file: await toFile(Buffer.from(jsonl(1)), 'sdk.jsonl'),
      purpose: 'batch',
      expires_after: { anchor: 'created_at', seconds: 7200 },
    });
    expect(viaSdk.expires_at).toBe(viaSdk.created_at + 7200);
  });

  describe('refuses, keeping nothing and billing nothing', () => {
    let before: bigint;
    let listed: string[];
    beforeEach(async () => {
      before = await balance();
      listed = await listIds();
    });
    afterEach(async () => {
      expect(await listIds()).toEqual(listed);
      // Not even an unpublished upload is left behind for the purge.
      expect((await gw.runtime.sql.query("SELECT id FROM files WHERE status = 'uploading'")).rows).toEqual([]);
      expect(await balance()).toBe(before);
    });

    it('a purpose other than batch, naming purpose and what is accepted, in either order', async () => {
      const err = await sdkRefusal(client.files.create({ file: await toFile(Buffer.from(jsonl(1)), 'ft.jsonl'), purpose: 'fine-tune' }));
      expect(err.status).toBe(400);
      expect(err.error).toMatchObject({ type: 'invalid_request_error', param: 'purpose', code: 'invalid_purpose', message: expect.stringContaining('batch') });
      for (const parts of [
        [
          ['purpose', 'fine-tune'],
          ['file', blob(jsonl(1)), 'a.jsonl'],
        ],
        [
          ['file', blob(jsonl(1)), 'a.jsonl'],
          ['purpose', 'fine-tune'],
        ],
        [['file', blob(jsonl(1)), 'a.jsonl']],
      ] as [string, string | Blob, string?][][]) {
        const r = await upload(parts);
        expect(r.status).toBe(400);
        expect(r.json.error).toMatchObject({ param: 'purpose' });
      }
    });

    it('a form without a file, or with a field it does not know', async () => {
      const r = await upload([['purpose', 'batch']]);
      expect(r.status).toBe(400);
      expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param: 'file', code: 'missing_required_parameter' });
      const unknown = await upload([
        ['purpose', 'batch'],
        ['file', blob(jsonl(1)), 'a.jsonl'],
        ['colour', 'blue'],
      ]);
      expect(unknown.status).toBe(400);
      expect(unknown.json.error).toMatchObject({ param: 'colour' });
      const twice = await upload([
        ['file', blob(jsonl(1)), 'a.jsonl'],
        ['file', blob(jsonl(1)), 'b.jsonl'],
        ['purpose', 'batch'],
      ]);
      expect(twice.status).toBe(400);
      expect(twice.json.error).toMatchObject({ param: 'file' });
      const json = await call('POST', '/files', { key: key(), body: { purpose: 'batch' } });
      expect(json.status).toBe(415);
    });

    it('a batch file that is not JSONL, naming file and the line', async () => {
      const text = `${jsonl(2)}this is not json\n${jsonl(1)}`;
      const err = await sdkRefusal(client.files.create({ file: await toFile(Buffer.from(text), 'bad.jsonl'), purpose: 'batch' }));
      expect(err.status).toBe(400);
      expect(err.error).toMatchObject({ type: 'invalid_request_error', param: 'file', code: 'invalid_json_line', message: expect.stringContaining('Line 3 ') });
      const array = await upload([
        ['purpose', 'batch'],
        ['file', blob('{"a": 1}\n[1]\n'), 'array.jsonl'],
      ]);
      expect(array.json.error).toMatchObject({ param: 'file', message: expect.stringContaining('Line 2 ') });
    });

    it('expires_after seconds outside an hour to 30 days', async () => {
      const err = await sdkRefusal(
        client.files.create({ file: await toFile(Buffer.from(jsonl(1)), 'a.jsonl'), purpose: 'batch', expires_after: { anchor: 'created_at', seconds: 10 } }),
      );
      expect(err.status).toBe(400);
      expect(err.error).toMatchObject({ param: 'expires_after[seconds]' });
    });
  });

  it('hides a file from another workspace: 404, never 403, and its list is its own', async () => {
    const file = await client.files.create({ file: await toFile(Buffer.from(jsonl(1)), 'mine.jsonl'), purpose: 'batch' });
    const { key: other } = await accountWithKey(gw, 1);
    const stranger = new OpenAI({ baseURL: gw.url, apiKey: other, maxRetries: 0 });
    for (const attempt of [stranger.files.retrieve(file.id), stranger.files.content(file.id), stranger.files.delete(file.id)]) {
      const err = await sdkRefusal(attempt);
      expect(err.status).toBe(404);
      expect(err.error).toMatchObject({ code: 'file_not_found', param: 'file_id' });
    }
    expect(await listIds(other)).toEqual([]);
    const theirs = await stranger.files.create({ file: await toFile(Buffer.from(jsonl(1)), 'theirs.jsonl'), purpose: 'batch' });
    expect(await listIds(other)).toEqual([theirs.id]);
    expect(await listIds()).not.toContain(theirs.id);
    expect((await client.files.retrieve(file.id)).id).toBe(file.id);
  });

  it('lets a read-only key read files but not upload or delete them', async () => {
    const file = await client.files.create({ file: await toFile(Buffer.from(jsonl(1)), 'shared.jsonl'), purpose: 'batch' });
    const created = await call('POST', '/keys', { key: gw.keys.management_key, body: { name: 'reader', scope: 'read_only' } });
    expect(created.status).toBe(201);
    const reader = new OpenAI({ baseURL: gw.url, apiKey: created.json.key, maxRetries: 0 });
    expect((await reader.files.retrieve(file.id)).id).toBe(file.id);
    expect(await (await reader.files.content(file.id)).text()).toBe(jsonl(1));
    expect((await sdkRefusal(reader.files.delete(file.id))).status).toBe(403);
    expect((await sdkRefusal(reader.files.create({ file: await toFile(Buffer.from(jsonl(1)), 'r.jsonl'), purpose: 'batch' }))).status).toBe(403);
  });

  it('checks the query of a list', async () => {
    for (const [query, param] of [
      ['limit=0', 'limit'],
      ['limit=10001', 'limit'],
      ['order=sideways', 'order'],
      ['after=nope', 'after'],
    ]) {
      const r = await call('GET', `/files?${query}`, { key: key() });
      expect(r.status).toBe(400);
      expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param });
    }
  });
});

describe('files on PostgreSQL, expiring (spec 4.11)', () => {
  const clock = new ManualClock(new Date('2026-11-02T10:00:00Z'));
  let gw: StartedGateway;
  let client: OpenAI;

  beforeAll(async () => {
    gw = await startGateway({ DATABASE_URL: await freshPgSchemaUrl('files') }, undefined, { clock });
    client = new OpenAI({ baseURL: gw.url, apiKey: gw.keys.api_key, maxRetries: 0 });
  }, 60_000);
  afterAll(() => stopGateway(gw));

  const rows = async (id: string) =>
    (await gw.runtime.sql.query('SELECT file_id FROM file_chunks WHERE file_id = $1 UNION ALL SELECT id FROM files WHERE id = $1', [id])).rows.length;

  it('is 404 from its expiry on, even before the hourly purge, which then deletes it and its chunks', async () => {
    const soon = await client.files.create({
      file: await toFile(Buffer.from(jsonl(2)), 'soon.jsonl'),
      purpose: 'batch',
      expires_after: { anchor: 'created_at', seconds: 3600 },
    });
    const later = await client.files.create({ file: await toFile(Buffer.from(jsonl(2)), 'later.jsonl'), purpose: 'batch' });
    expect(soon.created_at).toBe(clock.now().getTime() / 1000);

    clock.advance(3600_000 - 1000);
    expect(await (await client.files.content(soon.id)).text()).toBe(jsonl(2));
    expect(await gw.background.purgeFiles()).toBe(0);

    clock.advance(1000);
    expect((await sdkRefusal(client.files.retrieve(soon.id))).status).toBe(404);
    expect((await client.files.list()).data.map((f) => f.id)).toEqual([later.id]);
    expect(await rows(soon.id)).toBe(2);

    expect(await gw.background.purgeFiles()).toBe(1);
    expect(await rows(soon.id)).toBe(0);
    expect(await rows(later.id)).toBe(2);
  });
});
