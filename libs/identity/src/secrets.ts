import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { KeyEnvironment } from './key';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

const SECRET_LENGTH = 40;

/** 40 base62 characters from a CSPRNG (about 238 bits), so a plain SHA-256 is a sound hash. */
export function generateKeySecret(environment: KeyEnvironment): string {
  let body = '';
  while (body.length < SECRET_LENGTH) {
    // 248 = 4 * 62: dropping bytes above it keeps every character equally likely.
    for (const b of randomBytes(SECRET_LENGTH)) if (b < 248 && body.length < SECRET_LENGTH) body += ALPHABET[b % 62];
  }
  return `svc_${environment}_${body}`;
}

export function hashKeySecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

export function secretHint(secret: string): string {
  return `${secret.slice(0, 9)}...${secret.slice(-4)}`;
}

/** Constant-time comparison of two hex hashes. */
export function hashesEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Looks like one of our keys: cheap rejection before any lookup. */
export function isKeySecretShape(secret: string): boolean {
  return /^svc_(live|test)_[0-9A-Za-z]{40}$/.test(secret);
}
