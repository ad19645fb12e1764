import { ManualClock } from '../clock';
import { generateEncryptionKey, isSealedSecret, SecretDecryptionError } from '../crypto';
import { MemoryIdempotencyStore, type IdempotencyStore, type StoredResponse } from './idempotency';
import { SealedIdempotencyStore } from './sealed-idempotency';
import { idempotencyStoreContract, response } from './testing/contract';

const LOCK_MS = 30_000;
const SECRET = 'svc_live_0123456789abcdefghijABCDEFGHIJ0123456789';
const encryptionKey = Buffer.from(generateEncryptionKey(), 'base64');

/** An answer with the secret in its body, and an id in a header, as a created key's would be. */
const withSecret = (): StoredResponse =>
  response({
    status: 201,
    headers: { 'content-type': 'application/json', 'x-svc-generation-id': 'gen-abc' },
    body: JSON.stringify({ data: { id: 'key_1' }, key: SECRET }),
    sourceId: 'gen-abc',
  });

describe('sealed idempotency store over memory', () => {
  let clock: ManualClock;
  let inner: MemoryIdempotencyStore;
  let sealed: IdempotencyStore;

  beforeEach(() => {
    clock = new ManualClock();
    inner = new MemoryIdempotencyStore(clock);
    sealed = new SealedIdempotencyStore(inner, encryptionKey);
  });

  // Claims, conflicts, mismatches and retention behave exactly as the inner store's.
  idempotencyStoreContract(() => ({ clock, idempotency: sealed }));

  it('hands the inner store only the sealed answer, and replays the answer itself', async () => {
    await sealed.begin('key_m', 'k', 'fp1', LOCK_MS);
    await sealed.complete('key_m', 'k', 'fp1', withSecret());

    const raw = await inner.begin('key_m', 'k', 'fp1', LOCK_MS);
    expect(raw.state).toBe('replay');
    const held = (raw as { response: StoredResponse }).response;
    expect(JSON.stringify(held)).not.toContain(SECRET);
    expect(JSON.stringify(held)).not.toContain('gen-abc');
    expect(held).toMatchObject({ status: 201, kind: 'json', headers: {}, sourceId: '' });
    expect(isSealedSecret(held.body)).toBe(true);

    expect(await sealed.begin('key_m', 'k', 'fp1', LOCK_MS)).toEqual({ state: 'replay', response: withSecret() });
  });

  it('seals each answer afresh: the same answer kept twice is two different ciphertexts', async () => {
    for (const key of ['k1', 'k2']) {
      await sealed.begin('key_m', key, 'fp1', LOCK_MS);
      await sealed.complete('key_m', key, 'fp1', withSecret());
    }
    const [one, two] = await Promise.all(
      ['k1', 'k2'].map(async (key) => ((await inner.begin('key_m', key, 'fp1', LOCK_MS)) as { response: StoredResponse }).response.body),
    );
    expect(one).not.toBe(two);
  });

  it('does not open under another encryption key', async () => {
    await sealed.begin('key_m', 'k', 'fp1', LOCK_MS);
    await sealed.complete('key_m', 'k', 'fp1', withSecret());
    const other = new SealedIdempotencyStore(inner, Buffer.from(generateEncryptionKey(), 'base64'));
    await expect(other.begin('key_m', 'k', 'fp1', LOCK_MS)).rejects.toThrow(SecretDecryptionError);
  });

  it('does not open a sealed answer copied into the entry of another API key', async () => {
    await sealed.begin('key_m', 'k', 'fp1', LOCK_MS);
    await sealed.complete('key_m', 'k', 'fp1', withSecret());
    const copied = ((await inner.begin('key_m', 'k', 'fp1', LOCK_MS)) as { response: StoredResponse }).response;
    await inner.begin('key_other', 'k', 'fp1', LOCK_MS);
    await inner.complete('key_other', 'k', 'fp1', copied);
    await expect(sealed.begin('key_other', 'k', 'fp1', LOCK_MS)).rejects.toThrow(SecretDecryptionError);
  });
});
