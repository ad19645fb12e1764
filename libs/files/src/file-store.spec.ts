import { randomBytes } from 'node:crypto';
import { ManualClock, openBytes, SecretDecryptionError, type SqlRunner } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import {
  createOutputFile,
  expiresAfterSeconds,
  FILE_CHUNK_BYTES,
  fileChunkContext,
  SqlFileStore,
  UNFINISHED_UPLOAD_TTL_MS,
  type FileRecord,
  type NewFile,
} from './file-store';
import { MAX_JSONL_LINES, readJsonl } from './jsonl';
import { memoryPglite } from '@svc/platform/testing/pglite';

const KEY = randomBytes(32);
const DAY_MS = 24 * 3600 * 1000;

function meta(workspaceId = 'ws1', filename = 'input.jsonl'): NewFile {
  return { workspaceId, accountId: `acct-${workspaceId}`, keyId: 'k1', filename, purpose: 'batch' };
}

/** `data` in pieces of `size` bytes, as a client's upload arrives. */
async function* pieces(data: Buffer | string, size = 64 * 1024): AsyncIterable<Buffer> {
  const bytes = Buffer.from(data);
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

async function collect(chunks: AsyncIterable<Buffer>): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for await (const chunk of chunks) out.push(chunk);
  return out;
}

describe.each([
  ['pglite', () => memoryPglite()],
  ['postgres', () => freshPgRunner('files')],
])('files on %s', (_name, open) => {
  let sql: SqlRunner;
  let files: SqlFileStore;
  let key: Buffer | null = KEY;
  const clock = new ManualClock(new Date('2026-11-02T10:00:00Z'));

  beforeAll(async () => {
    sql = await open();
    await SqlFileStore.init(sql);
    // Twice: every process runs it at start.
    await SqlFileStore.init(sql);
    files = new SqlFileStore(sql, () => key, clock);
  }, 60_000);
  afterAll(() => sql?.close());
  afterEach(() => {
    key = KEY;
  });

  const count = async (table: string, fileId: string) =>
    Number((await sql.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE ${table === 'files' ? 'id' : 'file_id'} = $1`, [fileId])).rows[0].n);
  const jsonl = (n: number, prefix = 'r') =>
    Array.from({ length: n }, (_, i) => JSON.stringify({ custom_id: `${prefix}-${i}`, method: 'POST' })).join('\n') + '\n';

  it('round-trips a 2.5 MiB file byte-exact in 1 MiB chunks, read back one chunk at a time', async () => {
    const data = randomBytes(2.5 * FILE_CHUNK_BYTES);
    // Pieces that do not divide a megabyte: chunks are cut across them.
    const file = await createOutputFile(files, { workspaceId: 'ws-big', accountId: 'a', keyId: 'k', filename: 'out.bin' }, pieces(data, 100_003));
    expect(file).toMatchObject({
      id: expect.stringMatching(/^file-[0-9a-f]{24}$/),
      purpose: 'batch_output',
      bytes: data.length,
      filename: 'out.bin',
      expiresAt: null,
    });
    const { rows } = await sql.query<{ seq: number; size: number }>('SELECT seq, octet_length(data) AS size FROM file_chunks WHERE file_id = $1 ORDER BY seq', [
      file.id,
    ]);
    expect(rows.map((r) => r.seq)).toEqual([0, 1, 2]);

    const chunks = await collect(files.content('ws-big', file.id));
    expect(chunks.map((c) => c.length)).toEqual([FILE_CHUNK_BYTES, FILE_CHUNK_BYTES, FILE_CHUNK_BYTES / 2]);
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
    expect(await files.get('ws-big', file.id)).toEqual(file);
  });

  it('seals every chunk and the file name: the plain text is nowhere in the table, and each chunk opens only as itself', async () => {
    const line = JSON.stringify({ custom_id: 'secret-request', body: { messages: [{ role: 'user', content: 'the plain text of a customer' }] } });
    const data = Array.from({ length: 20_000 }, () => line).join('\n');
    expect(data.length).toBeGreaterThan(FILE_CHUNK_BYTES);
    const file = await files.create(meta('ws1', 'customer-secrets.jsonl'), pieces(data));

    const { rows } = await sql.query<{ seq: number; data: Uint8Array }>('SELECT seq, data FROM file_chunks WHERE file_id = $1 ORDER BY seq', [file.id]);
    expect(rows).toHaveLength(Math.ceil(data.length / FILE_CHUNK_BYTES));
    for (const row of rows) expect(Buffer.from(row.data).includes('the plain text of a customer')).toBe(false);
    const [name] = (await sql.query<{ filename: string }>('SELECT filename FROM files WHERE id = $1', [file.id])).rows;
    expect(name.filename).not.toContain('customer-secrets');
    expect(openBytes(KEY, rows[1].data, fileChunkContext(file.id, 1)).toString()).toBe(data.slice(FILE_CHUNK_BYTES, 2 * FILE_CHUNK_BYTES));
    expect(() => openBytes(KEY, rows[1].data, fileChunkContext(file.id, 0))).toThrow(SecretDecryptionError);

    // Under another key (SVC_ENCRYPTION_KEY replaced) the file is as gone as a deleted one.
    key = randomBytes(32);
    expect(await files.get('ws1', file.id)).toBeNull();
    expect((await files.list('ws1', { limit: 100 })).map((f) => f.id)).not.toContain(file.id);
    await expect(collect(files.content('ws1', file.id))).rejects.toMatchObject({
      kind: 'not_found',
      code: 'file_not_found',
      param: 'file_id',
    });

    // Without any key, nothing is kept or read: 503 as stored responses answer.
    key = null;
    for (const attempt of [files.create(meta(), pieces('{}\n')), files.get('ws1', file.id), files.list('ws1', { limit: 10 })]) {
      await expect(attempt).rejects.toMatchObject({ kind: 'unavailable', code: 'storage_unavailable' });
    }
  });

  it("keeps each workspace's files to itself: another workspace's id is not found, and it cannot delete it", async () => {
    const file = await files.create(meta('ws-a'), pieces(jsonl(3)));
    expect(await files.get('ws-b', file.id)).toBeNull();
    expect(await files.list('ws-b', { limit: 100 })).toEqual([]);
    expect(await files.delete('ws-b', file.id)).toBe(false);
    await expect(collect(files.content('ws-b', file.id))).rejects.toMatchObject({ kind: 'not_found' });
    expect(await files.get('ws-a', file.id)).not.toBeNull();

    expect(await files.delete('ws-a', file.id)).toBe(true);
    expect(await files.get('ws-a', file.id)).toBeNull();
    expect(await files.delete('ws-a', file.id)).toBe(false);
    expect(await count('file_chunks', file.id)).toBe(0);
    expect(await files.get('ws-a', 'not-a-file-id')).toBeNull();
  });

  it("keeps the videos' files (purpose video) out of the Files API's sight, and the Files API's out of the videos' store", async () => {
    const videos = new SqlFileStore(sql, () => key, clock, ['video']);
    const clip = await videos.create({ ...meta('ws-video', 'v.mp4'), purpose: 'video' }, pieces(Buffer.from('not really an mp4')));
    const input = await files.create(meta('ws-video'), pieces(jsonl(1)));
    expect(clip.expiresAt).toBeNull();
    expect(await files.get('ws-video', clip.id)).toBeNull();
    expect((await files.list('ws-video', { limit: 10 })).map((f) => f.id)).toEqual([input.id]);
    expect(await files.delete('ws-video', clip.id)).toBe(false);
    await expect(collect(files.content('ws-video', clip.id))).rejects.toMatchObject({ kind: 'not_found' });
    expect(await videos.get('ws-video', input.id)).toBeNull();
    expect(Buffer.concat(await collect(videos.content('ws-video', clip.id))).toString()).toBe('not really an mp4');
    expect(await videos.delete('ws-video', clip.id)).toBe(true);
  });

  it('lists by creation, newest first by default, paged with after, filtered by purpose', async () => {
    const created: FileRecord[] = [];
    for (let i = 0; i < 5; i++) {
      clock.advance(1000);
      created.push(await files.create(meta('ws-list', `f${i}.jsonl`), pieces(jsonl(1, `f${i}`))));
    }
    clock.advance(1000);
    const output = await createOutputFile(files, { workspaceId: 'ws-list', accountId: 'a', keyId: 'k', filename: 'out.jsonl' }, pieces('{}\n'));
    const ids = created.map((f) => f.id);
    const page = (query: Parameters<SqlFileStore['list']>[1]) => files.list('ws-list', query).then((found) => found.map((f) => f.id));

    expect(await page({ limit: 10 })).toEqual([output.id, ...[...ids].reverse()]);
    expect(await page({ limit: 10, purpose: 'batch' })).toEqual([...ids].reverse());
    expect(await page({ limit: 10, purpose: 'batch_output' })).toEqual([output.id]);
    expect(await page({ limit: 2, purpose: 'batch', order: 'asc' })).toEqual(ids.slice(0, 2));
    expect(await page({ limit: 2, purpose: 'batch', order: 'asc', after: ids[1] })).toEqual(ids.slice(2, 4));
    expect(await page({ limit: 3, purpose: 'batch', after: ids[3] })).toEqual([ids[2], ids[1], ids[0]]);
    expect(await page({ limit: 3, purpose: 'batch', after: ids[0] })).toEqual([]);
    // A cursor of another workspace (or no file at all) is the end of the list, not a way in.
    const foreign = await files.create(meta('ws-elsewhere'), pieces('{}\n'));
    expect(await page({ limit: 10, after: foreign.id })).toEqual([]);
  });

  it('hides a file once it expires (30 days for batch files, or expires_after), and the purge deletes it with its chunks', async () => {
    const lasting = await files.create(meta('ws-exp'), pieces(jsonl(2)));
    const hourly = await files.create({ ...meta('ws-exp'), expiresAfterSeconds: 3600 }, pieces(jsonl(2)));
    expect(lasting.expiresAt).toEqual(new Date(lasting.createdAt.getTime() + 30 * DAY_MS));
    expect(hourly.expiresAt).toEqual(new Date(hourly.createdAt.getTime() + 3600_000));

    clock.advance(3600_000);
    expect(await files.get('ws-exp', hourly.id)).toBeNull();
    expect(await files.delete('ws-exp', hourly.id)).toBe(false);
    expect(await files.get('ws-exp', lasting.id)).not.toBeNull();
    expect(await count('file_chunks', hourly.id)).toBe(1);

    expect(await files.purgeExpired(clock.now())).toBeGreaterThanOrEqual(1);
    expect(await count('files', hourly.id)).toBe(0);
    expect(await count('file_chunks', hourly.id)).toBe(0);
    expect(await count('files', lasting.id)).toBe(1);

    clock.advance(30 * DAY_MS);
    await files.purgeExpired(clock.now());
    expect(await count('files', lasting.id)).toBe(0);
  });

  it('shows an upload to nobody until all of it is written; one never finished is purged a day later', async () => {
    let during: { listed: string[]; rows: { status: string }[]; chunks: number } | null = null;
    const store = files;
    async function* slowUpload(): AsyncIterable<Buffer> {
      yield Buffer.from(jsonl(1000)); // under a megabyte
      yield Buffer.alloc(FILE_CHUNK_BYTES, 0x20); // spaces: part of the last line, which stays blank
      const { rows } = await sql.query<{ id: string; status: string }>("SELECT id, status FROM files WHERE workspace_id = 'ws-up'");
      during = { listed: (await store.list('ws-up', { limit: 10 })).map((f) => f.id), rows, chunks: await count('file_chunks', rows[0].id) };
      yield Buffer.from('\n');
    }
    const staged = await files.stage(meta('ws-up'), slowUpload());
    expect(during).toEqual({ listed: [], rows: [expect.objectContaining({ status: 'uploading' })], chunks: 1 });
    // Written, not published (the form it came in is still being read): invisible.
    expect(await files.get('ws-up', staged.id)).toBeNull();
    expect(await files.list('ws-up', { limit: 10 })).toEqual([]);
    await expect(collect(files.content('ws-up', staged.id))).rejects.toMatchObject({ kind: 'not_found' });

    const published = await files.publish(staged, { expiresAfterSeconds: 7200 });
    expect(published).toMatchObject({ id: staged.id, bytes: staged.bytes, expiresAt: new Date(clock.now().getTime() + 7200_000) });
    expect((await files.list('ws-up', { limit: 10 })).map((f) => f.id)).toEqual([staged.id]);

    // A process that died mid-upload never publishes: the purge removes the row and its chunks, but not too soon.
    const crashed = await files.stage(meta('ws-up'), pieces(jsonl(10)));
    await files.purgeExpired(new Date(clock.now().getTime() + UNFINISHED_UPLOAD_TTL_MS - 1000));
    expect(await count('files', crashed.id)).toBe(1);
    await files.purgeExpired(new Date(clock.now().getTime() + UNFINISHED_UPLOAD_TTL_MS));
    expect(await count('files', crashed.id)).toBe(0);
    expect(await count('file_chunks', crashed.id)).toBe(0);
    await expect(files.publish(crashed)).rejects.toThrow(/removed before it was published/);

    const discarded = await files.stage(meta('ws-up'), pieces(jsonl(1)));
    await files.discard(discarded);
    expect(await count('files', discarded.id)).toBe(0);
  });

  describe('a batch file must be JSONL, checked as it streams', () => {
    const stagedRows = async () => Number((await sql.query<{ n: string }>("SELECT count(*) AS n FROM files WHERE workspace_id = 'ws-jsonl'")).rows[0].n);

    it('takes a line that spans two pieces, and one that spans the 1 MiB chunk boundary', async () => {
      const long = JSON.stringify({ custom_id: 'long', body: { input: 'x'.repeat(FILE_CHUNK_BYTES) } });
      const text = `{"custom_id": "a", "body": {"n": 1}}\n${long}\n{"custom_id": "c"}\n\n\n`;
      async function* split(): AsyncIterable<Buffer> {
        yield Buffer.from('{"custom_id": "a", "bo');
        yield Buffer.from(text.slice('{"custom_id": "a", "bo'.length, 500_000));
        yield Buffer.from(text.slice(500_000));
      }
      const file = await files.create(meta('ws-ok'), split());
      expect(Buffer.concat(await collect(files.content('ws-ok', file.id))).toString()).toBe(text);
      // What the batches read back: each request with its line, across the stored chunks.
      const read = [];
      for await (const { line, value } of readJsonl(files.content('ws-ok', file.id))) read.push({ line, custom_id: value.custom_id });
      expect(read).toEqual([
        { line: 1, custom_id: 'a' },
        { line: 2, custom_id: 'long' },
        { line: 3, custom_id: 'c' },
      ]);
      // No newline after the last line is fine too.
      await expect(files.create(meta('ws-ok'), pieces('{"a": 1}\n{"b": 2}'))).resolves.toMatchObject({ bytes: 17 });
    });

    it.each([
      ['a line broken across two pieces', ['{"custom_id": "a"}\n{"custom_', 'id": \n'], /Line 2 of the file is not valid JSON/],
      ['a line that is not an object', ['{"a": 1}\n[1, 2]\n'], /Line 2 of the file is not a JSON object/],
      ['an empty line before the end', ['{"a": 1}\n\n{"b": 2}\n'], /Line 2 of the file is empty; empty lines are allowed only at the end/],
      ['invalid UTF-8', [Buffer.from('{"a": 1}\n{"b": "'), Buffer.from([0xc3]), Buffer.from('"}\n')], /Line 2 of the file is not valid UTF-8/],
      ['a byte order mark, which JSON.parse does not take', ['\uFEFF{"a": 1}\n'], /Line 1 of the file is not valid JSON/],
      ['a bad line after a megabyte of good ones', [jsonl(30_000), 'nope\n'], /Line 30001 of the file is not valid JSON/],
    ])('refuses %s, naming file and the line, and keeps nothing', async (_case, parts, message) => {
      async function* upload(): AsyncIterable<Buffer> {
        for (const part of parts) yield Buffer.from(part);
      }
      await expect(files.create(meta('ws-jsonl'), upload())).rejects.toMatchObject({
        kind: 'invalid',
        param: 'file',
        code: 'invalid_json_line',
        message: expect.stringMatching(message),
      });
      expect(await stagedRows()).toBe(0);
      expect(Number((await sql.query<{ n: string }>('SELECT count(*) AS n FROM file_chunks WHERE file_id NOT IN (SELECT id FROM files)')).rows[0].n)).toBe(0);
    });

    it('refuses an empty file and one of more than 50,000 requests', async () => {
      await expect(files.create(meta('ws-jsonl'), pieces('\n\n'))).rejects.toMatchObject({ kind: 'invalid', param: 'file', code: 'empty_file' });
      const tooMany = '{}\n'.repeat(MAX_JSONL_LINES + 1);
      await expect(files.create(meta('ws-jsonl'), pieces(tooMany))).rejects.toMatchObject({ kind: 'invalid', param: 'file', code: 'too_many_lines' });
      await expect(files.create(meta('ws-jsonl-max'), pieces('{}\n'.repeat(MAX_JSONL_LINES)))).resolves.toMatchObject({ bytes: 3 * MAX_JSONL_LINES });
      expect(await stagedRows()).toBe(0);
    });

    it('does not check what the batches write', async () => {
      await expect(
        createOutputFile(files, { workspaceId: 'ws-out', accountId: 'a', keyId: 'k', filename: 'x.bin' }, pieces('not json')),
      ).resolves.toMatchObject({ bytes: 8 });
    });
  });
});

describe('expires_after', () => {
  const params = { anchor: 'expires_after[anchor]', seconds: 'expires_after[seconds]' };

  it('takes an hour to 30 days after created_at, as a form string or a number; none is the default', () => {
    expect(expiresAfterSeconds(undefined, undefined, params)).toBeUndefined();
    expect(expiresAfterSeconds('created_at', '3600', params)).toBe(3600);
    expect(expiresAfterSeconds('created_at', 2592000, params)).toBe(2592000);
  });

  it.each([
    ['created_at', '10', 'expires_after[seconds]'],
    ['created_at', '2592001', 'expires_after[seconds]'],
    ['created_at', '3600.5', 'expires_after[seconds]'],
    ['created_at', undefined, 'expires_after[seconds]'],
    ['now', '3600', 'expires_after[anchor]'],
    [undefined, '3600', 'expires_after[anchor]'],
  ])('refuses anchor %p and seconds %p, naming %s', (anchor, seconds, param) => {
    expect(() => expiresAfterSeconds(anchor, seconds, params)).toThrow(expect.objectContaining({ kind: 'invalid', param }));
  });
});
