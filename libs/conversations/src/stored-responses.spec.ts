import { randomBytes } from 'node:crypto';
import type { ResponseItem, ResponseObject } from '@svc/interfaces';
import { DomainError, openSecret, SecretDecryptionError, type SqlRunner } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import { sealContext, STORED_RESPONSE_RETENTION_MS, StoredResponses, type StoredResponseRecord } from './stored-responses';
import { memoryPglite } from '@svc/platform/testing/pglite';

const KEY = randomBytes(32);
const T0 = new Date('2026-11-02T10:00:00Z');

function stored(id: string, workspaceId = 'ws1', createdAt = T0): StoredResponseRecord {
  const inputItems: ResponseItem[] = [
    { type: 'message', id: `msg_${id}`, status: 'completed', role: 'user', content: [{ type: 'input_text', text: `secret of ${id}` }] },
  ];
  const response = {
    id,
    object: 'response',
    created_at: Math.floor(createdAt.getTime() / 1000),
    status: 'completed',
    output: [
      {
        type: 'message',
        id: `out_${id}`,
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: `answer of ${id}`, annotations: [] }],
      },
    ],
  } as unknown as ResponseObject;
  return { id, workspaceId, keyId: 'k1', createdAt, response, inputItems };
}

describe.each([
  ['pglite', () => memoryPglite()],
  ['postgres', () => freshPgRunner('conv')],
])('stored responses on %s', (_name, open) => {
  let sql: SqlRunner;
  let responses: StoredResponses;
  let key: Buffer | null = KEY;

  beforeAll(async () => {
    sql = await open();
    await StoredResponses.init(sql);
    // Twice: every process runs it at start.
    await StoredResponses.init(sql);
    responses = new StoredResponses(sql, () => key);
  }, 60_000);
  afterAll(() => sql?.close());
  afterEach(() => {
    key = KEY;
  });

  it('saves and finds a response and its input items, for its workspace only', async () => {
    const r = stored('resp_a');
    await responses.save(r);
    expect(await responses.find('resp_a', 'ws1', T0)).toEqual(r);
    expect(await responses.find('resp_a', 'ws2', T0)).toBeNull();
    expect(await responses.find('resp_nope', 'ws1', T0)).toBeNull();
    // A retried save changes nothing.
    await responses.save({ ...r, response: { ...r.response, status: 'failed' } });
    expect((await responses.find('resp_a', 'ws1', T0))?.response.status).toBe('completed');
  });

  it('keeps both columns sealed, each bound to its workspace, response and column', async () => {
    await responses.save(stored('resp_b'));
    const { rows } = await sql.query<{ response: string; input_items: string }>('SELECT response, input_items FROM stored_responses WHERE id = $1', ['resp_b']);
    const [row] = rows;
    expect(row.response).not.toContain('answer of');
    expect(row.input_items).not.toContain('secret of');
    expect(JSON.parse(openSecret(KEY, row.input_items, sealContext('ws1', 'resp_b', 'input_items')))).toEqual(stored('resp_b').inputItems);
    expect(() => openSecret(KEY, row.response, sealContext('ws1', 'resp_b', 'input_items'))).toThrow(SecretDecryptionError);
    expect(() => openSecret(KEY, row.response, sealContext('ws2', 'resp_b', 'response'))).toThrow(SecretDecryptionError);
    expect(() => openSecret(KEY, row.response, sealContext('ws1', 'resp_a', 'response'))).toThrow(SecretDecryptionError);

    // Moved to another workspace in the database, it does not open there: as gone as deleted (a 404, not a 500).
    await sql.query("UPDATE stored_responses SET workspace_id = 'ws2' WHERE id = 'resp_b'");
    await expect(responses.find('resp_b', 'ws2', T0)).resolves.toBeNull();
  });

  it('is visible until 30 days after its creation, then hidden; the purge removes it', async () => {
    const created = new Date(T0.getTime() + 60_000);
    await responses.save(stored('resp_c', 'ws3', created));
    await responses.save(stored('resp_d', 'ws3', new Date(created.getTime() + 1)));
    const expiry = new Date(created.getTime() + STORED_RESPONSE_RETENTION_MS);

    expect(await responses.find('resp_c', 'ws3', new Date(expiry.getTime() - 1))).not.toBeNull();
    expect(await responses.find('resp_c', 'ws3', expiry)).toBeNull();
    expect(await responses.delete('resp_c', 'ws3', expiry)).toBe(false);

    const count = async () => (await sql.query("SELECT id FROM stored_responses WHERE workspace_id = 'ws3' ORDER BY id")).rows;
    expect(await count()).toEqual([{ id: 'resp_c' }, { id: 'resp_d' }]);
    // Everything older is gone too (resp_a, resp_b from T0); resp_d has a millisecond left.
    expect(await responses.purgeExpired(expiry)).toBe(3);
    expect(await count()).toEqual([{ id: 'resp_d' }]);
    expect(await responses.purgeExpired(expiry)).toBe(0);
    expect(await responses.find('resp_d', 'ws3', expiry)).not.toBeNull();
  });

  it('deletes for the owning workspace only', async () => {
    await responses.save(stored('resp_e', 'ws4'));
    expect(await responses.delete('resp_e', 'ws5', T0)).toBe(false);
    expect(await responses.delete('resp_e', 'ws4', T0)).toBe(true);
    expect(await responses.delete('resp_e', 'ws4', T0)).toBe(false);
    expect(await responses.find('resp_e', 'ws4', T0)).toBeNull();
  });

  it('without an encryption key refuses to save or read with 503 storage_unavailable; delete and purge need none', async () => {
    await responses.save(stored('resp_f', 'ws6'));
    key = null;
    expect(responses.available).toBe(false);
    for (const attempt of [responses.save(stored('resp_g', 'ws6')), responses.find('resp_f', 'ws6', T0)]) {
      const err = await attempt.then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(DomainError);
      expect(err).toMatchObject({ kind: 'unavailable', code: 'storage_unavailable' });
    }
    expect(await responses.delete('resp_f', 'ws6', T0)).toBe(true);
    expect(await new StoredResponses(sql).purgeExpired(T0)).toBe(0);
  });
});
