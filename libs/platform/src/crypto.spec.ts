import { generateEncryptionKey, isSealedSecret, openBytes, openSecret, sealBytes, sealSecret, SecretDecryptionError } from './crypto';

const key = Buffer.from(generateEncryptionKey(), 'base64');
const secret = 'sk-or-v1-0123456789abcdef';

/** `sealed` with one byte of its ciphertext+tag flipped. */
function flipByte(sealed: string, index: number): string {
  const [v, nonce, body] = sealed.split(':');
  const bytes = Buffer.from(body, 'base64');
  bytes[index] ^= 0x01;
  return `${v}:${nonce}:${bytes.toString('base64')}`;
}

describe('sealed secrets (AES-256-GCM)', () => {
  it('round-trips, versioned, without the plaintext in the output', () => {
    const sealed = sealSecret(key, secret, 'provider-key:a1:openai');
    expect(sealed).toMatch(/^v1:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/);
    expect(sealed).not.toContain(secret);
    expect(Buffer.from(sealed.split(':')[1], 'base64')).toHaveLength(12);
    expect(isSealedSecret(sealed)).toBe(true);
    expect(openSecret(key, sealed, 'provider-key:a1:openai')).toBe(secret);
  });

  it('uses a fresh nonce each time', () => {
    const a = sealSecret(key, secret);
    const b = sealSecret(key, secret);
    expect(a.split(':')[1]).not.toBe(b.split(':')[1]);
    expect(a).not.toBe(b);
  });

  it.each([
    ['a flipped ciphertext byte', (s: string) => flipByte(s, 0)],
    ['a flipped tag byte', (s: string) => flipByte(s, Buffer.from(s.split(':')[2], 'base64').length - 1)],
    ['another nonce', (s: string) => `v1:${Buffer.alloc(12, 7).toString('base64')}:${s.split(':')[2]}`],
    ['a truncated body', (s: string) => `v1:${s.split(':')[1]}:${Buffer.from(s.split(':')[2], 'base64').subarray(0, 8).toString('base64')}`],
    ['an unknown version', (s: string) => s.replace(/^v1:/, 'v9:')],
  ])('refuses %s', (_, tamper) => {
    const sealed = sealSecret(key, secret, 'ctx');
    expect(() => openSecret(key, tamper(sealed), 'ctx')).toThrow(SecretDecryptionError);
  });

  it('opens only under the same key and context', () => {
    const sealed = sealSecret(key, secret, 'provider-key:a1:openai');
    expect(() => openSecret(key, sealed, 'provider-key:a2:openai')).toThrow(SecretDecryptionError);
    expect(() => openSecret(Buffer.from(generateEncryptionKey(), 'base64'), sealed, 'provider-key:a1:openai')).toThrow(SecretDecryptionError);
  });

  it('refuses a key that is not 32 bytes', () => {
    expect(() => sealSecret(Buffer.alloc(16), secret)).toThrow(RangeError);
  });
});

describe('sealed bytes', () => {
  const plain = Buffer.concat([Buffer.from('{"custom_id": "a"}\n'), Buffer.from([0, 255, 128])]);

  it('round-trips bytes as bytes: a version byte, the nonce, then ciphertext and tag', () => {
    const sealed = sealBytes(key, plain, 'file:f1:0');
    expect(sealed).toHaveLength(1 + 12 + plain.length + 16);
    expect(sealed.includes('custom_id')).toBe(false);
    expect(openBytes(key, sealed, 'file:f1:0').equals(plain)).toBe(true);
    expect(openBytes(key, new Uint8Array(sealed), 'file:f1:0').equals(plain)).toBe(true);
  });

  it('opens only under the same key and context, untampered', () => {
    const sealed = sealBytes(key, plain, 'file:f1:0');
    expect(() => openBytes(key, sealed, 'file:f1:1')).toThrow(SecretDecryptionError);
    expect(() => openBytes(Buffer.from(generateEncryptionKey(), 'base64'), sealed, 'file:f1:0')).toThrow(SecretDecryptionError);
    const flipped = Buffer.from(sealed);
    flipped[20] ^= 0x01;
    expect(() => openBytes(key, flipped, 'file:f1:0')).toThrow(SecretDecryptionError);
    expect(() => openBytes(key, Buffer.concat([Buffer.of(9), sealed.subarray(1)]), 'file:f1:0')).toThrow(SecretDecryptionError);
    expect(() => openBytes(key, sealed.subarray(0, 20), 'file:f1:0')).toThrow(SecretDecryptionError);
  });
});
