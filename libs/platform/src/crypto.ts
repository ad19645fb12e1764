import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * Small secrets at rest (provider keys of BYOK), sealed with SVC_ENCRYPTION_KEY:
 * AES-256-GCM, a fresh random 12-byte nonce per seal, written as
 * `v1:<base64 nonce>:<base64 ciphertext+16-byte tag>`. The version prefix lets a later
 * scheme (another cipher, a key id for rotation) live next to this one in old events.
 *
 * `context` is bound in as additional authenticated data: a sealed value opens only under the
 * context it was sealed for (say `provider-key:<account>:<provider>`), so a ciphertext copied
 * from one account's record into another's does not decrypt.
 */
const VERSION = 'v1';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

export class SecretDecryptionError extends Error {
  override readonly name = 'SecretDecryptionError';
}

function checkKey(key: Buffer): void {
  if (key.length !== KEY_BYTES) throw new RangeError(`the encryption key must be ${KEY_BYTES} bytes, got ${key.length}`);
}

/** A fresh nonce, and the ciphertext with its tag appended. */
function encrypt(key: Buffer, plain: Buffer, context: string): { nonce: Buffer; body: Buffer } {
  checkKey(key);
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(context, 'utf8'));
  return { nonce, body: Buffer.concat([cipher.update(plain), cipher.final(), cipher.getAuthTag()]) };
}

function decrypt(key: Buffer, nonce: Buffer, body: Buffer, context: string): Buffer {
  if (nonce.length !== NONCE_BYTES || body.length < TAG_BYTES) throw new SecretDecryptionError('malformed sealed secret');
  const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  decipher.setAAD(Buffer.from(context, 'utf8'));
  decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(body.subarray(0, body.length - TAG_BYTES)), decipher.final()]);
  } catch {
    // GCM says only "unable to authenticate": wrong key, wrong context or altered bytes alike.
    throw new SecretDecryptionError('the sealed secret does not authenticate (wrong key, wrong context or tampered)');
  }
}

export function sealSecret(key: Buffer, plaintext: string, context = ''): string {
  const { nonce, body } = encrypt(key, Buffer.from(plaintext, 'utf8'), context);
  return `${VERSION}:${nonce.toString('base64')}:${body.toString('base64')}`;
}

/** True when `value` has the shape of a sealed secret (not whether it opens). */
export function isSealedSecret(value: string): boolean {
  const parts = value.split(':');
  return parts.length === 3 && parts[0] === VERSION && BASE64.test(parts[1]) && BASE64.test(parts[2]);
}

/** The plaintext; throws SecretDecryptionError on a wrong key, wrong context or any tampering. */
export function openSecret(key: Buffer, sealed: string, context = ''): string {
  checkKey(key);
  if (!isSealedSecret(sealed)) throw new SecretDecryptionError(`not a ${VERSION} sealed secret`);
  const [, nonceText, bodyText] = sealed.split(':');
  return decrypt(key, Buffer.from(nonceText, 'base64'), Buffer.from(bodyText, 'base64'), context).toString('utf8');
}

/**
 * Bytes at rest (file contents, a megabyte at a time), sealed as sealSecret seals text but
 * written as bytes, `<version byte 1><nonce><ciphertext+tag>`: base64 would store a third more.
 */
const BYTES_VERSION = 1;

export function sealBytes(key: Buffer, plain: Buffer, context = ''): Buffer {
  const { nonce, body } = encrypt(key, plain, context);
  return Buffer.concat([Buffer.of(BYTES_VERSION), nonce, body]);
}

/** The bytes; throws SecretDecryptionError on a wrong key, wrong context or any tampering. */
export function openBytes(key: Buffer, sealed: Uint8Array, context = ''): Buffer {
  checkKey(key);
  const bytes = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
  if (bytes[0] !== BYTES_VERSION) throw new SecretDecryptionError(`not version ${BYTES_VERSION} sealed bytes`);
  return decrypt(key, bytes.subarray(1, 1 + NONCE_BYTES), bytes.subarray(1 + NONCE_BYTES), context);
}

/** A new key for SVC_ENCRYPTION_KEY, base64 as the variable expects it. */
export function generateEncryptionKey(): string {
  return randomBytes(KEY_BYTES).toString('base64');
}
